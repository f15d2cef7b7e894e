"""What tests/e2e/test_publish_locks.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import json
import os
import socket
import time

from beam_tfrecords.publish import lock as lock_module


SCHEMA = {"name": "l", "features": {"id": "int64"}}


def _input(tmp_path, ids=(1, 2, 3)):
  path = tmp_path / "in.csv"
  path.write_text("id\n" + "".join(f"{i}\n" for i in ids))
  return str(path)


def _lock_text(**changes) -> str:
  info = {"tool": "beam-tfrecords", "run": "0123456789ab",
          "host": socket.gethostname(), "boot": lock_module._boot_id(),
          "pid_ns": lock_module._pid_namespace(),
          "pid": os.getpid(), "pid_start": lock_module._pid_start(
              os.getpid()),
          "started": time.time() - 60, "renewed": time.time(),
          "lease_seconds": 120.0, "output": "x"}
  info.update(changes)
  return json.dumps(info)

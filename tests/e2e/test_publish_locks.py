"""One build at a time per output (issue 17): the lock, its lease, stale
locks taken over, a lost lock publishing nothing; locally and on a real
S3 server (moto's, on 127.0.0.1)."""

import json
import logging
import os
import re
import subprocess
import sys
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords.publish.lock import LOCK_FILE, stale_reason

from tests.helpers.publish_locks import SCHEMA, _input, _lock_text


def _dead_pid() -> int:
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


@pytest.mark.parametrize("lock,reason", [
    ({"pid": "dead"}, "its process (pid {pid} on this host) has ended"),
    ({"host": "elsewhere", "renewed": -1000.0},
     "its lease expired 88[0-9] s ago"),
    ({"pid_start": "1"}, "its process (pid {pid} on this host) has ended"),
], ids=["dead_pid", "lease_expired", "pid_reused"])
def test_a_stale_lock_is_taken_over_with_a_log_line(tmp_path, caplog, lock,
                                                    reason):
  out = tmp_path / "out"
  out.mkdir()
  if isinstance(lock, dict):
    lock = dict(lock)
    if lock.get("pid") == "dead":
      lock["pid"] = _dead_pid()
    if "renewed" in lock:
      lock["renewed"] += time.time()
    text = _lock_text(**lock)
    reason = reason.replace("{pid}", str(lock.get("pid", os.getpid())))
  else:
    text = lock
  (out / LOCK_FILE).write_text(text)
  with caplog.at_level(logging.WARNING, logger="beam_tfrecords"):
    result = btr.build(SCHEMA, _input(tmp_path), str(out))
  assert sorted(r["id"] for r in btr.iter_records(result.output)) == [1, 2, 3]
  (line,) = [r.getMessage() for r in caplog.records
             if "took over the lock" in r.getMessage()]
  assert line.startswith(f"{out}: took over the lock of a build that is not "
                         "running (")
  assert re.search(r"\): " + reason.replace("(", r"\(").replace(
      ")", r"\)") + "$", line), line
  assert not (out / LOCK_FILE).exists()  # released at the end


def test_stale_reason_judges_host_pid_and_lease():
  now = 1_000_000.0
  base = json.loads(_lock_text(renewed=now - 10, started=now - 100))
  assert stale_reason(base, now) is None
  assert stale_reason(dict(base, host="other"), now) is None
  assert stale_reason(dict(base, host="other", renewed=now - 121),
                      now) == "its lease expired 1 s ago"
  # Another boot of this host: the pid says nothing, the lease does.
  assert stale_reason(dict(base, boot="old-boot", pid=_dead_pid()),
                      now) is None
  # Another pid namespace (a container on this host): only the lease.
  assert stale_reason(dict(base, pid_ns="other", pid=_dead_pid()),
                      now) is None
  assert stale_reason(dict(base, lease_seconds="x"), now) is None


def test_a_build_that_lost_its_lock_publishes_nothing(tmp_path, monkeypatch):
  """Its lease ran out (a suspended laptop) and another build took over:
  at publish time it finds out and stops, leaving the other's lock."""
  from beam_tfrecords.publish import finish as pipeline
  out = tmp_path / "out"
  check = pipeline.check_thresholds
  other = _lock_text(run="fedcba987654", host="elsewhere")

  def taken_over(*args):
    (out / LOCK_FILE).write_text(other)
    return check(*args)

  monkeypatch.setattr(pipeline, "check_thresholds", taken_over)
  with pytest.raises(btr.OutputBusyError) as e:
    btr.build(SCHEMA, _input(tmp_path), str(out))
  assert str(e.value) == (f"{out}: the lock was removed or taken over by "
                          "another build; this build publishes nothing")
  assert not (out / "_SUCCESS").exists()
  assert (out / LOCK_FILE).read_text() == other  # not removed by the loser



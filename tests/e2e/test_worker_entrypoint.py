"""runners.worker_entrypoint: boot runs with its arguments and its exit
status; a worker whose runner stopped answering is stopped after the
grace period, one whose runner answers is not. Boot is a stand-in script
here (the worker image's tests run the real one)."""

import os
import signal
import socket
import sys
import threading
import time

import pytest

from beam_tfrecords.runners import worker_entrypoint as entry


def _boot(tmp_path, body):
  """A stand-in for Beam's boot: a shell script."""
  script = tmp_path / "boot"
  script.write_text("#!/bin/sh\n" + body + "\n")
  script.chmod(0o755)
  return str(script)


def test_the_provision_endpoint_is_read_from_boots_arguments():
  assert entry.endpoint(["--id=1", "--provision_endpoint=localhost:4711",
                         "--control_endpoint=localhost:1"]) == (
                             "localhost", 4711)
  assert entry.endpoint(["--provision_endpoint", "[::1]:80"]) == ("::1", 80)
  assert entry.endpoint(["--worker_pool"]) is None
  assert entry.endpoint(["--provision_endpoint=nohost"]) is None


def test_boot_gets_the_arguments_and_its_status_is_the_workers(tmp_path):
  seen = tmp_path / "args"
  boot = _boot(tmp_path, f'echo "$@" > {seen}; exit 3')
  assert entry.main(["--id=1", "--x=1"], boot=boot, grace=1,
                    period=0.1) == 3
  assert seen.read_text() == "--id=1 --x=1\n"


def test_a_worker_pool_starts_its_workers_through_the_entrypoint(
    tmp_path, monkeypatch):
  """--worker_pool runs Beam's worker_pool_main as boot does, with this
  entrypoint's command as the workers' executable; the pool gets its id
  as from boot."""
  assert entry.pool_command("/w") == [
      sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
      "--service_port=50000", "--container_executable=/w"]
  seen = tmp_path / "pool"
  pool = _boot(tmp_path, f'echo "$BEAM_PYTHON_WORKER_POOL_ID $@" > {seen}')
  assert entry.pool_port(["--worker_pool"]) == 50000
  assert entry.pool_port(["--worker_pool", "--service_port=4711"]) == 4711
  monkeypatch.setattr(entry, "pool_command",
                      lambda port: [pool, f"--p={port}"])
  assert entry.main(["--worker_pool", "--service_port=4711"],
                    boot="/not/boot", grace=1, period=0.1) == 0
  assert seen.read_text() == f"{os.getpid()} --p=4711\n"


def test_a_worker_whose_runner_is_gone_is_stopped_after_the_grace(
    tmp_path, capfd):
  pid_file = tmp_path / "pid"
  boot = _boot(tmp_path, f"echo $$ > {pid_file}; exec sleep 600")
  runner = socket.create_server(("127.0.0.1", 0))
  port = runner.getsockname()[1]
  threading.Timer(1.5, runner.close).start()  # the runner dies at 1.5 s
  started = time.monotonic()
  status = entry.main([f"--provision_endpoint=127.0.0.1:{port}"],
                      boot=boot, grace=1.0, period=0.2)
  took = time.monotonic() - started
  assert status == 1
  assert 2.5 <= took < 10, took  # answered until 1.5 s, then 1 s of grace
  with pytest.raises(ProcessLookupError):
    os.kill(int(pid_file.read_text()), 0)  # boot is gone
  assert (f"the runner at 127.0.0.1:{port} has been unreachable for 1 s; "
          "stopping this worker.") in capfd.readouterr().err


def test_a_worker_whose_runner_answers_runs_to_its_end(tmp_path):
  boot = _boot(tmp_path, "sleep 2; exit 0")
  with socket.create_server(("127.0.0.1", 0)) as runner:
    port = runner.getsockname()[1]
    assert entry.main([f"--provision_endpoint=127.0.0.1:{port}"],
                      boot=boot, grace=0.5, period=0.1) == 0


def test_a_stop_signal_goes_to_boot(tmp_path):
  """docker stop sends SIGTERM to the entrypoint: boot gets it (here it
  exits 7 on it), and the handlers are as before afterwards."""
  boot = _boot(tmp_path, "trap 'exit 7' TERM; sleep 600 & wait")
  before = signal.getsignal(signal.SIGTERM)
  threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
  assert entry.main(["--id=1"], boot=boot, grace=1, period=0.1) == 7
  assert signal.getsignal(signal.SIGTERM) is before

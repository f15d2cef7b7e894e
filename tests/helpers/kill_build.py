"""A build on the command line, killed (kill -9) once it has done some
work: for the tests of what its rerun reuses (issue 62)."""

import os
import signal
import subprocess
import sys
import time
from typing import Callable, List


def build_command(schema: str, inputs: List[str], out: str) -> List[str]:
  """`beam-tfrecords build` of these inputs into `out`, 2 shards, one
  DirectRunner worker."""
  command = [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
             schema, "--output", out, "--num-shards", "2",
             "--direct_num_workers=1"]
  for path in inputs:
    command += ["--input", path]
  return command


def kill_when(command: List[str], env: dict, ready: Callable[[], bool],
              timeout: float = 240, cwd=None) -> float:
  """Starts the command (in `cwd`) and kills it with SIGKILL as soon as
  `ready()`; fails if it ended first. When it was killed."""
  build = subprocess.Popen(command, env=env, cwd=cwd,
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
  deadline = time.time() + timeout
  while time.time() < deadline and build.poll() is None:
    if ready():
      break
    time.sleep(0.05)
  assert build.poll() is None, "the build ended before it was killed"
  build.send_signal(signal.SIGKILL)
  killed = time.time()
  build.wait(60)
  return killed


def build_env() -> dict:
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
              SOURCE_DATE_EPOCH="1700000000")


def rerun_here(command: List[str]) -> int:
  """The same `build_command` run again, through the command's entry point
  in this process (the killed build was the fresh process; the rerun
  finds what it left as any process would): its exit code. The caller
  sets build_env's SOURCE_DATE_EPOCH (monkeypatch)."""
  from beam_tfrecords import cli  # pylint: disable=import-outside-toplevel
  assert command[1:3] == ["-m", "beam_tfrecords"], command
  return cli.main(command[3:])

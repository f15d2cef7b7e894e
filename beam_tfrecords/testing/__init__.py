"""What the tests and benchmarks use to run builds the way clusters do."""

import glob
import os
import shutil
import signal
import subprocess
import time
from typing import List, Optional, TextIO


class LocalServers:
  """Processes started by `start()`, stopped by `close()`; a context
  manager that stops what started when starting fails halfway."""

  def start(self) -> None:
    raise NotImplementedError

  def close(self) -> None:
    raise NotImplementedError

  def __enter__(self):
    try:
      self.start()
    except BaseException:
      self.close()
      raise
    return self

  def __exit__(self, *exc):
    self.close()


def stop_groups(procs: List[subprocess.Popen], seconds: float = 20) -> None:
  """Stops processes started with start_new_session=True, newest first,
  each with its process group (what it started): SIGTERM, then SIGKILL
  after `seconds`."""
  for proc in reversed(procs):
    if proc.poll() is not None:
      continue
    try:
      os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
      continue
    try:
      proc.wait(seconds)
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()


class EngineCluster(LocalServers):
  """A cluster of an engine's own processes (each in a process group of
  its own, in `_procs`), ready when `_nodes()` (ids read from its REST
  API) counts enough, and the workers' Python (testing.portable) in
  `pool`.

  Two ways to submit, both in docs/operations.md: `args` has the runner
  start a job server from its jar for each job (--*_job_server_jar), and
  `endpoint_args` sends jobs to one standing job server the cluster
  started (--job_endpoint), as a site that runs one does.
  """

  WHAT = "nodes"
  # Folders under `workdir` (glob patterns) removed once the processes
  # stopped: the engine's copies of jars per job, hundreds of MB each,
  # which no log needs (a full cluster tier left 4.9 GB of them).
  SCRATCH: tuple = ()

  def __init__(self, workdir: str):
    self.workdir = os.path.abspath(workdir)
    self.pool: Optional[LocalServers] = None
    self._procs: List[subprocess.Popen] = []
    self._logs: List[TextIO] = []
    self._killed: List[subprocess.Popen] = []
    self._old: set = set()
    self.endpoint_args: List[str] = []

  def _start_job_server(self, command: List[str], env: dict) -> str:
    """Starts `command` (java ... -jar JOB_SERVER --<engine>-master ...)
    with the job, artifact and expansion ports it is given; its
    endpoint (localhost:port) once it listens."""
    from beam_tfrecords.testing.portable import free_port, wait_for_port
    port = free_port()
    artifacts = os.path.join(self.workdir, "artifacts")
    os.makedirs(artifacts, exist_ok=True)
    log = open(os.path.join(self.workdir, "jobserver.out"), "w")
    self._logs.append(log)
    proc = subprocess.Popen(
        command + ["--artifacts-dir", artifacts, "--job-port", str(port),
                   "--artifact-port", str(free_port()),
                   "--expansion-port", str(free_port())],
        cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    self._procs.append(proc)
    wait_for_port(port, proc, "job server", seconds=120)
    return f"localhost:{port}"

  def _nodes(self) -> set:
    raise NotImplementedError

  def _wait_for(self, count: int, seconds: float = 120,
                new: bool = False) -> None:
    """Until `count` members are up (with `new`, one that was not when
    one was killed: an engine counts a killed one until its heartbeats
    time out)."""
    deadline = time.time() + seconds
    while True:
      try:
        ids = self._nodes()
        if len(ids) == count and not (new and ids <= self._old):
          return
      except OSError:
        pass
      dead = [p for p in self._procs if p.poll() is not None
              and p not in self._killed]
      if dead or time.time() > deadline:
        raise RuntimeError(f"the cluster did not report {count} "
                           f"{self.WHAT} (logs in {self.workdir})")
      time.sleep(0.5)

  def _kill(self, proc: subprocess.Popen) -> None:
    """SIGKILLs a member's process group, as a lost machine."""
    self._old = self._nodes()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    self._killed.append(proc)

  def close(self) -> None:
    if self.pool is not None:
      self.pool.close()
      self.pool = None
    stop_groups(self._procs)
    self._procs = []
    for log in self._logs:
      log.close()
    self._logs = []
    for pattern in self.SCRATCH:
      for path in glob.glob(os.path.join(self.workdir, pattern)):
        if os.path.isdir(path):
          shutil.rmtree(path, ignore_errors=True)
        else:
          os.remove(path)

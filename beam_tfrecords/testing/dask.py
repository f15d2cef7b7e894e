"""A dask.distributed cluster on this machine: a scheduler and worker
processes, each its own `dask scheduler` / `dask worker` process listening
on 127.0.0.1 (what docs/operations.md's two-machine Dask recipe runs, on
one machine).

    with LocalDask(workdir, workers=2) as cluster:
      btr.build(..., beam_args=["--runner", "DaskRunner"] + cluster.args)

The processes run in a directory of their own with nothing on PYTHONPATH:
they import beam_tfrecords from this Python's installation, as a cluster's
machines import it from theirs. (The scheduler unpickles the task graph
too, so it needs the package as much as the workers do.)
"""

import json
import os
import subprocess
import sys
import time
from typing import List, TextIO

from beam_tfrecords.testing import LocalServers, stop_groups

__all__ = ["LocalDask"]

TIMEOUT = 120


class LocalDask(LocalServers):
  """`dask scheduler` + `workers` x `dask worker` (each under its nanny,
  which restarts it when it dies); `args` are the Beam flags to use it."""

  def __init__(self, workdir: str, workers: int = 2, threads: int = 1):
    self.workdir = os.path.abspath(workdir)
    self.workers = workers
    self.threads = threads
    self.address = ""
    self.args: List[str] = []
    self._procs: List[subprocess.Popen] = []
    self._logs: List[TextIO] = []

  def _spawn(self, name: str, args: List[str]) -> subprocess.Popen:
    log = open(os.path.join(self.workdir, f"{name}.log"), "w")
    self._logs.append(log)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    # Their own process group: close() stops a worker's nanny and the
    # worker it started.
    proc = subprocess.Popen([dask] + args, cwd=self.workdir, env=env,
                            stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    self._procs.append(proc)
    return proc

  def start(self) -> None:
    os.makedirs(self.workdir, exist_ok=True)
    info = os.path.join(self.workdir, "scheduler.json")
    scheduler = self._spawn("scheduler", [
        "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
        "--scheduler-file", info])
    deadline = time.time() + TIMEOUT
    while not os.path.exists(info):
      if scheduler.poll() is not None or time.time() > deadline:
        raise RuntimeError(f"the dask scheduler did not start (see "
                           f"{self.workdir}/scheduler.log)")
      time.sleep(0.1)
    time.sleep(0.2)  # the file is written, then filled
    with open(info) as f:
      self.address = json.load(f)["address"]
    for i in range(self.workers):
      self._spawn(f"worker{i}", [
          "worker", self.address, "--host", "127.0.0.1", "--nthreads",
          str(self.threads), "--no-dashboard", "--name", f"worker{i}",
          "--local-directory", os.path.join(self.workdir, f"worker{i}")])
    self.wait_for_workers(self.workers)
    self.args = [f"--dask_client_address={self.address}"]

  def client(self):
    from distributed import Client  # pylint: disable=import-outside-toplevel
    return Client(self.address, timeout=TIMEOUT)

  def wait_for_workers(self, n: int) -> None:
    with self.client() as client:
      client.wait_for_workers(n, timeout=TIMEOUT)

  def worker_pids(self) -> List[int]:
    """The worker processes' pids (not their nannies')."""
    with self.client() as client:
      return sorted(client.run(os.getpid).values())

  def tasks_per_worker(self) -> dict:
    """{worker address: tasks it has run}: where the work went."""
    with self.client() as client:
      return client.run(
          lambda dask_worker: dask_worker.state.executed_count)

  def close(self) -> None:
    stop_groups(self._procs, 15)
    self._procs = []
    for log in self._logs:
      log.close()
    self._logs = []

"""Beam's portable path on this machine: a job service and a worker pool.

    with LocalPortable(workdir, source=REPO) as cluster:
      btr.build(..., beam_args=cluster.args)

`local_job_service_main` is the job server; `worker_pool_main` serves the
EXTERNAL environment, as Flink and Spark run Python. Both listen on
127.0.0.1. The workers' Python is a virtualenv of its own, started in
another directory with nothing on PYTHONPATH. It sees this environment's
site-packages (Beam, TensorFlow: what the SDK container image holds) but
not its editable install of beam_tfrecords: with `source`, the package
is installed from a wheel built from it; without, workers have it only if
the job ships it. With `boot=True` every worker starts through
`boot.py`, which installs what the job staged (--setup_file,
--extra_package), as the SDK container does.
"""

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from typing import List, Optional, TextIO

from beam_tfrecords.testing import LocalServers

__all__ = ["LocalPortable", "free_port", "wait_for_port", "source_wheel"]

TIMEOUT = 300


def _source_digest(source: str) -> str:
  """A hash of what a wheel of `source` is built from."""
  digest = hashlib.sha256()
  for top in ("setup.py", "beam_tfrecords", "pipelines"):
    start = os.path.join(source, top)
    walk = (os.walk(start) if os.path.isdir(start)
            else [(source, [], [top])])
    for root, dirs, files in walk:
      dirs[:] = sorted(d for d in dirs if d != "__pycache__")
      for name in sorted(files):
        path = os.path.join(root, name)
        digest.update(os.path.relpath(path, source).encode() + b"\0")
        with open(path, "rb") as f:
          digest.update(f.read())
  return digest.hexdigest()[:16]


def source_wheel(source: str) -> str:
  """The path of a wheel of `source`, built once for its content (the
  test clusters of a run, and later runs, install the same file)."""
  folder = os.path.join(tempfile.gettempdir(), "btr-wheels",
                        _source_digest(source))
  os.makedirs(os.path.dirname(folder), exist_ok=True)
  with open(folder + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not os.path.isdir(folder):
      building = folder + ".building"
      shutil.rmtree(building, ignore_errors=True)
      subprocess.run([sys.executable, "-m", "pip", "wheel", "-q",
                      "--no-deps", "-w", building, source], check=True,
                     timeout=TIMEOUT, capture_output=True)
      os.rename(building, folder)
  (name,) = [n for n in os.listdir(folder) if n.endswith(".whl")]
  return os.path.join(folder, name)


def free_port() -> int:
  """A free TCP port on 127.0.0.1."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def wait_for_port(port: int, proc, what: str, seconds: float = 60) -> None:
  """Waits until a server started as `proc` listens on `port`."""
  deadline = time.time() + seconds
  while True:
    try:
      socket.create_connection(("127.0.0.1", port), 0.2).close()
      return
    except OSError:
      if time.time() > deadline or proc.poll() is not None:
        if proc.poll() is None:
          proc.kill()
        raise RuntimeError(f"the {what} did not start")
      time.sleep(0.1)


# Beam's worker_pool_main, listening on 127.0.0.1 instead of every
# interface ("[::]:port" is written into it).
_POOL_ON_LOOPBACK = """
import sys
import grpc
_server = grpc.server
def _loopback_server(*args, **kwargs):
  server = _server(*args, **kwargs)
  add = server.add_insecure_port
  server.add_insecure_port = lambda address: add(
      address.replace("[::]", "127.0.0.1"))
  return server
grpc.server = _loopback_server
from apache_beam.runners.worker import worker_pool_main
sys.argv[0] = "worker_pool_main"
worker_pool_main.main()
"""


# Beam's local job service (its FnApiRunner), with two changes that make
# it run as a cluster's job service does: `--sdk_worker_parallelism N`
# gives each stage N SDK workers (the local service runs every stage on
# one), and the EXTERNAL environment's address is a dispatcher that starts
# workers round-robin on several worker pools, as each machine of a Flink
# or Spark cluster has its own. (What it does not do as a cluster does:
# notice a worker that died. Its FnApiRunner then waits for the lost
# worker's answers, sometimes forever; see docs/operations.md.)
_JOB_SERVICE = """
import itertools
import sys
from concurrent import futures

import grpc
from apache_beam.options.pipeline_options import PortableOptions
from apache_beam.portability.api import beam_fn_api_pb2_grpc
from apache_beam.portability.api import beam_job_api_pb2
from apache_beam.runners.portability import local_job_service
from apache_beam.runners.portability import local_job_service_main
from apache_beam.runners.portability.fn_api_runner import fn_runner


def _invoke_runner(self):
  self.set_state(beam_job_api_pb2.JobState.RUNNING)
  runner = fn_runner.FnApiRunner(provision_info=self._provision_info)
  options = self.pipeline_options()
  runner._num_workers = max(
      1, int(options.view_as(PortableOptions).sdk_worker_parallelism or 1))
  return runner.run_via_runner_api(self._pipeline_proto, options)


local_job_service.BeamJob._invoke_runner = _invoke_runner


class Dispatcher(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):
  def __init__(self, pools):
    self._stubs = [beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub(
        grpc.insecure_channel(p)) for p in pools]
    self._turn = itertools.cycle(range(len(pools)))
    self._owner = {}

  def StartWorker(self, request, context):
    i = next(self._turn)
    self._owner[request.worker_id] = i
    print(f"worker {request.worker_id} -> pool {i}", flush=True)
    return self._stubs[i].StartWorker(request)

  def StopWorker(self, request, context):
    return self._stubs[self._owner.pop(request.worker_id, 0)].StopWorker(
        request)


port, pools = sys.argv[1], sys.argv[2].split(",")
server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(
    Dispatcher(pools), server)
server.add_insecure_port("127.0.0.1:" + port)
server.start()
local_job_service_main.run(sys.argv[3:])
"""


class LocalPortable(LocalServers):
  """A job service + worker pool; `args` are the Beam flags to use them.
  With `servers=False`, neither: the workers' Python only, for a Flink or
  Spark cluster's job server, and `args` are a PROCESS environment whose
  command boots a worker with it (each TaskManager or executor starts its
  own workers; one worker pool shared by several would take them for one
  another: they number their workers alike)."""

  def __init__(self, workdir: str, source: Optional[str] = None,
               boot: bool = False, pools: int = 1, servers: bool = True):
    self.workdir = os.path.abspath(workdir)
    self.source = source
    self.boot = boot
    # With pools > 1: that many worker-pool processes behind a dispatcher,
    # and --sdk_worker_parallelism honoured (see _JOB_SERVICE).
    self.pools = pools
    self.servers = servers
    self.pool_procs: List[subprocess.Popen] = []
    self.args: List[str] = []
    self._procs: List[subprocess.Popen] = []
    self._log: Optional[TextIO] = None

  def _run(self, cmd, **kwargs):
    return subprocess.run(cmd, check=True, timeout=TIMEOUT,
                          capture_output=True, text=True, **kwargs)

  def start(self) -> None:
    os.makedirs(self.workdir, exist_ok=True)
    venv = os.path.join(self.workdir, "worker-venv")
    self._run([sys.base_prefix + "/bin/python3", "-m", "venv",
               "--without-pip", venv])
    self.python = os.path.join(venv, "bin", "python")
    self.purelib = self._run(
        [self.python, "-c", "import sysconfig; "
         "print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    # Beam, TensorFlow, ... from this environment; a path entry does not
    # run this environment's editable-install hooks.
    with open(os.path.join(self.purelib, "deps.pth"), "w") as f:
      f.write(sysconfig.get_paths()["purelib"] + "\n")
    if self.source:
      self.install(source_wheel(self.source))
    cwd = os.path.join(self.workdir, "workers")
    os.makedirs(cwd, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    env["BOOT_PIP"] = os.path.join(os.path.dirname(sys.executable), "pip")
    env["BOOT_DIR"] = os.path.join(self.workdir, "boot")
    os.makedirs(env["BOOT_DIR"], exist_ok=True)
    self.env, self.cwd = env, cwd
    pool_cmd = [self.python, "-c", _POOL_ON_LOOPBACK]
    if self.boot or not self.servers:
      boot = os.path.join(self.workdir, "boot.sh")
      with open(boot, "w") as f:
        f.write("#!/bin/sh\nunset PYTHONPATH\n" + "".join(
            f"export {k}={shlex.quote(env[k])}\n"
            for k in ("PATH", "BOOT_PIP", "BOOT_DIR")) +
                f"cd {shlex.quote(cwd)}\nexec {self.python} "
                f"{os.path.join(os.path.dirname(__file__), 'boot.py')} "
                '"$@"\n')
      os.chmod(boot, 0o755)
      pool_cmd.append(f"--container_executable={boot}")
    if not self.servers:
      self.args = ["--environment_type=PROCESS",
                   "--environment_config=" + json.dumps({"command": boot})]
      return
    job_port = free_port()
    self._log = open(os.path.join(self.workdir, "servers.log"), "w")
    pool_ports = [free_port() for _ in range(self.pools)]
    for port in pool_ports:
      pool = subprocess.Popen(pool_cmd + [f"--service_port={port}"],
                              cwd=cwd, env=env, stdout=self._log,
                              stderr=subprocess.STDOUT)
      self._procs.append(pool)
      self.pool_procs.append(pool)
    if self.pools == 1:
      pool_port = pool_ports[0]
      service = [sys.executable, "-m",
                 "apache_beam.runners.portability.local_job_service_main"]
    else:
      pool_port = free_port()  # the dispatcher's
      service = [sys.executable, "-c", _JOB_SERVICE, str(pool_port),
                 ",".join(f"127.0.0.1:{p}" for p in pool_ports)]
    jobs = subprocess.Popen(service + [f"--port={job_port}"], cwd=cwd,
                            stdout=self._log, stderr=subprocess.STDOUT)
    self._procs.append(jobs)
    for port, pool in zip(pool_ports, self.pool_procs):
      wait_for_port(port, pool, "worker pool")
    wait_for_port(job_port, jobs, "job service")
    if self.pools > 1:
      wait_for_port(pool_port, jobs, "worker-pool dispatcher")
    self.args = ["--runner=PortableRunner",
                 f"--job_endpoint=localhost:{job_port}",
                 "--environment_type=EXTERNAL",
                 f"--environment_config=localhost:{pool_port}"]

  def sdk_workers(self) -> List[List[int]]:
    """The pids of the SDK worker processes each pool runs now."""
    found = []
    for pool in self.pool_procs:
      run = subprocess.run(["pgrep", "-P", str(pool.pid)],
                           capture_output=True, text=True)
      found.append(sorted(int(p) for p in run.stdout.split()))
    return found

  def install(self, *paths: str) -> None:
    """Installs wheels (or copies .py modules) into the workers' Python,
    as a `pip install` in a container image does."""
    for path in paths:
      path = str(path)
      if path.endswith(".py"):
        shutil.copy(path, self.purelib)
      else:
        # --upgrade: a workdir used before keeps the workers' Python, and
        # `--target` leaves a package already there as it was.
        self._run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                   "--no-index", "--upgrade", "--target", self.purelib,
                   path])

  def worker_imports(self, module: str) -> Optional[str]:
    """Where the workers' Python imports `module` from (None: it cannot)."""
    run = subprocess.run(
        [self.python, "-c", f"import {module}; print({module}.__file__)"],
        cwd=self.cwd, env=self.env, capture_output=True, text=True,
        timeout=TIMEOUT)
    return run.stdout.strip() if run.returncode == 0 else None

  def close(self) -> None:
    for proc in reversed(self._procs):
      proc.terminate()
      try:
        proc.wait(10)
      except subprocess.TimeoutExpired:
        proc.kill()
    self._procs = []
    if self._log:
      self._log.close()
      self._log = None

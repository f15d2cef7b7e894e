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

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from typing import List, Optional

__all__ = ["LocalPortable", "free_port", "wait_for_port"]

TIMEOUT = 300


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


class LocalPortable:
  """A job service + worker pool; `args` are the Beam flags to use them."""

  def __init__(self, workdir: str, source: Optional[str] = None,
               boot: bool = False):
    self.workdir = os.path.abspath(workdir)
    self.source = source
    self.boot = boot
    self.args: List[str] = []
    self._procs = []
    self._log = None

  def __enter__(self) -> "LocalPortable":
    try:
      self.start()
    except BaseException:
      self.close()
      raise
    return self

  def __exit__(self, *exc):
    self.close()

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
      wheels = os.path.join(self.workdir, "wheels")
      self._run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                 "-w", wheels, self.source])
      self.install(*[os.path.join(wheels, w) for w in os.listdir(wheels)])
    cwd = os.path.join(self.workdir, "workers")
    os.makedirs(cwd, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    env["BOOT_PIP"] = os.path.join(os.path.dirname(sys.executable), "pip")
    env["BOOT_DIR"] = os.path.join(self.workdir, "boot")
    os.makedirs(env["BOOT_DIR"], exist_ok=True)
    self.env, self.cwd = env, cwd
    pool_cmd = [self.python, "-c", _POOL_ON_LOOPBACK]
    if self.boot:
      boot = os.path.join(self.workdir, "boot.sh")
      with open(boot, "w") as f:
        f.write(f"#!/bin/sh\nexec {self.python} "
                f"{os.path.join(os.path.dirname(__file__), 'boot.py')} "
                '"$@"\n')
      os.chmod(boot, 0o755)
      pool_cmd.append(f"--container_executable={boot}")
    job_port, pool_port = free_port(), free_port()
    self._log = open(os.path.join(self.workdir, "servers.log"), "w")
    pool = subprocess.Popen(pool_cmd + [f"--service_port={pool_port}"],
                            cwd=cwd, env=env, stdout=self._log,
                            stderr=subprocess.STDOUT)
    self._procs.append(pool)
    jobs = subprocess.Popen(
        [sys.executable, "-m",
         "apache_beam.runners.portability.local_job_service_main",
         f"--port={job_port}"], cwd=cwd, stdout=self._log,
        stderr=subprocess.STDOUT)
    self._procs.append(jobs)
    wait_for_port(pool_port, pool, "worker pool")
    wait_for_port(job_port, jobs, "job service")
    self.args = ["--runner=PortableRunner",
                 f"--job_endpoint=localhost:{job_port}",
                 "--environment_type=EXTERNAL",
                 f"--environment_config=localhost:{pool_port}"]

  def install(self, *paths: str) -> None:
    """Installs wheels (or copies .py modules) into the workers' Python,
    as a `pip install` in a container image does."""
    for path in paths:
      path = str(path)
      if path.endswith(".py"):
        shutil.copy(path, self.purelib)
      else:
        self._run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                   "--no-index", "--target", self.purelib, path])

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

"""The worker image's entrypoint: Beam's boot, ended when the runner that
started it is gone.

Beam's Python SDK harness waits for its runner's control channel without
a time limit, so a container whose runner died keeps running: killing a
launcher (kill -9) while Prism starts its DOCKER workers left the
container up for good, its harness waiting on a port nobody listens on
(issue 63). Here boot runs as a child with the same arguments; while it
runs, the runner's provision endpoint (--provision_endpoint, on every
runner's command line) is tried every few seconds, and once it has
refused connections for GRACE seconds boot is stopped (SIGTERM, SIGKILL
after 10 s) and the entrypoint exits 1. The container then ends, and the
runners that remove their containers (Prism, the Flink and Spark job
servers, Dataflow) remove it.

A worker pool (--worker_pool [--service_port=N]: a long-lived service
that starts workers when a runner asks) runs Beam's worker_pool_main as
boot does (on port 50000 unless told), but with
the workers started through this entrypoint (WORKER, the image's
command), so that each is ended the same way when its runner is gone;
the pool itself runs until it is stopped. Signals sent to the container
(docker stop) go to boot, or to the pool.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from typing import List, Optional, Tuple

__all__ = ["BOOT", "WORKER", "GRACE", "PERIOD", "endpoint", "pool_command",
           "pool_port", "main"]

BOOT = "/opt/apache/beam/boot"
# The image's command that runs this module (the Dockerfile writes it).
WORKER = "/opt/beam-tfrecords/bin/beam-tfrecords-worker"
# Beam's default, which boot's worker pool always uses.
POOL_PORT = 50000
# Seconds the runner may be unreachable before the worker ends
# (BTR_WORKER_GRACE_SECONDS); how often it is tried.
GRACE = float(os.environ.get("BTR_WORKER_GRACE_SECONDS", "60"))
PERIOD = min(5.0, GRACE / 4)


def endpoint(argv: List[str]) -> Optional[Tuple[str, int]]:
  """(host, port) of --provision_endpoint in boot's arguments."""
  for i, arg in enumerate(argv):
    if arg.startswith("--provision_endpoint="):
      value = arg.split("=", 1)[1]
    elif arg == "--provision_endpoint" and i + 1 < len(argv):
      value = argv[i + 1]
    else:
      continue
    host, _, port = value.rpartition(":")
    if host and port.isdigit():
      return host.strip("[]"), int(port)
  return None


def _reachable(address: Tuple[str, int]) -> bool:
  try:
    socket.create_connection(address, timeout=2).close()
    return True
  except OSError:
    return False


def _stop(child: "subprocess.Popen") -> None:
  child.terminate()
  try:
    child.wait(10)
  except subprocess.TimeoutExpired:
    child.kill()
    child.wait()


def pool_command(worker: str = WORKER, port: int = POOL_PORT) -> List[str]:
  """Beam's worker pool as boot starts it, its workers started by
  `worker`, listening on `port`."""
  return [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
          f"--service_port={port}", f"--container_executable={worker}"]


def pool_port(argv: List[str]) -> int:
  """--service_port=N among the arguments (boot's pool has no such
  flag: always 50000, a port in Linux's ephemeral range, which another
  program's connection may hold), else 50000."""
  for arg in argv:
    if arg.startswith("--service_port="):
      return int(arg.split("=", 1)[1])
  return POOL_PORT


def main(argv: List[str], boot: str = BOOT, grace: float = GRACE,
         period: float = PERIOD) -> int:
  """Runs boot with `argv` (or, with --worker_pool, the pool) to its end
  (its exit status), or stops boot once the runner has been unreachable
  for `grace` seconds (1)."""
  if "--worker_pool" in argv:
    command = pool_command(port=pool_port(argv))
    print(f"beam-tfrecords worker pool: {' '.join(command)}",
          file=sys.stderr, flush=True)
    # (boot names the pool so; its workers' harnesses read it)
    env = dict(os.environ, BEAM_PYTHON_WORKER_POOL_ID=str(os.getpid()))
  else:
    command, env = [boot] + argv, None
  child = subprocess.Popen(command, env=env)
  before = {s: signal.signal(s, lambda n, _: child.send_signal(n))
            for s in (signal.SIGTERM, signal.SIGINT)}
  try:
    return _watch(child, endpoint(argv), grace, period)
  finally:
    for signum, handler in before.items():
      signal.signal(signum, handler)


def _watch(child: "subprocess.Popen", address: Optional[Tuple[str, int]],
           grace: float, period: float) -> int:
  lost: Optional[float] = None
  while True:
    try:
      return child.wait(timeout=period)
    except subprocess.TimeoutExpired:
      pass
    if address is None or _reachable(address):
      lost = None
      continue
    lost = lost or time.monotonic()
    if time.monotonic() - lost >= grace:
      print(f"beam-tfrecords worker: the runner at {address[0]}:"
            f"{address[1]} has been unreachable for {grace:.0f} s; "
            "stopping this worker.", file=sys.stderr, flush=True)
      _stop(child)
      return 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))

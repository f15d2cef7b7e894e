"""Peak memory of a process tree, sampled while it runs: for a build on a
local cluster, the launcher, the job service, the worker pools and each
worker (their own VmHWM, which a child's ru_maxrss cannot give: that
includes the peak of the process it was forked from)."""

import os
import subprocess
import threading
import time
from typing import Dict, List, Optional


def _children() -> Dict[int, List[int]]:
  """ppid -> [pid] of every process."""
  found: Dict[int, List[int]] = {}
  for name in os.listdir("/proc"):
    if not name.isdigit():
      continue
    try:
      with open(f"/proc/{name}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
      continue
    found.setdefault(ppid, []).append(int(name))
  return found


def _hwm_kb(pid: int) -> Optional[int]:
  try:
    with open(f"/proc/{pid}/status") as f:
      for line in f:
        if line.startswith("VmHWM:"):
          return int(line.split()[1])
  except OSError:
    pass
  return None


def _cmdline(pid: int) -> str:
  try:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
      return f.read().replace(b"\0", b" ").decode(errors="replace")
  except OSError:
    return ""


def role(cmdline: str, parent_role: str) -> str:
  """A short name for what a process of the cluster is."""
  for needle, name in (("beam_tfrecords build", "launcher"),
                       ("-m beam_tfrecords", "launcher"),
                       ("job_service", "job service"),
                       ("worker_pool_main", "worker pool"),
                       ("sdk_worker_main", "SDK worker"),
                       ("dask scheduler", "dask scheduler"),
                       ("dask worker", "dask nanny")):
    if needle in cmdline:
      return name
  if parent_role == "dask nanny":
    return "dask worker"
  if parent_role == "worker pool":
    return "SDK worker"
  return parent_role or "other"


class Peaks:
  """Samples, every `every` seconds until stopped, the VmHWM of every
  process under `roots` (pids): {role: [peak MB of each process]}."""

  def __init__(self, roots: List[int], every: float = 0.5):
    self._roots = roots
    self._every = every
    self._seen: Dict[int, tuple] = {}  # pid -> (role, peak kB)
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, daemon=True)

  def __enter__(self) -> "Peaks":
    self._thread.start()
    return self

  def __exit__(self, *exc) -> None:
    self._stop.set()
    self._thread.join()

  def _sample(self) -> None:
    children = _children()
    todo = [(pid, "") for pid in self._roots]
    while todo:
      pid, parent = todo.pop()
      known = self._seen.get(pid)
      name = known[0] if known else role(_cmdline(pid), parent)
      hwm = _hwm_kb(pid)
      if hwm is not None:
        self._seen[pid] = (name, max(hwm, known[1] if known else 0))
      todo += [(child, name) for child in children.get(pid, [])]

  def _run(self) -> None:
    while not self._stop.is_set():
      self._sample()
      self._stop.wait(self._every)

  def add(self, pid: int) -> None:
    self._roots.append(pid)

  def by_role(self) -> Dict[str, List[float]]:
    out: Dict[str, List[float]] = {}
    for name, kb in self._seen.values():
      out.setdefault(name, []).append(kb / 1024)
    return {k: sorted(v, reverse=True) for k, v in out.items()}


def measured_tree(cmd: List[str], roots: List[int]):
  """Runs cmd, sampling it and the processes under roots: (wall s,
  {role: [peak MB]})."""
  start = time.perf_counter()
  with Peaks(list(roots)) as peaks:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    peaks.add(proc.pid)
    while proc.poll() is None:
      time.sleep(0.2)
  wall = time.perf_counter() - start
  if proc.returncode:
    raise subprocess.CalledProcessError(proc.returncode, cmd)
  return wall, peaks.by_role()

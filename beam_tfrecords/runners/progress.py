"""A build's live progress: counts from the workers, shown on the launcher.

On the DirectRunner every worker runs on the launcher's machine (threads of
the launcher, or its subprocesses with --direct_running_mode
multi_processing), but Beam reports metrics only when the pipeline ends.
So the workers keep a small tally of their own (`tally()`: rows and bytes
read, records encoded, rows rejected) and write it, at most twice a
second, to a file in a folder the launcher names in an environment
variable (inherited by worker subprocesses); the launcher sums the files
and draws a progress line (`LocalProgress`). Runners whose workers run
elsewhere report through Beam's metrics while the job runs, which
`poll_metrics` logs every few seconds.
"""

import json
import logging
import os
import sys
import threading
import time
import uuid
from typing import Callable, Dict, Optional

__all__ = ["ENV_DIR", "COUNTS", "tally", "LocalProgress", "poll_metrics",
           "progress_text", "human_bytes"]

_LOG = logging.getLogger(__name__)
# The folder the workers write their tallies to (unset: no tally).
ENV_DIR = "BEAM_TFRECORDS_PROGRESS_DIR"
COUNTS = ("rows", "bytes", "records", "rejected", "reused")
# How often a worker writes its tally, and the launcher redraws.
FLUSH_SECONDS = 0.5
# How often a progress line is logged where stderr is not a terminal.
LOG_SECONDS = 5.0


class _Tally:
  """This process's counts, written to `directory` as JSON now and then."""

  def __init__(self, directory: Optional[str]):
    self._directory = directory
    self._counts = dict.fromkeys(COUNTS, 0)
    self._lock = threading.Lock()
    self._flushed = 0.0
    self._path = None if directory is None else os.path.join(
        directory, f"{os.getpid()}-{uuid.uuid4().hex[:8]}.json")

  def add(self, **counts: int) -> None:
    if self._path is None:
      return
    with self._lock:
      for k, v in counts.items():
        self._counts[k] += int(v)
    if time.monotonic() - self._flushed >= FLUSH_SECONDS:
      self.flush()

  def flush(self) -> None:
    if self._path is None:
      return
    with self._lock:
      text = json.dumps(self._counts)
      self._flushed = time.monotonic()
    try:
      temp = f"{self._path}.{threading.get_ident()}.tmp"
      with open(temp, "w") as f:
        f.write(text)
      os.replace(temp, self._path)
    except OSError:  # the launcher removed the folder: the build ended
      self._path = None


_TALLY: Optional[_Tally] = None
_TALLY_LOCK = threading.Lock()


def tally() -> _Tally:
  """This process's tally for the build named by ENV_DIR (a no-op one
  when the variable is not set)."""
  global _TALLY
  directory = os.environ.get(ENV_DIR) or None
  with _TALLY_LOCK:
    if _TALLY is None or _TALLY._directory != directory:
      _TALLY = _Tally(directory)
    return _TALLY


def human_bytes(n: float) -> str:
  """1536 -> '1.5 KiB': binary units, named as such (`--max-shard-size`
  reads KB as 1000 bytes, so a KiB labelled KB would disagree with it)."""
  for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
    if n < 1024 or unit == "TiB":
      return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
    n /= 1024
  return str(n)


def progress_text(counts: Dict[str, int], total_bytes: Optional[int],
                  seconds: float) -> str:
  """One line: bytes of the total read, rows (and rows/s), records,
  rejected rows, read units reused from earlier work (core.unit_cache)
  if any, and the time left at the rate so far."""
  done = counts.get("bytes", 0)
  rows = counts.get("rows", 0)
  said = []
  if total_bytes:
    share = min(done / total_bytes, 1.0)
    said.append(f"{human_bytes(done)} of {human_bytes(total_bytes)} read "
                 f"({share:.0%})")
  said.append(f"{rows:,} rows ({rows / max(seconds, 1e-9):,.0f}/s)")
  said.append(f"{counts.get('records', 0):,} records")
  said.append(f"{counts.get('rejected', 0):,} rejected")
  if counts.get("reused"):
    said.append(f"{counts['reused']:,} read unit(s) reused")
  if total_bytes and 0 < done < total_bytes and seconds > 0:
    left = (total_bytes - done) * seconds / done
    said.append(f"ETA {int(left) // 60}:{int(left) % 60:02d}")
  return ", ".join(said)


class LocalProgress:
  """Sums the workers' tallies in `directory` and shows them on stderr:
  a live line on a terminal, else a logged line every `every` seconds.

  Use as a context manager around the pipeline's run.
  """

  def __init__(self, directory: str, total_bytes: int,
               every: Optional[float] = None, stream=None):
    self._directory = directory
    self._total = total_bytes
    self._every = every or LOG_SECONDS
    self._stream = stream
    self._stop = threading.Event()
    self._thread: Optional[threading.Thread] = None
    self._started = 0.0

  def counts(self) -> Dict[str, int]:
    out = dict.fromkeys(COUNTS, 0)
    try:
      names = os.listdir(self._directory)
    except OSError:
      return out
    for name in names:
      if not name.endswith(".json"):
        continue
      try:
        with open(os.path.join(self._directory, name)) as f:
          counts = json.load(f)
      except (OSError, ValueError):  # replaced while read: next time
        continue
      for k in COUNTS:
        out[k] += int(counts.get(k, 0))
    return out

  def __enter__(self):
    self._started = time.monotonic()
    self._thread = threading.Thread(target=self._run, daemon=True,
                                    name="beam_tfrecords-progress")
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
    return False

  def _run(self) -> None:
    stream = self._stream or sys.stderr
    if stream.isatty():
      self._live(stream)
    else:
      while not self._stop.wait(self._every):
        _LOG.warning("progress: %s", progress_text(
            self.counts(), self._total, time.monotonic() - self._started))
      _LOG.warning("progress at the end: %s", progress_text(
          self.counts(), self._total, time.monotonic() - self._started))

  def _live(self, stream) -> None:
    """A rich progress bar over the bytes read, with the counts beside it."""
    # pylint: disable=import-outside-toplevel
    from rich.console import Console
    from rich.progress import (BarColumn, Progress, TextColumn,
                               TimeRemainingColumn)
    console = Console(file=stream)
    with Progress(TextColumn("[bold]building"), BarColumn(),
                  TextColumn("{task.fields[line]}"), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
      task = bar.add_task("build", total=self._total or None, line="")
      while True:
        stopping = self._stop.wait(FLUSH_SECONDS)
        counts = self.counts()
        seconds = time.monotonic() - self._started
        line = progress_text(dict(counts), None, seconds)
        if self._total:
          line = (f"{human_bytes(counts['bytes'])}/{human_bytes(self._total)}, "
                  + line)
        bar.update(task, completed=min(counts["bytes"], self._total or 0),
                   line=line)
        if stopping:
          return


def poll_metrics(result, total_bytes: Optional[int],
                 every: float = 10.0,
                 is_done: Optional[Callable[[], bool]] = None) -> None:
  """Logs the job's beam_tfrecords counters every `every` seconds until
  the job ends (runners that report metrics while running: Dataflow, the
  portable job service); returns when it ends."""
  # pylint: disable=import-outside-toplevel
  from apache_beam.metrics.metric import MetricsFilter
  from apache_beam.runners.runner import PipelineState
  started = time.monotonic()
  names = {"rows_read": "rows", "records": "records",
           "rows_rejected": "rejected", "bytes_read": "bytes",
           "units_reused": "reused"}
  while not PipelineState.is_terminal(result.state):
    if is_done is not None and is_done():
      return
    time.sleep(every)
    try:
      query = result.metrics().query(
          MetricsFilter().with_namespace("beam_tfrecords"))
    except Exception:  # pylint: disable=broad-except
      continue  # this runner does not report metrics while running
    counts = dict.fromkeys(COUNTS, 0)
    for c in query.get("counters", []):
      key = names.get(c.key.metric.name)
      if key is not None:
        counts[key] += int(c.committed or c.attempted or 0)
    _LOG.warning("progress: %s", progress_text(
        counts, total_bytes, time.monotonic() - started))

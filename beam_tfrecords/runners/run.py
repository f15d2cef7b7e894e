"""Running a build's pipeline to its end: progress, Ctrl-C and SIGTERM.

Beam's DoFn runner re-raises a KeyboardInterrupt inside a step as a
RuntimeError (and logs the step's traceback), so a SIGINT handler of our
own notes the interruption and `run_pipeline` raises a plain
KeyboardInterrupt whatever Beam made of it. SIGTERM (what Airflow,
Kubernetes and systemd send to stop a task) is handled the same way and
raised as `Terminated`, a KeyboardInterrupt: whatever cleans up after a
Ctrl-C cleans up after it too, and the command line tells the two apart.
"""

import contextlib
import logging
import os
import re
import shutil
import signal
import tempfile
import threading
from typing import Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_tfrecords.core.errors import JobFailedError
from beam_tfrecords.runners.progress import ENV_DIR, LocalProgress, poll_metrics
from beam_tfrecords.runners.gaps import release_bundle_outputs
from beam_tfrecords.runners.pipeline_options import (is_dask, is_direct,
                                                     is_local_direct)

__all__ = ["run_pipeline", "sigint_deferred", "signals_deferred",
           "sigterm_interrupts", "Terminated", "runs_started"]

# The signals that stop a build: Ctrl-C, and a scheduler's SIGTERM.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_RUNS_STARTED = [0]


class Terminated(KeyboardInterrupt):
  """The process got SIGTERM: handled as a Ctrl-C (the staging folder
  removed, nothing published), and said as a termination."""


def runs_started() -> int:
  """How many pipelines run_pipeline started in this process (so that the
  command line knows whether a failure came from a pipeline's run)."""
  return _RUNS_STARTED[0]


def _interruption(signum: int) -> KeyboardInterrupt:
  return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


@contextlib.contextmanager
def sigterm_interrupts():
  """SIGTERM raises Terminated in the block (its default would end the
  process at once, without a word and without removing the staging
  folder). Only in the main thread (signal handlers are set there)."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return

  def on_sigterm(signum, frame):
    raise Terminated

  previous = signal.signal(signal.SIGTERM, on_sigterm)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)


def _start(pipeline: beam.Pipeline):
  """pipeline.run(), without the proto round trip of a local run.

  Beam's own DirectRunner skips the round trip (to_runner_api and back,
  a test of the translation) for batch pipelines, by its class name;
  ours is a subclass of another name, which made every local build pay
  it: ~0.7 s of each build's fixed cost here."""
  if is_local_direct(pipeline.runner):
    return pipeline.run(test_runner_api=False)
  return pipeline.run()


def _quiet_closed_channels(previous):
  """A threading.excepthook that drops what grpc's channel-watching
  threads raise when a job server goes away ("Cannot monitor channel
  state: Channel closed!", a traceback per channel) and passes the rest
  on: the build's own error says what happened."""

  def hook(hook_args):
    if hook_args.exc_type is ValueError and str(
        hook_args.exc_value).startswith("Cannot monitor channel state"):
      return
    previous(hook_args)

  hook.quiets_channels = True  # type: ignore[attr-defined]
  return hook


class _QuietServerEnds(logging.Filter):
  """Drops Beam's "Really destroying service ..." warning. The job
  servers FlinkRunner and SparkRunner start from a jar are stopped when
  the interpreter exits, after the build's last line, and saying so then
  buries that line."""

  def filter(self, record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Really destroying service")


_SUBPROCESS_LOG = logging.getLogger("apache_beam.utils.subprocess_server")


def run_pipeline(pipeline: beam.Pipeline, pipeline_options: PipelineOptions,
                 progress: bool, input_bytes: int) -> None:
  """Runs the pipeline to its end, showing progress if asked.

  Raises:
    KeyboardInterrupt: on Ctrl-C (SIGINT), whatever Beam made of it (its
      DoFn runner re-raises a KeyboardInterrupt inside a step as a
      RuntimeError).
    Terminated: on SIGTERM, the same way (a KeyboardInterrupt too).
  """
  interrupted = []
  if not any(isinstance(f, _QuietServerEnds) for f in _SUBPROCESS_LOG.filters):
    _SUBPROCESS_LOG.addFilter(_QuietServerEnds())
  if not getattr(threading.excepthook, "quiets_channels", False):
    threading.excepthook = _quiet_closed_channels(threading.excepthook)

  def on_signal(signum, frame):
    interrupted.append(signum)
    # Beam logs the interrupted step's traceback; the caller says it in
    # one line instead.
    logging.disable(logging.CRITICAL)
    # Its threads die of it on their way out; what they print says no more.
    threading.excepthook = lambda hook_args: None
    raise _interruption(signum)

  previous, excepthook = {}, threading.excepthook
  if threading.current_thread() is threading.main_thread():
    previous = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
  _RUNS_STARTED[0] += 1
  try:
    if is_dask(pipeline.runner):
      _run_on_dask(pipeline, progress)
    elif not progress:
      _start(pipeline).wait_until_finish()
    elif not is_direct(pipeline_options):
      poll_metrics(_start(pipeline), input_bytes)
    else:
      _run_with_local_progress(pipeline, input_bytes)
  except BaseException:
    if interrupted:
      raise _interruption(interrupted[0]) from None
    raise
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler)
    if interrupted:
      logging.disable(logging.NOTSET)
      threading.excepthook = excepthook


# How Beam's portable runners say a job ended badly, and a job server
# that exited as it started (apache_beam/utils/subprocess_server.py).
_JOB_FAILED = re.compile(r"Pipeline (\S+) failed in state (\w+): (.*)", re.S)
_SERVER_FAILED = re.compile(r"Service failed to start up with error (-?\d+)")


def job_failure(error: BaseException, runner: str) -> Optional[JobFailedError]:
  """The JobFailedError a portable runner's failure is, in a line (None:
  not one of those)."""
  text = str(error)
  found = _JOB_FAILED.search(text)
  if found:
    # (A Python worker's error arrives as its traceback: its last line.)
    lines = [line.strip() for line in found.group(3).splitlines()
             if line.strip()]
    cause = (lines[-1] if lines and lines[0].startswith("Traceback")
             else lines[0] if lines else "no cause given")
    return JobFailedError(
        f"the {runner} job {found.group(1)} ended {found.group(2)}: "
        f"{cause[:400]}; nothing was published, the output keeps its "
        "previous content (the engine's logs say more: Flink's JobManager, "
        "Spark's application page)")
  found = _SERVER_FAILED.search(text)
  if found:
    return JobFailedError(
        f"the {runner} job server exited with code {found.group(1)} as it "
        "started, so nothing ran; its own output is in the details log")
  return None


def _run_on_dask(pipeline: beam.Pipeline, progress: bool) -> None:
  """Runs on the DaskRunner, and closes its client (the runner leaves it
  open, reconnecting to a scheduler that went away)."""
  if progress:
    # Its result has no metrics, and a state that changes only in
    # wait_until_finish.
    logging.getLogger(__name__).warning(
        "progress: the DaskRunner reports no metrics while it runs; watch "
        "the Dask dashboard (the scheduler's port 8787)")
  release_bundle_outputs()
  result = _start(pipeline)
  try:
    result.wait_until_finish()
  finally:
    result.client.close()


def _run_with_local_progress(pipeline: beam.Pipeline,
                             input_bytes: int) -> None:
  # The workers (threads, or subprocesses that inherit the variable)
  # write their tallies into a folder of the launcher's.
  folder = tempfile.mkdtemp(prefix="beam_tfrecords-progress-")
  previous = os.environ.get(ENV_DIR)
  os.environ[ENV_DIR] = folder
  try:
    with LocalProgress(folder, input_bytes):
      _start(pipeline).wait_until_finish()
  finally:
    if previous is None:
      os.environ.pop(ENV_DIR, None)
    else:
      os.environ[ENV_DIR] = previous
    shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def signals_deferred(what: str):
  """Ctrl-C and SIGTERM wait until the block ends (a switch of files that
  is short and must not stop halfway); said in a log line."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  caught = []
  previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum))
              for s in STOP_SIGNALS}
  try:
    yield
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler)
    if caught:
      logging.getLogger(__name__).warning(
          "%s while %s: finished %s first",
          "terminated (SIGTERM)" if signal.SIGTERM in caught else
          "interrupted", what, what)


# The name the publish step imports (it defers SIGTERM as well).
sigint_deferred = signals_deferred

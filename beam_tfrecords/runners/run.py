"""Running a build's pipeline to its end: progress, and Ctrl-C.

Beam's DoFn runner re-raises a KeyboardInterrupt inside a step as a
RuntimeError (and logs the step's traceback), so a SIGINT handler of our
own notes the interruption and `run_pipeline` raises a plain
KeyboardInterrupt whatever Beam made of it.
"""

import contextlib
import logging
import os
import shutil
import signal
import tempfile
import threading

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_tfrecords.runners.pipeline_options import is_dask, is_direct, is_local_direct
from beam_tfrecords.progress import ENV_DIR, LocalProgress, poll_metrics

__all__ = ["run_pipeline", "sigint_deferred"]


def _start(pipeline: beam.Pipeline):
  """pipeline.run(), without the proto round trip of a local run.

  Beam's own DirectRunner skips the round trip (to_runner_api and back,
  a test of the translation) for batch pipelines, by its class name;
  ours is a subclass of another name, which made every local build pay
  it: ~0.7 s of each build's fixed cost here."""
  if is_local_direct(pipeline.runner):
    return pipeline.run(test_runner_api=False)
  return pipeline.run()


def run_pipeline(pipeline: beam.Pipeline, options: PipelineOptions,
                 progress: bool, input_bytes: int) -> None:
  """Runs the pipeline to its end, showing progress if asked.

  Raises:
    KeyboardInterrupt: on Ctrl-C (SIGINT), whatever Beam made of it (its
      DoFn runner re-raises a KeyboardInterrupt inside a step as a
      RuntimeError).
  """
  interrupted = []

  def on_sigint(signum, frame):
    interrupted.append(signum)
    # Beam logs the interrupted step's traceback; the caller says it in
    # one line instead.
    logging.disable(logging.CRITICAL)
    # Its threads die of it on their way out; what they print says no more.
    threading.excepthook = lambda hook_args: None
    raise KeyboardInterrupt

  previous, excepthook = None, threading.excepthook
  if threading.current_thread() is threading.main_thread():
    previous = signal.signal(signal.SIGINT, on_sigint)
  try:
    if is_dask(pipeline.runner):
      _run_on_dask(pipeline, progress)
    elif not progress:
      _start(pipeline).wait_until_finish()
    elif not is_direct(options):
      poll_metrics(_start(pipeline), input_bytes)
    else:
      _run_with_local_progress(pipeline, input_bytes)
  except BaseException:
    if interrupted:
      raise KeyboardInterrupt from None
    raise
  finally:
    if previous is not None:
      signal.signal(signal.SIGINT, previous)
    if interrupted:
      logging.disable(logging.NOTSET)
      threading.excepthook = excepthook


def _run_on_dask(pipeline: beam.Pipeline, progress: bool) -> None:
  """Runs on the DaskRunner, and closes its client (the runner leaves it
  open, reconnecting to a scheduler that went away)."""
  if progress:
    # Its result has no metrics, and a state that changes only in
    # wait_until_finish.
    logging.getLogger(__name__).warning(
        "progress: the DaskRunner reports no metrics while it runs; watch "
        "the Dask dashboard (the scheduler's port 8787)")
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
def sigint_deferred(what: str):
  """Ctrl-C waits until the block ends (a switch of files that is short
  and must not stop halfway); said in a log line."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  caught = []
  previous = signal.signal(signal.SIGINT,
                           lambda signum, frame: caught.append(signum))
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, previous)
    if caught:
      logging.getLogger(__name__).warning(
          "interrupted while %s: finished %s first", what, what)

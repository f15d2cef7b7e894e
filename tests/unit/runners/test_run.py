"""beam_tfrecords/runners/run.py, on values: Running a build's pipeline to its
end: progress, Ctrl-C and SIGTERM."""
import logging
import os
import signal
import threading
import time

import pytest

from beam_tfrecords.runners import run


def test_a_job_the_engine_failed_is_one_line_exit_1():
  from beam_tfrecords.runners.run import job_failure
  failed = job_failure(RuntimeError(
      "Pipeline BeamApp-x_1 failed in state FAILED: java.io.IOException: "
      "Insufficient number of network buffers\n\tat org.apache.flink.X"),
                       "FlinkRunner")
  assert str(failed).startswith(
      "the FlinkRunner job BeamApp-x_1 ended FAILED: java.io.IOException: "
      "Insufficient number of network buffers; nothing was published")
  assert "the job server exited with code 1 as it started" in str(
      job_failure(RuntimeError("Service failed to start up with error 1"),
                  "SparkRunner")).replace("SparkRunner ", "")
  assert job_failure(RuntimeError("a bug of ours"), "FlinkRunner") is None
  from beam_tfrecords.cli import EXIT_FAILED, USER_ERRORS
  assert next(code for kind, _, code in USER_ERRORS
              if isinstance(failed, kind)) == EXIT_FAILED


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signal handlers are set in the main thread only")
def test_sigint_and_sigterm_wait_while_publishing(caplog):
  handlers = {s: signal.getsignal(s) for s in run.STOP_SIGNALS}
  with caplog.at_level(logging.WARNING, logger=run.__name__):
    for signum in (signal.SIGINT, signal.SIGTERM):
      with run.signals_deferred("publishing"):
        os.kill(os.getpid(), signum)
        time.sleep(0.1)  # delivered here: noted, not raised
  assert [r.getMessage() for r in caplog.records] == [
      "interrupted while publishing: finished publishing first",
      "terminated (SIGTERM) while publishing: finished publishing first"]
  assert run.sigint_deferred is run.signals_deferred  # the publish's name
  assert {s: signal.getsignal(s) for s in run.STOP_SIGNALS} == handlers

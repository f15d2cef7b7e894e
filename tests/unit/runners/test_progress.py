"""beam_tfrecords/core/progress.py, on values: A build's live progress: counts
from the workers, shown on the launcher."""

import json
import logging


def test_progress_counts_every_worker_file(tmp_path, monkeypatch):
  from beam_tfrecords.runners import progress
  monkeypatch.setenv(progress.ENV_DIR, str(tmp_path))
  t = progress.tally()
  t.add(rows=10, bytes=100)
  t.add(records=7, rejected=3)
  t.flush()
  (tmp_path / "other.json").write_text(json.dumps(
      {"rows": 5, "bytes": 50, "records": 5, "rejected": 0}))
  counts = progress.LocalProgress(str(tmp_path), 300).counts()
  assert counts == {"rows": 15, "bytes": 150, "records": 12, "rejected": 3,
                    "reused": 0}
  assert progress.progress_text(counts, 300, 3.0) == (
      "150 B of 300 B read (50%), 15 rows (5/s), 12 records, 3 rejected, "
      "ETA 0:03")
  assert progress.progress_text(dict(counts, reused=2), 300, 3.0) == (
      "150 B of 300 B read (50%), 15 rows (5/s), 12 records, 3 rejected, "
      "2 read unit(s) reused, ETA 0:03")


def test_other_runners_log_the_jobs_counters_while_it_runs(caplog):
  """poll_metrics against a job that reports counters as it runs (the
  DataflowRunner's and the portable job service's PipelineResult)."""
  from types import SimpleNamespace
  from apache_beam.runners.runner import PipelineState
  from beam_tfrecords.runners import progress

  def counter(name, value):
    return SimpleNamespace(key=SimpleNamespace(metric=SimpleNamespace(
        name=name)), committed=value, attempted=value)

  class Job:
    def __init__(self):
      self.polls = 0

    @property
    def state(self):
      return PipelineState.DONE if self.polls >= 2 else PipelineState.RUNNING

    def metrics(self):
      self.polls += 1
      n = 1000 * self.polls
      return SimpleNamespace(query=lambda _: {"counters": [
          counter("rows_read", n), counter("records", n - 1),
          counter("rows_rejected", 1), counter("bytes_read", 50 * n),
          counter("read_units", 9)]})
  with caplog.at_level(logging.WARNING, logger="beam_tfrecords.runners.progress"):
    progress.poll_metrics(Job(), 200_000, every=0.01)
  lines = [r.getMessage() for r in caplog.records]
  assert len(lines) == 2
  assert lines[1].startswith("progress: 97.7 KiB of 195.3 KiB read (50%), "
                             "2,000 rows (")
  assert lines[1].endswith("1,999 records, 1 rejected, ETA " +
                           lines[1].rsplit("ETA ", 1)[1])

"""beam_tfrecords/publish/finish.py on a hand-made committed staging folder:
the pipeline's last step (`Finish` is one ParDo of `finish`) checks the
thresholds, the expectations' anomalies and rows a runner lost before
anything is published, describes the dataset (card, previews,
croissant.json, checksums), publishes it under the output's lock and
releases the lock; run again (a retried step), it finishes what it began
and publishes nothing twice."""

import dataclasses
import json
import logging
import hashlib
import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.errors import (AnomalyError, BadRowsError,
                                        InputError, OutputBusyError)
from beam_tfrecords.core.info import Anomalies, DatasetInfo
from beam_tfrecords.publish import file_ops
from beam_tfrecords.publish.finish import FinishPlan, finish
from beam_tfrecords.publish.lock import OutputLock
from beam_tfrecords.publish.publication import Publication
from beam_tfrecords.sources import plan_inputs

from tests.helpers.hand_made import example, write_dataset
from tests.helpers.publish_kills import Killed, _kill_at
from tests.helpers.publish_safety import _tree

SCHEMA = {"name": "f", "features": {"id": {"type": "int64",
                                          "required": True}}}
RUN = "0123456789ab"
KEY = "0123456789abcdef0123456789abcdef"
IDS = [5, 6, 7]
BAD_ROW = {"source": "in.csv", "row": 4, "rows": 1,
           "reason": 'could not parse "x" as int64', "problems": [],
           "raw": {"id": "x"}}
LOCK = ".beam-tfrecords.lock"


@pytest.fixture
def staged(tmp_path):
  """An output locked by the build RUN, whose staging folder holds its
  committed dataset (3 records in train, 1 row in errors/): (the
  publication, its dataset.json)."""
  out = tmp_path / "out"
  publication = Publication(output=str(out), run=RUN, key=KEY)
  with OutputLock(str(out), run=RUN):
    write_dataset(publication.staging, SCHEMA,
                  {"train": [[example({"id": [i]}) for i in IDS]]},
                  errors=[BAD_ROW], success=None)
    yield publication, DatasetInfo.from_directory(publication.staging)


def _plan(publication, **fields):
  return FinishPlan(publication, None, 1.0, ("train",))._replace(**fields)


def test_the_committed_dataset_is_described_published_and_unlocked(staged):
  publication, info = staged
  out = publication.output
  published = finish(info, _plan(publication))
  assert sorted(_tree(out)) == [
      "README.md", "_SUCCESS", "croissant.json", "dataset.json",
      "errors/errors-00000-of-00001.jsonl", "index/train-00000-of-00001."
      "tfrecord.gz.index", "preview/train.parquet",
      "train-00000-of-00001.tfrecord.gz"]
  with open(os.path.join(out, "dataset.json"), "rb") as f:
    description = hashlib.sha256(f.read()).hexdigest()
  # The publish's line, then the seal of the dataset.json it published.
  with open(os.path.join(out, "_SUCCESS")) as f:
    assert f.read() == (f"beam-tfrecords {publication.version} {KEY} {RUN}\n"
                        f"dataset.json sha256 {description}\n")
  # What it returns is what it published, with what it described.
  assert published == btr.dataset_info(out)
  assert sorted(published.checksums) == ["README.md", "preview/train.parquet"]
  assert published.croissant == "croissant.json"
  assert [r["id"] for r in btr.iter_records(out)] == IDS
  assert list(btr.open(out).errors()) == [BAD_ROW]
  assert btr.verify(out).ok
  assert not os.path.exists(publication.staging)
  assert not os.path.exists(os.path.join(out, LOCK))


@pytest.mark.parametrize("max_bad_rows,max_bad_fraction,why", [
    (None, None, "more than --max-bad-fraction 0.01 (the default) allow"),
    (0, None, "more than --max-bad-rows 0 allow"),
    (None, 0.2, "more than --max-bad-fraction 0.2 allow"),
], ids=["default", "rows", "fraction"])
def test_too_many_bad_rows_publish_nothing(staged, max_bad_rows,
                                           max_bad_fraction, why):
  publication, info = staged
  with pytest.raises(BadRowsError) as raised:
    finish(info, _plan(publication, max_bad_rows=max_bad_rows,
                       max_bad_fraction=max_bad_fraction))
  assert str(raised.value).splitlines()[0].startswith(
      f"1 of 4 rows (25.00%) were rejected: {why}; the dataset was not "
      f"published (the rejected rows are in {publication.staging}/errors/). ")
  assert sorted(os.listdir(publication.output)) == [
      LOCK, os.path.basename(publication.staging)]


def _with_anomalies(staging, info):
  """The dataset with an anomaly found, and its anomalies.json staged (as
  the commit writes it)."""
  anomalies = {"file": "anomalies.json", "found": [
      {"feature": "id", "check": "max", "split": "train", "observed": 7,
       "expected": 6}]}
  with open(os.path.join(staging, "anomalies.json"), "w") as f:
    json.dump(anomalies, f)
  return dataclasses.replace(info,
                             anomalies=Anomalies.from_json(anomalies))


def test_an_anomaly_publishes_nothing(staged):
  publication, info = staged
  with pytest.raises(AnomalyError) as raised:
    finish(_with_anomalies(publication.staging, info), _plan(publication))
  assert str(raised.value) == (
      "1 anomaly: the data does not meet the schema's expectations; "
      f"nothing was published ({publication.output} keeps its previous "
      f"content). What would have been published is in "
      f"{publication.staging} (anomalies.json, and report.html unless "
      "--no-report; the next build removes it). To publish anyway: "
      "--on-anomaly warn.\n"
      "  feature 'id': max in train: observed 7, expected 6")
  assert not os.path.exists(os.path.join(publication.output, "_SUCCESS"))


def test_an_anomaly_with_on_anomaly_warn_is_published_and_logged(staged,
                                                                 caplog):
  publication, info = staged
  with caplog.at_level(logging.WARNING):
    published = finish(_with_anomalies(publication.staging, info),
                       _plan(publication, on_anomaly="warn"))
  assert [a.line() for a in published.anomalies.found] == [
      "feature 'id': max in train: observed 7, expected 6"]
  assert "anomaly (published anyway, on_anomaly: warn): feature 'id': max " \
      "in train: observed 7, expected 6" in caplog.text
  assert btr.dataset_info(publication.output).anomalies == \
      published.anomalies
  assert "anomalies.json" in _tree(publication.output)


def test_a_run_that_read_no_rows_of_inputs_that_hold_some_publishes_nothing(
    staged, tmp_path):
  publication, info = staged
  src = tmp_path / "in.csv"
  src.write_text("id\n1\n2\n")
  units = tuple(plan_inputs([str(src)], ["id"]).units)
  counts = dataclasses.replace(info.counts, rows_read=0, rows_written=0,
                               rows_rejected=0, records_written=0)
  with pytest.raises(InputError) as raised:
    finish(dataclasses.replace(info, counts=counts),
           _plan(publication, units=units, columns=("id",),
                 runner="DaskRunner"))
  assert str(raised.value) == (
      f"the DaskRunner read 0 rows, but the input holds rows ({src} has 2 "
      "in its first batch): the runner lost them, and nothing was "
      f"published (see {publication.staging}). Run on the DirectRunner, "
      "Dataflow, or the portable runner (Flink, Spark): see "
      "docs/operations.md, \"Running on a cluster\"")
  assert not os.path.exists(os.path.join(publication.output, "_SUCCESS"))


def test_a_lock_another_build_took_over_publishes_nothing(staged):
  publication, info = staged
  lock = os.path.join(publication.output, LOCK)
  with open(lock) as f:
    held = json.load(f)
  with open(lock, "w") as f:
    json.dump(dict(held, run="ffffffffffff"), f)
  with pytest.raises(OutputBusyError, match=(
      f"^{publication.output}: the lock was removed or taken over by "
      "another build; this build publishes nothing$")):
    finish(info, _plan(publication))
  assert sorted(os.listdir(publication.output)) == [
      LOCK, os.path.basename(publication.staging)]


def test_a_retried_step_after_its_publish_ended_publishes_nothing_again(
    staged):
  publication, info = staged
  published = finish(info, _plan(publication))
  before = _tree(publication.output)
  assert finish(info, _plan(publication)) == published
  assert _tree(publication.output) == before


def test_a_retried_step_finishes_the_publish_a_kill_cut_short(staged,
                                                              monkeypatch):
  publication, info = staged
  # Killed at the 6th file operation of the publish: its journal is
  # written, the switch has begun.
  monkeypatch.setattr(file_ops, "before_operation", _kill_at(5)[0])
  with pytest.raises(Killed):
    finish(info, _plan(publication))
  monkeypatch.setattr(file_ops, "before_operation", None)
  assert publication.state() == "began"
  published = finish(info, _plan(publication))
  assert published == btr.dataset_info(publication.output)
  assert [r["id"] for r in btr.iter_records(publication.output)] == IDS
  assert not os.path.exists(publication.staging)
  assert not os.path.exists(os.path.join(publication.output, LOCK))

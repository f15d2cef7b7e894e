"""One build at a time per output on a real S3-compatible server: the
lock's conditional writes."""

import json
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords.publish.lock import LOCK_FILE, OutputLock

from tests.helpers.publish_locks import SCHEMA, _input, _lock_text
from tests.helpers.s3 import s3_beam_args


# --- S3: conditional writes on a real S3 server ---------------------------

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto")


def _s3_options(url):
  from apache_beam.options.pipeline_options import PipelineOptions
  client = boto3.client("s3", endpoint_url=url)
  if not client.list_buckets()["Buckets"]:
    client.create_bucket(Bucket="datasets")
  return PipelineOptions(s3_beam_args(url))


def test_s3_lock_uses_conditional_writes(s3):
  options = _s3_options(s3)
  client = boto3.client("s3", endpoint_url=s3)
  out = "s3://datasets/locked"
  first = OutputLock(out, options).acquire()
  try:
    stored = json.loads(client.get_object(
        Bucket="datasets", Key="locked/" + LOCK_FILE)["Body"].read())
    assert stored["run"] == first.run
    with pytest.raises(btr.OutputBusyError, match=(
        f"{out} is being built by another build \\(run {first.run} ")):
      OutputLock(out, options).acquire()
    # The store's compare-and-swap refuses a stale token.
    store = first._store
    assert store.replace(b"x", '"not-the-etag"') is None
    assert store.delete('"not-the-etag"') is False
    assert store.create(b"x") is None
  finally:
    first.release()
  assert "Contents" not in client.list_objects_v2(Bucket="datasets",
                                                  Prefix="locked/")
  # A lease that expired is taken over, by one contender only.
  client.put_object(Bucket="datasets", Key="locked/" + LOCK_FILE,
                    Body=_lock_text(host="gone", renewed=time.time() - 500))
  stale_token = OutputLock(out, options)._store.read()[1]
  taker = OutputLock(out, options).acquire()
  try:
    late = OutputLock(out, options)._store
    assert late.replace(b"mine", stale_token) is None  # already taken
    assert json.loads(late.read()[0])["run"] == taker.run
  finally:
    taker.release()


def test_two_builds_on_s3_one_refused(s3, tmp_path, monkeypatch):
  from beam_tfrecords.publish import finish as pipeline
  _s3_options(s3)
  beam_args = s3_beam_args(s3)
  out = "s3://datasets/two"
  check = pipeline.check_thresholds
  seen = {}

  def meanwhile(*args):
    with pytest.raises(btr.OutputBusyError) as e:
      btr.build(SCHEMA, _input(tmp_path, (7,)), out, beam_args=beam_args)
    seen["error"] = str(e.value)
    return check(*args)

  monkeypatch.setattr(pipeline, "check_thresholds", meanwhile)
  btr.build(SCHEMA, _input(tmp_path), out, beam_args=beam_args)
  assert f"{out} is being built by another build" in seen["error"]
  monkeypatch.undo()
  records = sorted(r["id"] for r in btr.iter_records(out))
  assert records == [1, 2, 3]
  keys = sorted(o["Key"] for o in boto3.client(
      "s3", endpoint_url=s3).list_objects_v2(Bucket="datasets",
                                             Prefix="two/")["Contents"])
  assert keys == ["two/README.md", "two/_SUCCESS", "two/croissant.json",
                  "two/dataset.json",
                  "two/index/train-00000-of-00001.tfrecord.gz.index",
                  "two/preview/train.parquet",
                  "two/report.html", "two/schema.pbtxt", "two/statistics.pb",
                  "two/statistics.state.json",
                  "two/train-00000-of-00001.tfrecord.gz"]

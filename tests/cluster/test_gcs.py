"""gs:// against a real GCS API server on 127.0.0.1 (fsouza/fake-gcs-server,
built by `make cluster-tools`): a build publishes into a bucket, reads
back, verifies, is up to date when run again, appends, and keeps and
reuses its units in a --cache on the bucket (issues 62 and 63)."""

import pytest

import beam_tfrecords as btr
from tests.helpers.gcs import create_bucket, object_names
from tests.helpers.shard_size import _csv

SCHEMA = {"name": "events",
          "features": {"id": {"type": "int64", "required": True},
                       "text": "string"},
          "splits": {"hash": "id", "weights": {"train": 3, "test": 1}}}


def _values(dataset, split):
  return sorted((r["id"], r["text"]) for r in btr.iter_records(
      dataset, split=split))


def test_a_build_into_gcs_publishes_verifies_appends_and_reuses(
    gcs, tmp_path, monkeypatch):
  monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
  create_bucket(gcs, "btr")
  days = [_csv(tmp_path / f"day{k}.csv", 1500, offset=k * 1500, seed=k)
          for k in range(3)]
  out = "gs://btr/out"
  first = btr.build(SCHEMA, days[:2], out, num_shards=2)
  assert first.info.counts.rows_written == 3000
  assert len(_values(out, "train")) + len(_values(out, "test")) == 3000
  assert btr.verify(out).ok
  assert btr.build(SCHEMA, days[:2], out, num_shards=2).up_to_date
  # --append: the old shards copied by the bucket under their new names.
  btr.build(SCHEMA, days[2:], out, num_shards=2, append=True)
  clean = "gs://btr/clean"
  btr.build(SCHEMA, days, clean, num_shards=2)
  appended, whole = btr.dataset_info(out), btr.dataset_info(clean)
  assert [s.file for s in appended.splits["train"].shards] == [
      f"train-{i:05d}-of-00004.tfrecord.gz" for i in range(4)]
  assert appended.counts == whole.counts
  assert appended.statistics == whole.statistics
  for split in ("train", "test"):
    assert _values(out, split) == _values(clean, split)
  assert btr.verify(out).ok
  # --cache on the bucket: a rebuild reuses every unit, the same shards.
  cache = "gs://btr/cache"
  filled = btr.build(SCHEMA, days, "gs://btr/cached", num_shards=2,
                     cache=cache)
  assert filled.info.inputs.extra["units"] == {"read": 3, "reused": 0}
  again = btr.build(SCHEMA, days, "gs://btr/cached", num_shards=2,
                    cache=cache, overwrite=True, force=True)
  assert again.info.inputs.extra["units"] == {"read": 3, "reused": 3}
  assert [(s.file, s.sha256) for s in again.info.splits["train"].shards] \
      == [(s.file, s.sha256) for s in whole.splits["train"].shards]
  # No staging folder, part file or output .units/ is left behind.
  for prefix in ("out/", "clean/", "cached/"):
    names = object_names(gcs, "btr", prefix)
    assert f"{prefix}_SUCCESS" in names
    assert not [n for n in names if "/.staging-" in n or "/.units/" in n
                or n.endswith(".lock")], names


def test_reading_on_gcs_random_access_streams_windows_and_pins(gcs,
                                                               tmp_path):
  """What reads a dataset through the package's own readers (Beam's
  FileSystems) works on gs:// as on local disk: random access by record
  number, a global shuffle, a window (a glob of dated outputs), a pin of
  it, and a pin that refuses a dataset rebuilt since. (btr.load and TFT
  read gs:// with TensorFlow's own GCS client, which talks to
  storage.googleapis.com only: not testable against an emulator.)"""
  create_bucket(gcs, "reads")
  days = {"20261120": range(0, 40), "20261121": range(100, 160)}
  for day, ids in days.items():
    btr.build(SCHEMA, [_rows(tmp_path, day, ids)], f"gs://reads/ev/{day}",
              num_shards=2)
  handle = btr.open("gs://reads/ev/20261121")
  stream = list(handle.stream("train"))  # the records' bytes, in order
  assert len(stream) == len(_values("gs://reads/ev/20261121", "train"))
  records = handle.by_number("train")
  assert records.get([3, 0, len(stream) - 1]) == [
      stream[3], stream[0], stream[-1]]
  shuffled = list(handle.stream("train", shuffle_seed=1, shuffle="global"))
  assert sorted(shuffled) == sorted(stream) and shuffled != stream
  # A window of both days, and a pin of it on the bucket.
  both = sorted(_values("gs://reads/ev/20261120", "train")
                + _values("gs://reads/ev/20261121", "train"))
  assert _values("gs://reads/ev/202611*", "train") == both
  btr.pin(["gs://reads/ev/20261120", "gs://reads/ev/20261121"],
          "gs://reads/window.json")
  assert _values("gs://reads/window.json", "train") == both
  # One day rebuilt with other rows: the pin refuses to read it.
  btr.build(SCHEMA, [_rows(tmp_path, "again", range(500, 520))],
            "gs://reads/ev/20261121", num_shards=2, overwrite=True)
  with pytest.raises(btr.InputError, match=(
      "pinned dataset gs://reads/ev/20261121 was rebuilt or changed")):
    _values("gs://reads/window.json", "train")


def _rows(folder, name, ids):
  """A local CSV of the given ids."""
  path = folder / f"{name}.csv"
  path.write_text("id,text\n" + "".join(f"{i},t{i}\n" for i in ids))
  return str(path)

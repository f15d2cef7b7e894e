"""Seeded shuffle: deterministic, every record once, memory in buckets."""

import filecmp
import os

import pytest

import beam_tfrecords as btr

from tests.helpers.shuffle import SCHEMA, _csv


def _ids(output, split="train"):
  return [r["id"] for r in btr.iter_records(output, split)]


@pytest.mark.slow
def test_shuffle_is_seeded_complete_and_the_same_bytes(tmp_path,
                                                       monkeypatch):
  from beam_tfrecords.building import planning as pipeline
  # Small buckets, so that a shard is written in several of them.
  monkeypatch.setattr(pipeline, "SHUFFLE_BUCKET_BYTES", 20_000)
  srcs = [_csv(tmp_path / f"in{i}.csv", 3000, 3000 * i) for i in range(3)]
  plain = btr.build(SCHEMA, srcs, str(tmp_path / "plain"), num_shards=2)
  one = btr.build(SCHEMA, srcs, str(tmp_path / "one"), num_shards=2,
                  shuffle_seed=7)
  again = btr.build(SCHEMA, srcs, str(tmp_path / "again"), num_shards=2,
                    shuffle_seed=7, beam_args=[
                        "--direct_num_workers=2",
                        "--direct_running_mode=multi_processing"])
  other = btr.build(SCHEMA, srcs, str(tmp_path / "other"), num_shards=2,
                    shuffle_seed=8)
  assert one.info.options.shuffle_buckets["train"] > 1
  ids = _ids(one.output)
  assert sorted(ids) == sorted(_ids(plain.output)) == list(range(9000))
  # Same seed: same files, whatever the workers; other seed: other order.
  for name in ("train-00000-of-00002.tfrecord.gz",
               "train-00001-of-00002.tfrecord.gz", "dataset.json"):
    assert filecmp.cmp(os.path.join(one.output, name),
                       os.path.join(again.output, name), shallow=False)
  assert _ids(other.output) != ids
  # Mixed: the first 1,000 records come from all three files, and the
  # order is far from the input order.
  first = ids[:1000]
  assert all(sum(1 for i in first if i // 3000 == f) > 200 for f in range(3))
  unplain = _ids(plain.output)
  assert sum(a == b for a, b in zip(ids, unplain)) < 100
  # Shards are filled about evenly.
  counts = [s.num_records for s in one.splits["train"].shards]
  assert abs(counts[0] - counts[1]) < 400

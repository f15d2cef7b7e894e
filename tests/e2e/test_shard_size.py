"""--max-shard-size: every file within the limit, names and counts exact,
the same bytes on every run."""

import filecmp
import os
import random

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError
from beam_tfrecords.core.shard_reader import count_tfrecords

from tests.helpers.records import tf_records
from tests.helpers.shard_size import SCHEMA, _csv


LIMIT = 20_000


def _ids(output, split="train"):
  return [r["id"] for r in btr.iter_records(output, split)]


def _check_files(result, limit, splits=None):
  """Every file within the limit; names i-of-total; dataset.json equals
  the files."""
  for split, info in result.info.splits.items():
    if splits is not None and split not in splits:
      continue
    shards = info.shards
    total = len(shards)
    assert [s.file for s in shards] == [
        f"{split}-{i:05d}-of-{total:05d}.tfrecord.gz" for i in range(total)]
    assert sorted(f for f in os.listdir(result.output)
                  if f.startswith(split + "-")) == [s.file for s in shards]
    for s in shards:
      path = os.path.join(result.output, s.file)
      assert os.path.getsize(path) == s.num_bytes <= limit
      assert count_tfrecords(path) == s.num_records
    assert sum(s.num_records for s in shards) == info.num_records


@pytest.mark.slow
def test_every_file_within_the_limit_and_the_same_bytes(tmp_path, tf):
  srcs = [_csv(tmp_path / f"in{i}.csv", 3000, 3000 * i, seed=i)
          for i in range(2)]
  one = btr.build(SCHEMA, srcs, str(tmp_path / "one"), max_shard_size=LIMIT)
  again = btr.build(SCHEMA, srcs, str(tmp_path / "again"),
                    max_shard_size="20KB", beam_args=[
                        "--direct_num_workers=2",
                        "--direct_running_mode=multi_processing"])
  _check_files(one, LIMIT)
  shards = one.splits["train"].shards
  # 6,000 rows of hex text: 276 KB in, ~200 KB compressed. The build
  # plans a shard per limit of input (14) and none outgrows it.
  total = sum(s.num_bytes for s in shards)
  assert len(shards) == one.info.options.num_shards["train"] == 14
  assert -(-total // LIMIT) <= len(shards) <= 2 * -(-total // LIMIT)
  # Every record once, readable by TensorFlow; input order within a batch.
  assert sorted(_ids(one.output)) == list(range(6000))
  assert len(tf_records(tf, one.output)) == 6000
  assert one.info.options.max_shard_bytes == {"train": LIMIT}
  for name in [s.file for s in shards] + ["dataset.json"]:
    assert filecmp.cmp(os.path.join(one.output, name),
                       os.path.join(again.output, name), shallow=False)
  # No staged roll files left behind.
  assert not [f for f in os.listdir(one.output) if "roll" in f]


def test_limit_with_shuffle_and_sequences(tmp_path):
  src = tmp_path / "events.csv"
  rng = random.Random(3)
  src.write_text("user,t,item\n" + "".join(
      f"{rng.randrange(400)},{i},{rng.getrandbits(64):016x}\n"
      for i in range(8000)))
  seq = {"name": "seq", "record": "sequence_example", "group_by": "user",
         "order_by": [{"column": "t", "type": "int64"}],
         "context": {"user": {"type": "int64", "required": True}},
         "sequence": {"item": "string", "t": "int64"}}
  result = btr.build(seq, str(src), str(tmp_path / "seq"),
                     max_shard_size=LIMIT)
  _check_files(result, LIMIT)
  assert len(result.splits["train"].shards) > 3
  users = sorted(r["context"]["user"]
                 for r in btr.iter_records(result.output, "train"))
  assert users == sorted(set(users)) and len(users) == 400
  shuffled = btr.build(SCHEMA, _csv(tmp_path / "a.csv", 5000),
                       str(tmp_path / "shuffled"), max_shard_size=LIMIT,
                       shuffle_seed=5)
  _check_files(shuffled, LIMIT)
  assert sorted(_ids(shuffled.output)) == list(range(5000))


def test_fixed_counts_for_some_splits_and_the_limit_for_the_rest(tmp_path):
  schema = dict(SCHEMA, splits={"hash": "id", "weights": {
      "train": "80%", "eval": "20%"}})
  result = btr.build(schema, _csv(tmp_path / "a.csv", 5000),
                     str(tmp_path / "o"), num_shards={"train": 2},
                     max_shard_size=LIMIT)
  assert [s.file for s in result.splits["train"].shards] == [
      "train-00000-of-00002.tfrecord.gz", "train-00001-of-00002.tfrecord.gz"]
  assert all(s.num_bytes > LIMIT for s in result.splits["train"].shards)
  _check_files(result, LIMIT, splits=["eval"])
  assert result.info.options.max_shard_bytes == {
      "train": None, "eval": LIMIT}
  assert sorted(_ids(result.output, "train") + _ids(result.output, "eval")
                ) == list(range(5000))


def test_a_record_larger_than_the_limit_is_a_clear_error(tmp_path):
  src = tmp_path / "big.csv"
  src.write_text("id,text\n1,small\n2,%x\n" % random.Random(1)
                 .getrandbits(20_000))
  with pytest.raises(InputError, match=r"a record of [0-9,]+ bytes "
                     r"\([0-9,]+ compressed\) does not fit in a shard file "
                     r"of at most 1,024 bytes \(split 'train'\); raise "
                     "--max-shard-size"):
    btr.build(SCHEMA, str(src), str(tmp_path / "o"), max_shard_size="1KiB")
  assert not os.path.exists(tmp_path / "o" / "_SUCCESS")


def test_a_shard_that_outgrows_the_limit_is_cut_evenly(tmp_path,
                                                       monkeypatch):
  """One shard (the estimate said so) holding ~2.4 limits of data: three
  files of about equal size, not two full ones and a small one."""
  from beam_tfrecords.building import planning as pipeline
  monkeypatch.setattr(pipeline, "DEFAULT_OUTPUT_BYTES_PER_INPUT_BYTE",
                      0.01)
  result = btr.build(SCHEMA, _csv(tmp_path / "a.csv", 1500),
                     str(tmp_path / "o"), max_shard_size=LIMIT)
  _check_files(result, LIMIT)
  sizes = [s.num_bytes for s in result.splits["train"].shards]
  assert result.info.options.num_shards == {"train": 1}
  assert len(sizes) == -(-sum(sizes) // LIMIT), sizes
  assert max(sizes) - min(sizes) < LIMIT * 0.3, sizes
  # Errors: no file when there are none (one per GiB of input at most).
  assert result.info.errors.files == ()


def test_the_beam_sink_records_no_limit(tmp_path):
  result = btr.build(SCHEMA, _csv(tmp_path / "a.csv", 30),
                     str(tmp_path / "o"), sink="beam")
  assert result.info.options.max_shard_bytes == {"train": None}

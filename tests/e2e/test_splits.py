"""Splits: hash, value and bound rules, end to end on Beam."""

import collections
import csv
import filecmp
import os
import random

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError
from beam_tfrecords.core.info import SplitRuleInfo
from beam_tfrecords.read import reader as btr_reader

from tests.helpers.datasets import without_run_id
from tests.helpers.splits import schema


def ratings_csv(path, rows, users, seed=0):
  """user,item,rating,day rows; user ids as text, some with leading zeros."""
  rng = random.Random(seed)
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["user", "item", "rating", "day", "split"])
    for i in range(rows):
      user = rng.randrange(users)
      text = f"{user:05d}" if i % 3 == 0 else str(user)  # "00042" == "42"
      w.writerow([text, rng.randrange(1000), rng.randint(1, 5),
                  f"2026-11-{rng.randint(1, 28):02d}",
                  ["train", "validation", "test"][i % 3]])
  return str(path)


HASH = {"hash": "user", "weights": {"train": "80%", "eval": "10%",
                                    "test": "10%"}}


def users_by_split(output, splits):
  return {s: [r["user"] for r in btr.iter_records(output, s)]
          for s in splits}


@pytest.mark.slow
def test_hash_split_keeps_each_key_in_one_split_with_the_ratios(tmp_path):
  src = ratings_csv(tmp_path / "r.csv", 100_000, 20_000)
  result = btr.build(schema(HASH), src, str(tmp_path / "out"))
  got = users_by_split(result.output, ["train", "eval", "test"])
  owner = {}
  for split, users in got.items():
    for u in users:
      assert owner.setdefault(u, split) == split, f"user {u} in two splits"
  # "00042" and "42" are one int64 key: one split.
  assert sum(len(u) for u in got.values()) == 100_000
  shares = {s: len(set(u)) / len(owner) for s, u in got.items()}
  assert abs(shares["train"] - 0.8) < 0.015
  assert abs(shares["eval"] - 0.1) < 0.01 and abs(shares["test"] - 0.1) < 0.01
  assert result.info.split_rule == SplitRuleInfo(
      "hash", ("train", "eval", "test"), {
          "hash": ["user"],
          "weights": [{"train": 80.0}, {"eval": 10.0}, {"test": 10.0}]})
  # The schema in dataset.json loads back to the same rule.
  assert btr_reader.dataset_schema(result.output).splits == \
      btr.load_schema(schema(HASH)).splits
  assert {s: v.num_records for s, v in result.splits.items()} == {
      s: len(u) for s, u in got.items()}
  # Each split's files are named by it and read by TensorFlow.
  assert sorted(os.listdir(result.output)) == [
      "README.md", "_SUCCESS", "croissant.json", "dataset.json", "errors",
      "eval-00000-of-00001.tfrecord.gz", "index", "preview", "report.html",
      "schema.pbtxt", "statistics.pb", "statistics.state.json",
      "test-00000-of-00001.tfrecord.gz", "train-00000-of-00001.tfrecord.gz"]
  assert sorted(os.listdir(os.path.join(result.output, "preview"))) == [
      f"{s}.parquet" for s in ("eval", "test", "train")]
  assert sorted(os.listdir(os.path.join(result.output, "index"))) == [
      f"{s}-00000-of-00001.tfrecord.gz.index"
      for s in ("eval", "test", "train")]


@pytest.mark.slow
def test_hash_split_is_the_same_bytes_across_runs_and_workers(tmp_path):
  src = ratings_csv(tmp_path / "r.csv", 5_000, 700)
  one = btr.build(schema(HASH), src, str(tmp_path / "one"),
                  num_shards={"train": 3, "eval": 1, "test": 2})
  two = btr.build(schema(HASH), src, str(tmp_path / "two"),
                  num_shards={"train": 3, "eval": 1, "test": 2},
                  beam_args=["--direct_num_workers=2",
                             "--direct_running_mode=multi_processing"])
  names = sorted(os.listdir(one.output))
  assert names == sorted(os.listdir(two.output))
  assert [n for n in names if n.endswith(".gz")] == [
      "eval-00000-of-00001.tfrecord.gz", "test-00000-of-00002.tfrecord.gz",
      "test-00001-of-00002.tfrecord.gz", "train-00000-of-00003.tfrecord.gz",
      "train-00001-of-00003.tfrecord.gz", "train-00002-of-00003.tfrecord.gz"]
  for n in names:
    if n == "_SUCCESS":  # the same but for the run id (the seal too)
      a, b = (open(os.path.join(d, n), "rb").read()
              for d in (one.output, two.output))
      assert without_run_id(a) == without_run_id(b) and a != b
    elif os.path.isfile(os.path.join(one.output, n)):
      assert filecmp.cmp(os.path.join(one.output, n),
                         os.path.join(two.output, n), shallow=False), n


def test_value_split_maps_names_and_rejects_unknown_values(tmp_path):
  src = tmp_path / "v.csv"
  src.write_text("user,item,rating,day,split\n1,1,1,d,train\n2,2,2,d,"
                 "validation\n3,3,3,d,test\n4,4,4,d,holdout\n5,5,5,d,\n")
  rule = {"column": "split", "values": {"train": "train",
                                        "eval": ["validation", "dev"],
                                        "test": "test"}}
  result = btr.build(schema(rule), str(src), str(tmp_path / "out"),
                     max_bad_fraction=1.0)
  got = users_by_split(result.output, ["train", "eval", "test"])
  assert got == {"train": [1], "eval": [2], "test": [3]}
  errors = sorted((e["row"], e["reason"]) for e in btr.open(
      result.output).errors())
  assert errors == [
      (4, 'In feature "splits": the split column "split" holds \'holdout\', '
          "which names no split; allowed: 'train', 'validation', 'dev', "
          "'test'"),
      (5, 'In feature "splits": the split column "split" has no value; every '
          "row needs one")]


def test_bound_split_by_date_with_rest(tmp_path):
  src = ratings_csv(tmp_path / "r.csv", 2_000, 100)
  rule = {"column": "day", "below": {"train": "2026-11-20",
                                     "eval": "2026-11-25"}, "rest": "test"}
  result = btr.build(schema(rule), src, str(tmp_path / "out"))
  days = {s: [r["day"] for r in btr.iter_records(result.output, s)]
          for s in ("train", "eval", "test")}
  assert all(d < "2026-11-20" for d in days["train"]) and days["train"]
  assert all("2026-11-20" <= d < "2026-11-25" for d in days["eval"])
  assert all(d >= "2026-11-25" for d in days["test"]) and days["test"]
  assert sum(map(len, days.values())) == 2_000


def test_numeric_bounds_without_rest_reject_values_past_the_last(tmp_path):
  src = tmp_path / "n.csv"
  src.write_text("user,item,rating,day\n1,5,1,d\n2,50,1,d\n3,500,1,d\n"
                 "4,x,1,d\n")
  rule = {"column": "item", "below": {"train": 10, "eval": 100}}
  result = btr.build(schema(rule), str(src), str(tmp_path / "out"),
                     max_bad_fraction=1.0)
  assert users_by_split(result.output, ["train", "eval"]) == {
      "train": [1], "eval": [2]}
  reasons = sorted((e["row"], e["reason"]) for e in btr.open(
      result.output).errors())
  assert reasons[0] == (3, 'In feature "splits": the split column "item" '
                        "holds 500, not below the last bound 100; add `rest: "
                        "<split>` for such rows")
  assert reasons[1][0] == 4 and "could not parse 'x' as int64" in reasons[1][1]


def test_sequences_split_by_group_key(tmp_path):
  src = ratings_csv(tmp_path / "r.csv", 3_000, 300)
  seq = {"name": "by_user", "record": "sequence_example", "group_by": "user",
         "order_by": "item", "splits": {"hash": "user", "weights": {
             "train": 3, "test": 1}},
         "context": {"user": "int64", "n": {"derive": "length"}},
         "sequence": {"item": "int64", "rating": "float"}}
  result = btr.build(seq, src, str(tmp_path / "out"))
  seen = collections.Counter()
  users = {}
  for split in ("train", "test"):
    for r in btr.iter_records(result.output, split):
      user = r["context"]["user"]
      assert users.setdefault(user, split) == split
      seen[user] += r["context"]["n"]
  with open(src) as f:
    expected = collections.Counter(int(row["user"]) for row in
                                   csv.DictReader(f))
  assert seen == expected  # every group whole, in one split
  share = sum(1 for s in users.values() if s == "train") / len(users)
  assert abs(share - 0.75) < 0.08


def test_num_shards_per_split_and_unknown_split_names(tmp_path):
  src = ratings_csv(tmp_path / "r.csv", 500, 50)
  with pytest.raises(InputError, match=r"--num-shards names split\(s\) "
                     r"\['dev'\] that the schema does not declare"):
    btr.build(schema(HASH), src, str(tmp_path / "o"), num_shards={"dev": 2})
  from beam_tfrecords import cli
  assert cli.main(["build", "--schema", str(_write_schema(tmp_path)),
                   "--input", src, "--output", str(tmp_path / "cli"),
                   "--num-shards", "train=2,test=3"]) == 0
  info = btr.dataset_info(str(tmp_path / "cli"))
  assert {s: len(v.shards) for s, v in info.splits.items()} == {
      "train": 2, "eval": 1, "test": 3}


def _write_schema(tmp_path):
  import yaml
  path = tmp_path / "s.yaml"
  path.write_text(yaml.safe_dump(schema(HASH)))
  return path


def test_a_key_splits_the_same_whatever_its_batch_holds(tmp_path):
  """JSON batches get their Arrow types from all their values; a key's
  text must not (1.0 alone, 1.0 next to text, 1 and 1.0 are one key)."""
  a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
  a.write_text("".join('{"uid": 1.0, "x": %d}\n' % i for i in range(3)))
  b.write_text('{"uid": 1, "x": 10}\n{"uid": "abc", "x": 11}\n'
               '{"uid": [1, 2], "x": 12}\n{"uid": true, "x": 13}\n')
  rule = {"name": "k", "splits": {"hash": "uid", "weights": {
      "train": 1, "eval": 1, "test": 1, "other": 1}},
          "features": {"x": "int64"}}
  result = btr.build(rule, [str(a), str(b)], str(tmp_path / "out"))
  where = {}
  for split in ("train", "eval", "test", "other"):
    for r in btr.iter_records(result.output, split):
      where[r["x"]] = split
  assert len(where) == 7
  assert where[0] == where[1] == where[2] == where[10]  # 1.0 and 1
  from beam_tfrecords.encoding.splitting import key_text
  assert [key_text(v) for v in (1.0, 1, True, [1, 2], {"b": 1, "a": 2},
                                0.5, "é", None)] == [
      b"1", b"1", b"true", b"[1,2]", b'{"a":2,"b":1}', b"0.5",
      "é".encode(), None]


def test_split_columns_with_odd_cells_go_to_errors_not_crashes(tmp_path):
  src = tmp_path / "o.csv"
  src.write_bytes(b"user,item,rating,day,split\n1,1,1,d,train\n"
                  b"2,2,2,\xff7,train\n3,3,3,9,train\n")
  rule = {"column": "day", "below": {"train": 5}, "rest": "test"}
  result = btr.build(schema(rule), str(src), str(tmp_path / "out"),
                     max_bad_fraction=1.0)
  assert users_by_split(result.output, ["train", "test"]) == {
      "train": [], "test": [3]}
  reasons = sorted((e["row"], e["reason"]) for e in btr.open(
      result.output).errors())
  assert [r for r, _ in reasons] == [1, 2]
  assert "not a number; the split bounds are numbers" in reasons[0][1]


def test_rows_without_any_hash_key_value_go_to_errors(tmp_path):
  """A key column absent from JSON input (a typo, say) must not send every
  row to one split."""
  src = tmp_path / "k.jsonl"
  src.write_text('{"uid": 5, "x": 1}\n{"x": 2}\n{"uid": null, "x": 3}\n')
  rule = {"name": "k", "splits": {"hash": "uid", "weights": {
      "train": 1, "eval": 1}}, "features": {"x": "int64"}}
  result = btr.build(rule, str(src), str(tmp_path / "out"),
                     max_bad_fraction=1.0)
  assert result.info.counts.rows_written == 1
  errors = sorted((e["row"], e["reason"]) for e in btr.open(
      result.output).errors())
  assert [r for r, _ in errors] == [2, 3]
  assert all("the split key (uid) has no value; every row needs one" in
             reason for _, reason in errors)

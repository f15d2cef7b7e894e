"""Buckets too large for one assembly (skewed keys): assembled in passes,
with the same records; a group too large for any assembly: refused, named
in errors/ with its size, and counted."""

import csv
import json
import os
import random

import pytest

import beam_tfrecords as btr
from beam_tfrecords import pipeline
from beam_tfrecords.transforms import grouped

SCHEMA = {
    "name": "skewed", "record": "sequence_example", "group_by": "user",
    "order_by": "ts",
    "context": {"user": {"type": "int64"}, "length": {"derive": "length"}},
    "sequence": {"ts": {"type": "int64", "required": True},
                 "item": {"type": "string", "required": True}},
}


@pytest.fixture(scope="module")
def skewed(tmp_path_factory):
  """400 users with a few events each, and user 7 with 3,000."""
  path = tmp_path_factory.mktemp("skewed") / "events.csv"
  rng = random.Random(3)
  rows = [(u, rng.randrange(10**6), f"item{rng.randrange(100)}")
          for u in range(400) for _ in range(rng.randint(1, 6))]
  rows += [(7, rng.randrange(10**6), f"item{rng.randrange(100)}")
           for _ in range(3000)]
  rng.shuffle(rows)
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["user", "ts", "item"])
    w.writerows(rows)
  return str(path), rows


def _files(out):
  found = {}
  for name in sorted(os.listdir(out)):
    if name.endswith(".tfrecord.gz"):
      with open(os.path.join(out, name), "rb") as f:
        found[name] = f.read()
  return found


def _records(out):
  return list(btr.iter_records(out, "train"))


def test_passes_write_the_same_files(tmp_path, skewed, monkeypatch):
  src, rows = skewed
  whole = str(tmp_path / "whole")
  btr.build(SCHEMA, src, whole, num_shards=2)
  # One bucket; every group fits in an assembly, the bucket does not.
  monkeypatch.setattr(pipeline, "buckets_for", lambda _: 1)
  monkeypatch.setattr(grouped, "ASSEMBLY_BYTES", 70_000)
  plans = []
  real = grouped.plan_passes
  monkeypatch.setattr(grouped, "plan_passes",
                      lambda *a: plans.append(real(*a)) or plans[-1])
  monkeypatch.setattr(grouped, "_EXPANSION", 10**6)
  passes = str(tmp_path / "passes")
  result = btr.build(SCHEMA, src, passes, num_shards=2)
  assert _files(passes) == _files(whole)
  assert result.metadata["counts"]["rows_written"] == len(rows)
  assert [(p.passes, p.refused) for p in plans] == [(2, [])]


def test_a_group_too_large_is_refused_with_its_size(tmp_path, skewed,
                                                   monkeypatch):
  src, rows = skewed
  monkeypatch.setattr(grouped, "ASSEMBLY_BYTES", 20_000)
  monkeypatch.setattr(grouped, "_EXPANSION", 10**6)
  out = str(tmp_path / "out")
  result = btr.build(SCHEMA, src, out, num_shards=2, max_bad_fraction=1.0)
  records = _records(out)
  users = sorted(r["context"]["user"] for r in records)
  assert users == sorted({u for u, _, _ in rows} - {7})
  for r in records:
    mine = sorted((ts, item) for u, ts, item in rows
                  if u == r["context"]["user"])
    steps = r["feature_lists"]
    assert steps["ts"] == [ts for ts, _ in mine]
    assert sorted(zip(steps["ts"], steps["item"])) == mine
  heavy = sum(1 for u, _, _ in rows if u == 7)
  assert result.rows_rejected == heavy
  assert result.metadata["counts"]["rows_written"] == len(rows) - heavy
  with open(os.path.join(out, "errors", "errors-00000-of-00001.jsonl")) as f:
    (error,) = [json.loads(line) for line in f]
  assert error["group"] == {"user": 7} and error["rows"] == heavy
  assert error["reason"].startswith(f"the group has {heavy:,} rows (")
  assert "more than one worker assembles at once (20,000 bytes)" in \
      error["reason"]
  assert len(error["examples"]) == 3
  assert all(e["source"] == src for e in error["examples"])

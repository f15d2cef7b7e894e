"""Buckets too large for one assembly (skewed keys): assembled in passes,
with the same records; a group too large for any assembly: refused, named
in errors/ with its size, and counted."""

import csv
import json
import os
import random

import pytest
import pyarrow.compute as pc

import beam_tfrecords as btr
from beam_tfrecords.encoding import StepEncoder, passes
from beam_tfrecords.building import planning
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


def _bytes_of_user(src, user):
  """encoding.passes.table_bytes of one user's steps, and of all."""
  import pyarrow.csv as pcsv
  table = pcsv.read_csv(src)
  steps = StepEncoder(SCHEMA).encode_table(
      {c: table.column(c).combine_chunks() for c in table.column_names},
      table.num_rows).table
  mine = steps.filter(pc.equal(steps.column("k0"), user))
  return passes.table_bytes(mine), passes.table_bytes(steps)


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
  heavy, total = _bytes_of_user(src, 7)
  assert total > heavy + 1  # so that it takes passes
  monkeypatch.setattr(planning, "buckets_for", lambda _: 1)
  monkeypatch.setattr(grouped, "ASSEMBLY_BYTES", heavy + 1)
  plans = []
  real = grouped.plan_passes
  monkeypatch.setattr(grouped, "plan_passes",
                      lambda *a: plans.append(real(*a)) or plans[-1])
  out = str(tmp_path / "passes")
  result = btr.build(SCHEMA, src, out, num_shards=2)
  assert _files(out) == _files(whole)
  assert result.info.counts.rows_written == len(rows)
  assert [(p.passes, p.refused) for p in plans] == [
      (-(-total // (heavy + 1)), [])]
  assert plans[0].passes >= 2


def test_a_group_too_large_is_refused_with_its_size(tmp_path, skewed,
                                                   monkeypatch):
  src, rows = skewed
  heavy, _ = _bytes_of_user(src, 7)
  monkeypatch.setattr(grouped, "ASSEMBLY_BYTES", heavy - 1)
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
  heavy_rows = sum(1 for u, _, _ in rows if u == 7)
  assert result.rows_rejected == heavy_rows
  assert result.info.counts.rows_written == len(rows) - heavy_rows
  with open(os.path.join(out, "errors", "errors-00000-of-00001.jsonl")) as f:
    (error,) = [json.loads(line) for line in f]
  assert error["group"] == {"user": 7} and error["rows"] == heavy_rows
  assert error["reason"] == (
      f"the group has {heavy_rows:,} rows (about {heavy:,} bytes of "
      "steps), more than one worker assembles at once "
      f"({heavy - 1:,} bytes), so it is not written; leave such keys "
      "out, or group by a finer key")
  assert len(error["examples"]) == 3
  assert all(e["source"] == src for e in error["examples"])

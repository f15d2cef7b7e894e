"""Grouped SequenceExamples resume and reuse (issue 62): a read unit keeps
its rows as steps, before they are put in buckets, and each bucket's
assembled groups are kept under its units' keys; a rebuild reads only new
or changed inputs, assembles only the buckets they touch, and publishes
what a clean build does."""

import json
import os
import random

import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.unit_cache import UnitStore
from beam_tfrecords.encoding.steps import key_hash
from beam_tfrecords.transforms.grouped import buckets_for

from tests.e2e.test_resume import _files, _units
from tests.helpers.kill_build import (build_command, build_env, kill_when,
                                      rerun_here)
from tests.helpers.paths import ROOT

SCHEMA = os.path.join(ROOT, "schemas", "user_events.yaml")
EVENTS = ["view", "click", "buy"]
# (File 1's bad row rejects a third of its rows: its user's group.)
OPTS = {"num_shards": 2, "max_bad_fraction": 0.5}


@pytest.fixture(autouse=True)
def _fixed_time(monkeypatch):
  monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # croissant.json


def _events(path, users, rows, seed):
  """An event log of these users (each user's rows in one file; in file
  1, one bad row, which rejects its user's group), shuffled."""
  rng = random.Random(seed)
  lines = ["user_id,country,timestamp,event,item_id,dwell_seconds"]
  for i in range(rows):
    user = users[i % len(users)]
    item = "oops" if (seed, i) == (1, 13) else str(rng.randrange(1000))
    lines.append(f"{user},c{user % 7},{1_000_000 + rng.randrange(10**6)},"
                 f"{rng.choice(EVENTS)},{item},{rng.random() * 60:.3f}")
  body = lines[1:]
  rng.shuffle(body)
  path.write_text("\n".join([lines[0]] + body) + "\n")
  return str(path)


def _inputs(folder, n, users_each=3, rows=2000):
  """n files whose users are their own (file k: users k*100 ... + users_each):
  a file's rows touch only the buckets of its few users."""
  return [_events(folder / f"day{k:02d}.csv",
                  [k * 100 + u for u in range(users_each)], rows, seed=k)
          for k in range(n)]


def test_a_rebuild_reads_and_groups_only_what_is_new(tmp_path):
  inputs = _inputs(tmp_path, 5)
  cache = str(tmp_path / "cache")
  first = btr.build(SCHEMA, inputs[:4], str(tmp_path / "a"), **OPTS,
                    cache=cache)
  units = first.info.inputs.extra["units"]
  assert units["read"] == 4 and units["reused"] == 0
  assert units["buckets_reused"] == 0
  buckets = units["buckets"]
  # The same inputs again: every unit and every bucket reused.
  again = str(tmp_path / "again")
  btr.build(SCHEMA, inputs[:4], again, **OPTS, cache=cache)
  assert _units(again) == {"read": 4, "reused": 4, "buckets": buckets,
                           "buckets_reused": buckets}
  assert _files(again) == _files(str(tmp_path / "a"))
  # One more file: it alone is read, and only the buckets its users fall
  # in are grouped again (the bucket count did not change: the input's
  # size stays under one step of buckets_for).
  out = str(tmp_path / "b")
  btr.build(SCHEMA, inputs, out, **OPTS, cache=cache)
  clean = str(tmp_path / "clean")
  btr.build(SCHEMA, inputs, clean, **OPTS, resume=False)
  assert _files(out) == _files(clean)
  got = _units(out)
  assert got["read"] == 5 and got["reused"] == 4
  # Buckets with steps: each user's; those of the new file's users are
  # made again (their bucket's set of units changed).
  spread = buckets_for(sum(os.path.getsize(p) for p in inputs))
  touched = _buckets([400, 401, 402], spread)
  had = _buckets([k * 100 + u for k in range(5) for u in range(3)], spread)
  assert got["buckets"] == len(had)
  assert got["buckets_reused"] == len(had - touched) > 0
  # The dead letters of the bad rows, from kept and from read units.
  assert btr.open(out).info.counts == btr.open(clean).info.counts
  assert btr.open(out).info.counts.rows_rejected > 0


def _buckets(users, buckets):
  """The buckets these user_id keys go to (transforms.grouped's rule)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import pyarrow as pa  # pylint: disable=import-outside-toplevel
  table = pa.table({"k0": pa.array(users, type=pa.int64())})
  return set((key_hash(table) % np.uint64(buckets)).tolist())


def _kept(root, what):
  """The complete units of a store that are read units ("path") or
  buckets ("bucket")."""
  return [u for u in UnitStore(root).units()
          if what in json.load(open(os.path.join(
              root, u.key[:2], u.key, "unit.json")))["unit"]]


def test_a_damaged_bucket_or_spill_file_is_made_again(tmp_path,
                                                      monkeypatch):
  """Every gathering's steps spilled to a file (as a large input's are):
  a kept read unit keeps its spill files by a link, not their bytes. A
  damaged kept bucket is grouped again, a damaged kept spill file's unit
  read again; the same files either way."""
  from beam_tfrecords.transforms import grouped  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(grouped, "SPILL_BYTES", 0)
  inputs = _inputs(tmp_path, 3)
  cache = str(tmp_path / "cache")
  first = btr.build(SCHEMA, inputs, str(tmp_path / "a"), **OPTS,
                    cache=cache)
  buckets = first.info.inputs.extra["units"]["buckets"]
  kept = _kept(cache, "bucket")
  assert len(kept) == buckets
  read = _kept(cache, "path")
  spills = [os.path.join(cache, u.key[:2], u.key, n) for u in read
            for n in os.listdir(os.path.join(cache, u.key[:2], u.key))
            if n.endswith(".file")]
  assert len(spills) == 3 and all(os.stat(p).st_nlink == 1 for p in spills)
  damaged = os.path.join(cache, kept[0].key[:2], kept[0].key, "00000.batch")
  data = bytearray(open(damaged, "rb").read())
  data[len(data) // 2] ^= 1
  open(damaged, "wb").write(bytes(data))
  out = str(tmp_path / "b")
  btr.build(SCHEMA, inputs, out, **OPTS, cache=cache)
  assert _units(out) == {"read": 3, "reused": 3, "buckets": buckets,
                         "buckets_reused": buckets - 1}
  assert _files(out) == _files(str(tmp_path / "a"))
  # A kept spill file cut short: its unit is read again (its key is the
  # same, so every kept bucket still serves).
  data = open(spills[1], "rb").read()
  os.remove(spills[1])
  open(spills[1], "wb").write(data[:-7])
  again = str(tmp_path / "c")
  btr.build(SCHEMA, inputs, again, **OPTS, cache=cache)
  assert _units(again) == {"read": 3, "reused": 2, "buckets": buckets,
                           "buckets_reused": buckets}
  assert _files(again) == _files(str(tmp_path / "a"))


def test_a_killed_grouped_build_reuses_its_finished_units(tmp_path):
  """kill -9 once some units are kept; the same command reuses them and
  publishes what an uninterrupted build does."""
  inputs = _inputs(tmp_path, 12, users_each=40, rows=20_000)
  out = str(tmp_path / "out")
  env = build_env()
  command = build_command(SCHEMA, inputs, out)
  store = UnitStore(os.path.join(out, ".units"))
  kill_when(command, env, lambda: len(_kept(store.root, "path")) >= 3)
  finished = len(_kept(store.root, "path"))
  assert 3 <= finished < 12
  assert rerun_here(command) == 0
  units = _units(out)
  assert units["read"] == 12 and units["reused"] >= finished
  assert not os.path.exists(os.path.join(out, ".units"))
  whole = str(tmp_path / "whole")
  btr.build(SCHEMA, inputs, whole, num_shards=2, resume=False)
  assert _files(out) == _files(whole)


def test_units_kept_for_another_bucket_count_are_bucketed_again(
    tmp_path, monkeypatch):
  """The bucket count grows with the input: a unit kept by a build with
  4 buckets serves one with 16 (its parcels' steps, and its rejected
  group's bad keys, put in the new buckets); no bucket is reused."""
  # (Two small files whose steps stay in the store, and one three times
  # as large, whose steps are spilled: kept as a link to the file.)
  inputs = _inputs(tmp_path, 2) + [_events(tmp_path / "large.csv",
                                           [900, 901, 902], 6000, seed=9)]
  cache = str(tmp_path / "cache")
  from beam_tfrecords.transforms import grouped  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(grouped, "SPILL_BYTES", 300_000)
  with monkeypatch.context() as patched:
    patched.setattr(grouped, "MIN_BUCKETS", 4)
    first = btr.build(SCHEMA, inputs, str(tmp_path / "a"), **OPTS,
                      cache=cache)
  assert first.info.inputs.extra["units"]["buckets"] <= 4
  files = [n for u in _kept(cache, "path")
           for n in os.listdir(os.path.join(cache, u.key[:2], u.key))]
  assert sum(n.endswith(".file") for n in files) == 1
  out = str(tmp_path / "b")
  btr.build(SCHEMA, inputs, out, **OPTS, cache=cache)
  got = _units(out)
  assert got["read"] == 3 and got["reused"] == 3
  assert got["buckets_reused"] == 0 and got["buckets"] > 4
  assert btr.open(out).info.counts.rows_rejected > 0
  assert _files(out) == _files(str(tmp_path / "a"))

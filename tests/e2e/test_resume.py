"""Builds that resume and reuse (issue 62, core/unit_cache.py): a killed
build's rerun reuses its finished read units; --cache reuses unchanged
inputs across builds; what is published is the same as a clean build's
(dataset.json's `inputs`, which the determinism contract exempts, says
how many units were reused)."""

import hashlib
import json
import os
import re
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords.cli import main as cli_main
from beam_tfrecords.core.unit_cache import UnitStore

from tests.helpers.kill_build import (build_command, build_env, kill_when,
                                      rerun_here)
from tests.helpers.shard_size import SCHEMA, _csv

ROWS = 3000


@pytest.fixture(autouse=True)
def _fixed_time(monkeypatch):
  monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # croissant.json


def _inputs(folder, n, rows=ROWS):
  paths = []
  for k in range(n):
    path = folder / f"in{k:02d}.csv"
    if not path.exists():
      _csv(path, rows)
    paths.append(str(path))
  return paths


def _files(out):
  """{relative path: bytes} of a published dataset, dataset.json without
  `inputs` (exempt), croissant.json without dataset.json's size and
  checksum (which follow it)."""
  found = {}
  for root, _, names in os.walk(out):
    for name in names:
      full = os.path.join(root, name)
      with open(full, "rb") as f:
        found[os.path.relpath(full, out)] = f.read()
  meta = json.loads(found["dataset.json"])
  sha = hashlib.sha256(found["dataset.json"]).hexdigest()
  found["croissant.json"] = re.sub(
      rb'"contentSize": "%d B",\s*"sha256": "%s"' % (
          len(found["dataset.json"]), sha.encode()), b"<dataset.json>",
      found["croissant.json"])
  found["dataset.json"] = json.dumps(
      {k: v for k, v in meta.items() if k != "inputs"}).encode()
  del found["_SUCCESS"]
  return found


def _units(out):
  return json.load(open(os.path.join(out, "dataset.json")))["inputs"]["units"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
  """A clean build of 4 inputs (nothing kept), to compare with."""
  folder = tmp_path_factory.mktemp("resume_clean")
  out = str(folder / "out")
  before = os.environ.get("SOURCE_DATE_EPOCH")
  os.environ["SOURCE_DATE_EPOCH"] = "1700000000"
  try:
    btr.build(SCHEMA, _inputs(folder, 4), out, num_shards=2)
  finally:  # (the suite's own value, which conftest sets, put back)
    if before is None:
      del os.environ["SOURCE_DATE_EPOCH"]
    else:
      os.environ["SOURCE_DATE_EPOCH"] = before
  return folder, out


def test_cache_reuses_what_did_not_change(clean, tmp_path):
  folder, clean_out = clean
  inputs = _inputs(folder, 4)
  cache = str(tmp_path / "cache")
  a = btr.build(SCHEMA, inputs[:3], str(tmp_path / "a"), num_shards=2,
                cache=cache)
  assert a.info.inputs.extra["units"] == {"read": 3, "reused": 0}
  # One more input: only it is read and encoded.
  out = str(tmp_path / "b")
  b = btr.build(SCHEMA, inputs, out, num_shards=2, cache=cache)
  assert _units(out) == {"read": 4, "reused": 3}
  assert _files(out) == _files(clean_out)
  assert b.info.counts == btr.open(clean_out).info.counts
  # A changed input is computed again, and nothing else.
  changed = tmp_path / "changed"
  changed.mkdir()
  copies = []
  for k, path in enumerate(inputs):
    copy = changed / os.path.basename(path)
    text = open(path).read()
    copy.write_text(text if k != 2 else text + "99999,one more row\n")
    copies.append(str(copy))
  btr.build(SCHEMA, copies, str(tmp_path / "c"), num_shards=2, cache=cache)
  assert _units(str(tmp_path / "c")) == {"read": 4, "reused": 0}
  os.utime(copies[2], (time.time() + 60, time.time() + 60))  # touched
  btr.build(SCHEMA, copies, str(tmp_path / "d"), num_shards=2, cache=cache)
  assert _units(str(tmp_path / "d")) == {"read": 4, "reused": 3}
  # A schema that changes records reuses nothing.
  other = json.loads(json.dumps(SCHEMA))
  other["name"] = "other"
  btr.build(other, inputs, str(tmp_path / "e"), num_shards=2, cache=cache)
  assert _units(str(tmp_path / "e")) == {"read": 4, "reused": 0}


@pytest.mark.parametrize("options", [
    {"num_shards": 3, "gzip_level": 6},
    {"num_shards": 5, "shuffle_seed": 11}], ids=["shards", "shuffle"])
def test_another_shard_plan_reuses_every_unit(clean, tmp_path, options):
  """Options that change how records are dealt to shards, not the records
  (the shard count, the gzip level, a shuffle), reuse every unit: the
  records come back from the parts kept for the first plan, are dealt
  the new way, and those parts are kept too; the files are a clean
  build's with the same options."""
  folder, _ = clean
  inputs = _inputs(folder, 4)
  cache = str(tmp_path / "cache")
  btr.build(SCHEMA, inputs, str(tmp_path / "a"), num_shards=2, cache=cache)
  out = str(tmp_path / "b")
  btr.build(SCHEMA, inputs, out, cache=cache, **options)
  assert _units(out) == {"read": 4, "reused": 4}
  whole = str(tmp_path / "whole")
  btr.build(SCHEMA, inputs, whole, **options)
  assert _files(out) == _files(whole)
  store = UnitStore(cache)
  for unit in store.units():  # both plans' parts kept, side by side
    folder = os.path.join(cache, unit.key[:2], unit.key)
    assert len([n for n in os.listdir(folder) if n.endswith(".part")]) == 2


def test_a_damaged_unit_is_computed_again(clean, tmp_path):
  folder, clean_out = clean
  inputs = _inputs(folder, 4)
  cache = str(tmp_path / "cache")
  btr.build(SCHEMA, inputs, str(tmp_path / "a"), num_shards=2, cache=cache)
  store = UnitStore(cache)
  units = list(store.units())
  assert len(units) == 4
  damaged = os.path.join(cache, units[1].key[:2], units[1].key, "00000.batch")
  data = bytearray(open(damaged, "rb").read())
  data[len(data) // 2] ^= 1
  open(damaged, "wb").write(bytes(data))
  out = str(tmp_path / "b")
  btr.build(SCHEMA, inputs, out, num_shards=2, cache=cache)
  assert _units(out) == {"read": 4, "reused": 3}
  assert _files(out) == _files(clean_out)


def test_the_cache_command_lists_evicts_and_clears(clean, tmp_path, capsys):
  folder, _ = clean
  cache = str(tmp_path / "cache")
  btr.build(SCHEMA, _inputs(folder, 4), str(tmp_path / "a"), num_shards=2,
            cache=cache, cache_size="1MiB")
  assert cli_main(["cache", cache]) == 0
  assert f"{cache}: 4 unit(s), 4 batch(es), " in capsys.readouterr().out
  assert cli_main(["cache", cache, "--max-size", "1"]) == 0
  assert "4 unit(s) evicted" in capsys.readouterr().out
  btr.build(SCHEMA, _inputs(folder, 4), str(tmp_path / "b"), num_shards=2,
            cache=cache, cache_size=1)  # bound: this build's units stay
  assert len(list(UnitStore(cache).units())) == 4
  assert cli_main(["cache", cache, "--clear"]) == 0
  assert "cleared" in capsys.readouterr().out
  assert list(UnitStore(cache).units()) == []


def test_units_are_kept_by_default_and_not_with_no_resume(clean, tmp_path):
  """A build keeps its units in the output's .units/ until its checks
  pass (the default: it costs no measurable CPU, and its part files are
  links of the build's own); --no-resume keeps none and drops what a
  killed build left there."""
  folder, _ = clean
  again = btr.build(SCHEMA, _inputs(folder, 4), str(tmp_path / "o2"),
                    num_shards=2)
  assert again.info.inputs.extra["units"] == {"read": 4, "reused": 0}
  assert not (tmp_path / "o2" / ".units").exists()
  out = tmp_path / "out"
  stale = out / ".units" / "ab" / ("ab" + "0" * 62)
  stale.mkdir(parents=True)
  (stale / "unit.json").write_text('{"batches": 0}')
  result = btr.build(SCHEMA, _inputs(folder, 4), str(out), num_shards=2,
                     resume=False)
  assert "units" not in result.info.inputs.extra
  assert not (out / ".units").exists()


def test_a_killed_build_reuses_its_finished_units(tmp_path, capsys):
  """kill -9 once some units are finished; the same command reuses them
  and publishes what an uninterrupted build does."""
  inputs = _inputs(tmp_path, 12, rows=20_000)
  out = str(tmp_path / "out")
  env = build_env()
  schema = tmp_path / "schema.json"
  schema.write_text(json.dumps(SCHEMA))
  command = build_command(str(schema), inputs, out)
  store = UnitStore(os.path.join(out, ".units"))
  kill_when(command, env, lambda: len(list(store.units())) >= 3)
  finished = len(list(store.units()))
  assert 3 <= finished < 12
  assert not os.path.exists(os.path.join(out, "_SUCCESS"))
  capsys.readouterr()
  assert rerun_here(command) == 0
  units = _units(out)
  assert units["read"] == 12 and units["reused"] >= finished
  assert (f"read units: 12, of which {units['reused']} reused from earlier "
          "work (not read or encoded again)") in capsys.readouterr().out
  assert not os.path.exists(os.path.join(out, ".units"))
  whole = str(tmp_path / "whole")
  btr.build(SCHEMA, inputs, whole, num_shards=2)
  assert _files(out) == _files(whole)


def test_keeping_units_changes_no_statistic(tmp_path):
  """A build that keeps its units (the default) publishes what one that
  keeps nothing does, statistics.pb included, where a string feature has
  more distinct values than a statistics partial keeps (TOP_KEPT: its
  top values then depend on which partials are merged together). Files
  a*: 1,200 words 5 times each; files z*: 12 batches, each a word z<k>
  once and 1,100 words seen once. Merged batch after batch, z<k> is cut
  from every merge once an a* file came first; merged a unit at a time,
  it reaches 12 and stays: so units keep each batch's partial, and a
  reused batch's goes where a read one's does."""
  inputs = []
  for k in range(2):
    path = tmp_path / f"a{k}.csv"
    path.write_text("id,text\n" + "".join(
        f"{k * 6000 + i},a{k}_{i // 5:04d}\n" for i in range(6000)))
    inputs.append(str(path))
  for k in range(2):
    path = tmp_path / f"z{k}.csv"
    path.write_text("id,text\n" + "".join(
        f"{50000 + k * 20000 + b * 1101 + i},"
        f"{f'z{k}' if i == 0 else f'f{k}_{b:02d}_{i:04d}'}\n"
        for b in range(12) for i in range(1101)))
    inputs.append(str(path))
  small = {"block_size": 16_000}  # about 1,100 rows a batch
  kept = btr.build(SCHEMA, inputs, str(tmp_path / "kept"), num_shards=2,
                   format_options=small)
  assert kept.info.inputs.extra["units"] == {"read": 4, "reused": 0}
  btr.build(SCHEMA, inputs, str(tmp_path / "none"), num_shards=2,
            format_options=small, resume=False)
  assert _files(str(tmp_path / "kept")) == _files(str(tmp_path / "none"))
  btr.build(SCHEMA, inputs, str(tmp_path / "fill"), num_shards=2,
            format_options=small, cache=str(tmp_path / "cache"))
  again = btr.build(SCHEMA, inputs, str(tmp_path / "again"), num_shards=2,
                    format_options=small, cache=str(tmp_path / "cache"))
  assert again.info.inputs.extra["units"] == {"read": 4, "reused": 4}
  assert _files(str(tmp_path / "again")) == _files(str(tmp_path / "none"))

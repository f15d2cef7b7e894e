"""TensorFlow Transform builds resume and reuse (issue 62): read units are
kept as any build's (the analysis reads a reused unit's records back
from its kept parts), and the analysis is kept as a phase: under a key
of every read unit's key and the preprocessing_fn's, so a rebuild of the
same inputs (or a rerun after a kill once it was kept) transforms
without analyzing again. A build with a new or changed input analyzes
every row again: TFT's analyzers combine over all of them."""

import json
import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.unit_cache import UnitStore

from tests.e2e.test_resume import _files, _units
from tests.helpers.kill_build import (build_command, build_env, kill_when,
                                      rerun_here)
from tests.helpers.paths import ROOT

SCHEMA = os.path.join(ROOT, "schemas", "movie_ratings_tft.yaml")
RATINGS = os.path.join(ROOT, "pipelines", "data", "ratings.csv")
EXEMPT = ("transform_fn/", "transformed_metadata/")


@pytest.fixture(autouse=True)
def _fixed_time(monkeypatch):
  monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # croissant.json
  monkeypatch.chdir(ROOT)  # (the schema names pipelines.movie_ratings_tft)


def _inputs(folder, n):
  """The bundled ratings cut into n files, and one more of other rows."""
  lines = open(RATINGS).read().splitlines()
  header, rows = lines[0], lines[1:]
  paths = []
  for k in range(n):
    path = folder / f"ratings{k}.csv"
    path.write_text("\n".join([header] + rows[k::n]) + "\n")
    paths.append(str(path))
  extra = folder / "more.csv"
  extra.write_text("\n".join([header] + [
      f"{900 + i},Heat,{(i % 9) / 2 + 0.5},{1_700_000_000 + i},"
      f"{'train' if i % 4 else 'eval'}" for i in range(200)]) + "\n")
  return paths, str(extra)


def _same(a, b):
  """_files of two TFT datasets, but for what the determinism contract
  exempts with transform: (docs/design.md): the saved graph (TensorFlow
  does not write a SavedModel byte-identically), its checksums in
  dataset.json, and croissant.json, which repeats them."""
  def comparable(out):
    found = _files(out)
    meta = json.loads(found.pop("dataset.json"))
    meta["checksums"] = {k: v for k, v in meta["checksums"].items()
                         if not k.startswith(EXEMPT)}
    del found["croissant.json"]
    return {"dataset.json": meta, **{
        k: v for k, v in found.items() if not k.startswith(EXEMPT)}}
  left, right = comparable(a), comparable(b)
  assert any(k.startswith("transformed/") for k in left)
  assert left == right


def _analysis(root):
  """The kept analyses in a unit store."""
  return [u for u in UnitStore(root).units()
          if "analysis" in json.load(open(os.path.join(
              root, u.key[:2], u.key, "unit.json")))["unit"]]


def test_a_rebuild_reuses_units_and_the_analysis(tmp_path):
  inputs, extra = _inputs(tmp_path, 3)
  cache = str(tmp_path / "cache")
  first = btr.build(SCHEMA, inputs, str(tmp_path / "a"), num_shards=2,
                    cache=cache)
  assert first.info.inputs.extra["units"] == {"read": 3, "reused": 0}
  assert first.info.inputs.extra["transform_analysis"] == "computed"
  assert len(_analysis(cache)) == 1
  # The same inputs: every unit reused, the analysis too.
  again = str(tmp_path / "again")
  btr.build(SCHEMA, inputs, again, num_shards=2, cache=cache)
  assert _units(again) == {"read": 3, "reused": 3}
  assert btr.open(again).info.inputs.extra["transform_analysis"] == "reused"
  assert _files(again) == _files(str(tmp_path / "a"))
  # One more input: its unit alone is read; the analysis sees every row
  # (the old units' records got back from their kept parts).
  out = str(tmp_path / "b")
  btr.build(SCHEMA, inputs + [extra], out, num_shards=2, cache=cache)
  assert _units(out) == {"read": 4, "reused": 3}
  assert btr.open(out).info.inputs.extra["transform_analysis"] == "computed"
  clean = str(tmp_path / "clean")
  btr.build(SCHEMA, inputs + [extra], clean, num_shards=2, resume=False)
  assert "transform_analysis" not in btr.open(clean).info.inputs.extra
  _same(out, clean)


def test_a_killed_build_resumes_after_its_analysis(tmp_path):
  """kill -9 once the analysis is kept: the rerun reuses every unit and
  the analysis, and transforms; what it publishes is a clean build's."""
  inputs, _ = _inputs(tmp_path, 3)
  out = str(tmp_path / "out")
  command = build_command(SCHEMA, inputs, out)
  env = build_env()
  store = os.path.join(out, ".units")
  kill_when(command, env, lambda: bool(_analysis(store)))
  assert not os.path.exists(os.path.join(out, "_SUCCESS"))
  assert rerun_here(command) == 0
  assert _units(out) == {"read": 3, "reused": 3}
  assert btr.open(out).info.inputs.extra["transform_analysis"] == "reused"
  whole = str(tmp_path / "whole")
  btr.build(SCHEMA, inputs, whole, num_shards=2, resume=False)
  _same(out, whole)

"""The builds test_flink.py and test_spark.py run on a real cluster and on
the DirectRunner, with what they compare.

Cross-version (Beam 2.70 job server, assembled): the Java side is Beam
2.70.0 (job service 2.65.0) from ci/jobserver, the Python SDK 2.77.
"""

import collections
import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords.testing.tools import ToolsMissing, flights_csv

from tests.helpers.records import shard_paths, tf_records
from tests.helpers.datasets import (assert_same_but_units, dataset_files,
                                    same_file, same_success)
from tests.helpers.paths import ROOT

HERE = ROOT
TIMEOUT = 900
FLIGHT_ROWS = 1_000_000


def tool(make):
  """What `make()` returns (a tools-folder binary); skipped where it
  cannot be made (Go, Java or Maven missing), unless
  BTR_REQUIRE_CLUSTERS=1 (CI) makes that a failure."""
  try:
    return make()
  except ToolsMissing as e:
    if os.environ.get("BTR_REQUIRE_CLUSTERS") == "1":
      raise
    pytest.skip(str(e))


def started(cls, workdir):
  """The cluster, started; skipped where Java or Maven is missing, unless
  BTR_REQUIRE_CLUSTERS=1 (CI) makes that a failure."""
  cluster = cls(str(workdir), source=HERE)
  try:
    cluster.__enter__()
  except ToolsMissing as e:
    if os.environ.get("BTR_REQUIRE_CLUSTERS") == "1":
      raise
    pytest.skip(str(e))
  return cluster


@pytest.fixture(scope="session")
def cases(tmp_path_factory):
  """A folder both engines' test files share (under pytest-xdist they run
  in two processes): each case's inputs, and its DirectRunner build, are
  made once."""
  base = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    base = base.parent  # popen-gwN's parent: the run's own folder
  folder = base / "engine-cases"
  folder.mkdir(exist_ok=True)
  return folder


@contextlib.contextmanager
def _locked(path):
  with open(f"{path}.lock", "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    yield


def prepared(cases, name, make):
  """The case's folder and what make(folder) returned (JSON), made by the
  first test that asks."""
  folder = cases / name
  with _locked(folder):
    made = folder / ".made.json"
    if not made.exists():
      folder.mkdir(exist_ok=True)
      made.write_text(json.dumps(make(folder)))
    return folder, json.loads(made.read_text())


def cli(args, cwd, env=None, expect=0):
  """`beam-tfrecords ARGS` run from `cwd`; the finished process."""
  run = subprocess.run([sys.executable, "-m", "beam_tfrecords"] + args,
                       cwd=cwd, capture_output=True, text=True,
                       timeout=TIMEOUT, env=env)
  assert run.returncode == expect, run.stderr[-4000:]
  return run


def movie_ratings(folder):
  """The bundled movie ratings with a hash split on the age, 2 shards:
  [schema, input]."""
  with open(os.path.join(HERE, "schemas", "movie_ratings.yaml")) as f:
    text = f.read()
  schema = folder / "movies.yaml"
  schema.write_text(text + "splits:\n  hash: Age\n"
                    "  weights: {train: 80%, eval: 20%}\n")
  return [str(schema), os.path.join(HERE, "pipelines", "data",
                                    "movie_ratings.csv")]


def direct_cli(folder, base):
  """The DirectRunner's build of `base` (CLI arguments) in the case's
  folder, made once; its path."""
  out = folder / ("direct-" + hashlib.sha256(
      repr(base).encode()).hexdigest()[:12])
  with _locked(out):
    if not (out / "_SUCCESS").exists():
      cli(base + ["--output", str(out)], folder)
  return out


def cli_build_pair(folder, schema, inputs, extra, engine_args, env, out):
  """The same CLI build (run in the case's folder) on the DirectRunner
  (shared) and on the engine into `out`; both outputs' dataset.json and
  the DirectRunner's folder."""
  base = ["build", "--schema", schema, "--max-bad-fraction", "1"] + [
      a for i in inputs for a in ("--input", i)] + extra
  direct = direct_cli(folder, base)
  cli(base + ["--output", str(out)] + engine_args, folder, env=env)
  return (btr.dataset_info(str(direct)), btr.dataset_info(str(out)),
          direct)


GROUPED = {"name": "sessions", "record": "sequence_example",
           "group_by": "user", "order_by": [{"column": "t", "type": "int64"}],
           # Users with more than 30 events are rejected (overflow: reject).
           "max_length": 30,
           "context": {"user": {"type": "int64", "required": True},
                       "n": {"derive": "length"}},
           "sequence": {"item": {"type": "int64", "required": True},
                        "t": {"type": "int64"}}}


def grouped_input(folder):
  """Events of 300 users in two files; users 0, 50, ... have 40 events
  (rejected), a row with a bad user key goes to errors/."""
  paths = []
  for part in range(2):
    rows = ["user,t,item"]
    for user in range(300):
      for e in range(40 if user % 50 == 0 else 1 + user % 9):
        if e % 2 == part:
          rows.append(f"{user},{(e * 37 + user) % 1000},{user * 100 + e}")
    if part:
      rows.append("not-a-user,1,2")
    path = folder / f"events{part}.csv"
    path.write_text("\n".join(rows) + "\n")
    paths.append(str(path))
  return paths


TRANSFORM_USER_MODULE = "user_transform"
# One analyzer (a vocabulary; its integers do not depend on the order the
# runner combines in): each analyzer adds stages, and on Flink bucketize
# and a vocabulary together took 107 s of job for 400 rows.
ENGINE_TRANSFORM = '''
import tensorflow as tf
import tensorflow_transform as tft


def preprocessing_fn(inputs):
  return {"parity_id": tft.compute_and_apply_vocabulary(
              tf.strings.as_string(inputs["id"] % 3)),
          "id": tf.identity(inputs["id"])}
'''


def transform_job(folder):
  """A schema with TensorFlow Transform and the user's preprocessing_fn
  in a module of theirs: [schema, input, module path]."""
  module = TRANSFORM_USER_MODULE
  (folder / f"{module}.py").write_text(ENGINE_TRANSFORM)
  (folder / "in.csv").write_text("id,score,split\n" + "".join(
      f"{i},{(i * 7919) % 1000 / 10},{'eval' if i % 4 else 'train'}\n"
      for i in range(400)))
  (folder / "t.yaml").write_text(
      "name: ex\nsplits: {column: split, values: [train, eval]}\n"
      "features:\n  id: {type: int64, required: true}\n"
      "  score: {type: float, required: true}\n"
      f"transform: {{preprocessing_fn: '{module}:preprocessing_fn'}}\n")
  return [str(folder / "t.yaml"), str(folder / "in.csv"),
          str(folder / f"{module}.py")]


FLIGHTS_SCHEMA = """name: flights
splits:
  hash: tailnum
  weights: {train: 90%, eval: 10%}
features:
  year: {type: int64, required: true}
  month: {type: int64, required: true}
  day: {type: int64, required: true}
  dep_time: {type: int64}
  dep_delay: {type: int64}
  arr_time: {type: int64}
  arr_delay: {type: int64}
  carrier: {type: string, required: true}
  flight: {type: int64, required: true}
  tailnum: {type: string}
  origin: {type: string, required: true}
  dest: {type: string, required: true}
  air_time: {type: int64}
  distance: {type: int64, required: true}
  time_hour: {type: string, required: true}
"""


def flights(folder):
  """[schema, input] of a million real flight rows."""
  (folder / "flights.yaml").write_text(FLIGHTS_SCHEMA)
  return [str(folder / "flights.yaml"), flights_csv(FLIGHT_ROWS)]


# What the determinism contract exempts (docs/design.md): TensorFlow does
# not write a SavedModel byte-identically.
TRANSFORM_GRAPH = ("transform_fn/", "transformed_metadata/")


def assert_same_dataset(direct, engine, a, b, exempt=()):
  """Every published file byte for byte (dataset.json, statistics.pb,
  shards, errors/) but those under the `exempt` folders (which both
  have), and the counts; dataset.json but its `inputs.units` (which the
  determinism contract exempts: Spark computes a stage again for each of
  its consumers, and the second computation reuses the units the first
  kept), croissant.json but its checksum of dataset.json, and _SUCCESS
  but its run id and its seal of dataset.json (each checked against its
  own)."""
  assert engine.counts == direct.counts
  files = dataset_files(a)
  assert files == dataset_files(b)
  for prefix in exempt:
    assert any(rel.startswith(prefix) for rel in files), prefix
  for rel in files:
    if rel.startswith(tuple(exempt)):
      continue
    if rel in ("dataset.json", "croissant.json"):
      # They record the exempt files' checksums (and croissant.json
      # dataset.json's): the same but for those.
      assert _without(a, rel, exempt) == _without(b, rel, exempt), rel
      continue
    if rel == "_SUCCESS":
      assert same_success(a, b), rel
      continue
    assert same_file(a, b, rel), rel


def _without(folder, rel, exempt) -> dict:
  """dataset.json or croissant.json without the checksums of the files
  under `exempt` (and croissant.json without dataset.json's), dataset.json
  without `inputs.units`."""
  with open(os.path.join(folder, rel)) as f:
    meta = json.load(f)
  if rel == "dataset.json":
    meta["checksums"] = {n: v for n, v in meta["checksums"].items()
                         if not n.startswith(tuple(exempt))}
    meta["inputs"].pop("units", None)
    return meta
  meta["distribution"] = [
      e for e in meta["distribution"]
      if not e["@id"].startswith(tuple(exempt) + ("dataset.json",))]
  return meta


def same_records_any_order(tf, a, b, splits):
  """--sink beam: Beam decides which record goes to which shard, and in
  what order; the records per split (read by TensorFlow) are the same
  multiset, in as many shards."""
  for split in splits:
    assert len(shard_paths(a, split)) == len(shard_paths(b, split))
    left = collections.Counter(tf_records(tf, a, split))
    right = collections.Counter(tf_records(tf, b, split))
    assert left and left == right, split


def direct_api(folder, schema, inputs, **options):
  """The DirectRunner's btr.build of the case, made once: (its
  dataset.json, its folder)."""
  out = folder / "direct-api"
  with _locked(out):
    if not (out / "_SUCCESS").exists():
      btr.build(schema, inputs, str(out), **options)
  return btr.dataset_info(str(out)), out


# The builds each engine's tests run: each returns the engine's
# dataset.json once it equals the DirectRunner's.

def movie_ratings_build(cases, tmp_path, args, env):
  folder, (schema, src) = prepared(cases, "movies", movie_ratings)
  direct, engine, direct_dir = cli_build_pair(
      folder, schema, [src], ["--num-shards", "2"], args, env,
      tmp_path / "engine")
  assert set(direct.splits) == {"train", "eval"}
  assert direct.counts.records_written == 200
  assert_same_dataset(direct, engine, direct_dir, tmp_path / "engine")
  return engine


def grouped_build(cases, tmp_path, args):
  folder, inputs = prepared(cases, "grouped", grouped_input)
  options = {"num_shards": 3, "max_bad_fraction": 1.0}
  direct, direct_dir = direct_api(folder, GROUPED, inputs, **options)
  engine = btr.build(GROUPED, inputs, str(tmp_path / "engine"),
                     beam_args=args, **options).info
  counts = direct.counts
  # 6 users of 40 events (over max_length 30), and the bad user key.
  assert counts.rows_rejected == 6 * 40 + 1
  assert counts.records_written == 300 - 6
  assert_same_dataset(direct, engine, direct_dir, tmp_path / "engine")
  return engine


def transform_build(cases, tmp_path, args, env, pool):
  folder, (schema, src, module) = prepared(cases, "transform",
                                           transform_job)
  pool.install(module)  # the workers' image has the user's code
  # (Without statistics and report, whose steps the other builds run:
  # TFT's graph is big enough.)
  direct, engine, direct_dir = cli_build_pair(
      folder, schema, [src], ["--no-statistics", "--no-report"], args, env,
      tmp_path / "engine")
  assert direct.transform.splits["train"].shards
  # The transformed shards too (integers from a vocabulary).
  assert_same_dataset(direct, engine, direct_dir, tmp_path / "engine",
                      exempt=TRANSFORM_GRAPH)
  return engine


def beam_sink_build(cases, tmp_path, args, env, tf):
  folder, (schema, src) = prepared(cases, "movies", movie_ratings)
  direct, engine, direct_dir = cli_build_pair(
      folder, schema, [src], ["--sink", "beam", "--num-shards", "2",
                              "--no-statistics", "--no-report"],
      args, env, tmp_path / "engine")
  assert engine.counts == direct.counts
  same_records_any_order(tf, str(direct_dir), str(tmp_path / "engine"),
                         ["train", "eval"])
  return engine


def killed_build(cases, tmp_path, args, env, running, pause, kill):
  """The million flights on the engine, `kill()` called `pause` seconds
  after `running()` says the job runs, the build still running: (exit
  code, stderr, output folder, the case's folder, base CLI arguments)."""
  folder, (schema, src) = prepared(cases, "flights", flights)
  base = ["build", "--schema", schema, "--max-bad-fraction", "1",
          "--input", src]
  out = tmp_path / "killed"
  proc = subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords"] + base +
      ["--output", str(out)] + args, cwd=folder, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True, env=env)
  deadline = time.time() + TIMEOUT
  try:
    while not running():
      assert proc.poll() is None and time.time() < deadline
      time.sleep(0.5)
    time.sleep(pause)  # into the reading and encoding
    assert proc.poll() is None, "the build ended before the kill"
  except AssertionError:
    proc.kill()
    raise AssertionError(proc.communicate(timeout=60)[1][-3000:]) from None
  kill()
  _, stderr = proc.communicate(timeout=TIMEOUT)
  return proc.returncode, stderr, out, folder, base


def finished_units(out) -> int:
  """Complete units in the output's .units/ (a build's, resume being
  the default)."""
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.core.unit_cache import UnitStore
  return len(list(UnitStore(str(out / ".units")).units()))


def resumed_build(folder, base, out, args, env, finished):
  """The killed build's command again: it reuses at least the
  `finished` units the killed one left, and publishes what the
  DirectRunner does, every file byte for byte but dataset.json's
  `inputs.units` (which says how many were reused; the determinism
  contract exempts `inputs`) and croissant.json's checksum of
  dataset.json."""
  cli(base + ["--output", str(out)] + args, folder, env=env)
  units = json.loads((out / "dataset.json").read_text())["inputs"]["units"]
  assert units["read"] >= units["reused"] >= finished >= 1, units
  assert_same_but_units(direct_cli(folder, base), out)


def assert_failed_cleanly(code, stderr, out, runner):
  """Exit code 1 (the pipeline failed: retry), the last line naming the
  failed job, nothing published."""
  last = stderr.strip().splitlines()[-1]
  assert code == 1, stderr[-4000:]
  assert last.startswith(f"error: the {runner} job ") and \
      "nothing was published" in last, last
  assert not (out / "_SUCCESS").exists()
  assert not (out / "dataset.json").exists()

"""Shipping code to workers, on Beam's portable path: PortableRunner
against Beam's own job service, with an EXTERNAL environment served by a
worker pool whose Python has this package installed from the built wheel
(nothing on PYTHONPATH, another working directory), as a worker image
has it. Outputs must equal the DirectRunner's byte for byte. (The builds
themselves on real Flink and Spark clusters: test_flink.py,
test_spark.py.)"""

import filecmp
import os
import re
import shutil
import subprocess
import sys

import apache_beam
import pytest

import beam_tfrecords as btr
from beam_tfrecords.testing.portable import LocalPortable, source_wheel

from tests.helpers.paths import ROOT

HERE = ROOT
TIMEOUT = 300  # a worker that cannot start makes a job hang, not fail


@pytest.fixture(scope="module")
def portable_pool(tmp_path_factory):
  """Servers on 127.0.0.1; the workers' Python has the package from the
  wheel only."""
  with LocalPortable(tmp_path_factory.mktemp("portable"),
                     source=HERE) as cluster:
    where = cluster.worker_imports("beam_tfrecords")
    assert where and where.startswith(cluster.purelib), where  # the wheel
    yield cluster


@pytest.fixture
def portable(portable_pool):
  return portable_pool.args


def _cli_build(schema, inputs, output, extra, cwd, env=None):
  # Some inputs hold bad rows on purpose: publish whatever is rejected.
  cmd = [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
         schema, "--output", output, "--max-bad-fraction", "1"] + [
             a for i in inputs for a in ("--input", i)] + extra
  run = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                       timeout=TIMEOUT, env=env)
  assert run.returncode == 0, run.stderr[-3000:]
  return btr.dataset_info(os.path.join(cwd, output))


def _same_files(a, b):
  info = btr.dataset_info(a)
  names = [s.file for split in info.splits.values()
           for s in split.shards]
  names += [e.file for e in info.errors.files]
  assert names
  for name in names:
    assert filecmp.cmp(os.path.join(a, name), os.path.join(b, name),
                       shallow=False), name


USER_MODULE = '''
import pyarrow as pa
import pyarrow.compute as pc


def clean(batch):
  """first + last -> name; months -> years (int64)."""
  name = pc.binary_join_element_wise(pc.cast(batch["first"], pa.string()),
                                     pc.cast(batch["last"], pa.string()), " ")
  years = pc.divide(pc.cast(batch["months"], pa.int64()), 12)
  return pa.RecordBatch.from_arrays([name, years], names=["name", "age"])
'''


def _user_job(tmp_path, module):
  (tmp_path / f"{module}.py").write_text(USER_MODULE)
  (tmp_path / "in.csv").write_text("first,last,months\n" + "".join(
      f"F{i},L{i},{i * 5 if i % 9 else ''}\n" for i in range(200)))
  (tmp_path / "s.yaml").write_text(
      "name: people\nfeatures:\n  name: {type: string, required: true}\n"
      "  age: {type: int64, required: true}\n")
  return ["s.yaml", "in.csv", f"{module}:clean"]


def test_a_user_module_the_workers_cannot_import_fails_fast_and_says_so(
    portable, tmp_path):
  """The launcher imports the module (it sits in the working directory);
  the workers run elsewhere and cannot. The job fails before reading a
  row, with the module's name and how to ship it, instead of hanging."""
  schema, src, fn = _user_job(tmp_path, "unshipped_features")
  cmd = [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
         "--input", src, "--output", "out", "--preprocess", fn] + portable
  run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True,
                       timeout=TIMEOUT)
  assert run.returncode == 2, run.stderr[-3000:]
  last = run.stderr.strip().splitlines()[-1]
  assert "the preprocess function unshipped_features:clean cannot be " \
         "loaded on this worker (ModuleNotFoundError: No module named " \
         "'unshipped_features')" in last, run.stderr[-3000:]
  assert "--setup_file ./setup.py or --extra_package" in last
  assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_a_user_module_installed_on_the_workers_builds_as_on_direct_runner(
    portable_pool, portable, tmp_path):
  """The container path: the user's module installed in the workers'
  Python (as `pip install` in an image FROM ours does)."""
  schema, src, fn = _user_job(tmp_path, "shipped_features")
  portable_pool.install(tmp_path / "shipped_features.py")
  direct = _cli_build(schema, [src], "direct", ["--preprocess", fn],
                      tmp_path)
  port = _cli_build(schema, [src], "portable", ["--preprocess", fn] +
                    portable, tmp_path)
  assert direct.counts.records_written == 177
  assert port.counts == direct.counts
  assert direct.options.preprocess == fn
  _same_files(str(tmp_path / "direct"), str(tmp_path / "portable"))


@pytest.fixture(scope="module")
def bare_pool(tmp_path_factory):
  """Workers whose Python has Beam and TensorFlow but not this package;
  each worker starts through boot.py, which installs what the job staged
  (as the SDK container's boot does)."""
  with LocalPortable(tmp_path_factory.mktemp("bare"), boot=True) as cluster:
    assert cluster.worker_imports("beam_tfrecords") is None
    assert cluster.worker_imports("apache_beam")
    yield cluster


def _user_package(tmp_path, module):
  """The user's own code as a package: their module and a setup.py."""
  pkg = tmp_path / "user_pkg"
  pkg.mkdir()
  (pkg / f"{module}.py").write_text(USER_MODULE)
  (pkg / "setup.py").write_text(
      "from setuptools import setup\n"
      f"setup(name='{module}', version='0.1', py_modules=['{module}'])\n")
  return pkg


# One way round: ours by --setup_file, theirs by --extra_package (the
# other way round ran the same two mechanisms; dropped for the suite's
# time).
@pytest.mark.parametrize("ours,theirs", [("setup_file", "extra_package")])
def test_setup_file_and_extra_package_ship_the_package_and_user_code(
    bare_pool, tmp_path, ours, theirs):
  """Nothing of ours or the user's is on the workers: the job ships both,
  one with --setup_file (Beam builds an sdist from setup.py), the other
  with --extra_package (a wheel), and the output equals the
  DirectRunner's."""
  module = f"user_{theirs}"
  schema, src, fn = _user_job(tmp_path, module)
  (tmp_path / f"{module}.py").unlink()  # the launcher imports the package
  pkg = _user_package(tmp_path, module)
  wheels = tmp_path / "wheels"
  flags = []
  for who, how in (("ours", ours), ("theirs", theirs)):
    source = HERE if who == "ours" else str(pkg)
    if how == "setup_file":
      flags.append(f"--setup_file={os.path.join(source, 'setup.py')}")
    elif who == "ours":  # the wheel the clusters' workers install
      flags.append(f"--extra_package={source_wheel(HERE)}")
    else:
      subprocess.run([sys.executable, "-m", "pip", "wheel", "-q",
                      "--no-deps", "-w", str(wheels / who), source],
                     check=True, timeout=TIMEOUT)
      wheel = next((wheels / who).glob("*.whl"))
      flags.append(f"--extra_package={wheel}")
  env = dict(os.environ, PYTHONPATH=str(pkg))
  direct = _cli_build(schema, [src], "direct", ["--preprocess", fn], tmp_path,
                      env=env)
  port = _cli_build(schema, [src], "portable",
                    ["--preprocess", fn] + bare_pool.args + flags, tmp_path,
                    env=env)
  assert port.counts == direct.counts
  assert direct.counts.records_written == 177
  _same_files(str(tmp_path / "direct"), str(tmp_path / "portable"))


def test_workers_with_another_version_fail_fast_with_both_versions(
    bare_pool, tmp_path):
  """A stale worker image: the workers get beam_tfrecords 0.0.1 (a wheel
  built from this source with another version number). The job fails at
  its first step with both versions and what to rebuild."""
  src = tmp_path / "src"
  shutil.copytree(HERE, src, ignore=shutil.ignore_patterns(
      ".*", "build", "*.egg-info", "out", "tests", "__pycache__"))
  version = src / "beam_tfrecords" / "core" / "version.py"
  version.write_text(re.sub(r'__version__ = "[^"]+"', '__version__ = "0.0.1"',
                            version.read_text()))
  subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                  "-w", str(tmp_path / "old"), str(src)], check=True,
                 timeout=TIMEOUT)
  wheel = next((tmp_path / "old").glob("*.whl"))
  (tmp_path / "in.csv").write_text("x\n1\n2\n")
  (tmp_path / "s.yaml").write_text("name: v\nfeatures:\n  x: {type: int64}\n")
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema", "s.yaml",
       "--input", "in.csv", "--output", "out",
       f"--extra_package={wheel}"] + bare_pool.args,
      cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
  assert run.returncode == 2, run.stderr[-3000:]
  last = run.stderr.strip().splitlines()[-1]
  python = ".".join(map(str, sys.version_info[:2]))
  beam = apache_beam.__version__
  assert (f"the workers run beam_tfrecords 0.0.1, Apache Beam {beam}, "
          f"Python {python} but the launcher runs beam_tfrecords "
          f"{btr.__version__}, Apache Beam {beam}, Python {python}") in last, \
      run.stderr[-3000:]
  assert "Rebuild the worker image" in last
  assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_the_wheel_runs_the_bundled_pipelines_from_anywhere(portable_pool,
                                                             tmp_path):
  """The workers' Python has only the wheel: the bundled pipeline finds
  its schema and sample data there (as in the worker image)."""
  run = subprocess.run(
      [portable_pool.python, "-m", "beam_tfrecords.pipelines.movie_ratings",
       "--output",
       str(tmp_path / "movies")], cwd=tmp_path, env=portable_pool.env,
      capture_output=True, text=True, timeout=TIMEOUT)
  assert run.returncode == 0, run.stderr[-3000:]
  info = btr.dataset_info(str(tmp_path / "movies"))
  assert info.schema["name"] == "movie_ratings"
  assert info.inputs.files[0].path.startswith(portable_pool.purelib)
  assert info.counts.records_written > 0


TRANSFORM_MODULE = '''
import tensorflow as tf
import tensorflow_transform as tft


def preprocessing_fn(inputs):
  return {"score_bucket": tft.bucketize(inputs["score"], num_buckets=4),
          "parity_id": tft.compute_and_apply_vocabulary(
              tf.strings.as_string(inputs["id"] % 3)),
          "id": tf.identity(inputs["id"])}
'''


def _transform_job(tmp_path, module):
  (tmp_path / f"{module}.py").write_text(TRANSFORM_MODULE)
  (tmp_path / "in.csv").write_text("id,score,split\n" + "".join(
      f"{i},{(i * 7919) % 1000 / 10},{'eval' if i % 4 else 'train'}\n"
      for i in range(400)))
  (tmp_path / "s.yaml").write_text(
      "name: ex\nsplits: {column: split, values: [train, eval]}\n"
      "features:\n  id: {type: int64, required: true}\n"
      "  score: {type: float, required: true}\n"
      f"transform: {{preprocessing_fn: '{module}:preprocessing_fn'}}\n")


def test_a_preprocessing_fn_the_workers_cannot_import_says_how_to_ship_it(
    portable, tmp_path):
  """TFT traces the user's preprocessing_fn again on a worker (to save
  the final graph), so its module must import there, as --preprocess
  code: a module only the launcher has fails the build, naming it and
  how to ship it."""
  _transform_job(tmp_path, "unshipped_transform")
  cmd = [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
         "s.yaml", "--input", "in.csv", "--output", "out"] + portable
  run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True,
                       timeout=TIMEOUT)
  assert run.returncode == 2, run.stderr[-3000:]
  last = run.stderr.strip().splitlines()[-1]
  assert "the preprocessing_fn unshipped_transform:preprocessing_fn " \
         "cannot be loaded on a worker (ModuleNotFoundError: No module " \
         "named 'unshipped_transform')" in last, run.stderr[-3000:]
  assert "--setup_file ./setup.py or --extra_package" in last
  assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_a_cache_on_the_portable_runner_reuses_every_unit(portable,
                                                          tmp_path):
  """--cache with the job's workers in other processes (issue 62): they
  keep the units, a rebuild's workers reuse every one, and the shards
  are a clean DirectRunner build's."""
  import json
  from tests.helpers.shard_size import SCHEMA, _csv
  schema = tmp_path / "schema.json"
  schema.write_text(json.dumps(SCHEMA))
  inputs = [_csv(tmp_path / f"in{k}.csv", 2000, offset=k * 2000)
            for k in range(3)]
  cache = ["--cache", str(tmp_path / "cache"), "--num-shards", "2"]
  first = _cli_build(str(schema), inputs, "first", cache + portable,
                     tmp_path)
  assert first.inputs.extra["units"] == {"read": 3, "reused": 0}
  again = _cli_build(str(schema), inputs, "again", cache + portable,
                     tmp_path)
  assert again.inputs.extra["units"] == {"read": 3, "reused": 3}
  _cli_build(str(schema), inputs, "direct", ["--no-resume", "--num-shards",
                                             "2"], tmp_path)
  _same_files(str(tmp_path / "direct"), str(tmp_path / "again"))
  assert again.counts == first.counts
  assert again.counts.records_written == 6000

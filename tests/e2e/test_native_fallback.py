"""A process without the native encoding core (a worker it was not shipped
to) encodes with the pure-Python path, says so in one line of the build's
log, and writes the same bytes."""

import glob
import hashlib
import os
import subprocess
import sys

import pytest

from beam_tfrecords import cli
from beam_tfrecords.core import native

from tests.helpers.paths import ROOT

# (schema, input): Examples, and SequenceExamples grouped from rows.
BUILDS = [("movie_ratings.yaml", "movie_ratings.csv"),
          ("user_events.yaml", "user_events.csv")]


def _args(out, schema, data):
  return ["build", "-q", "--schema", os.path.join(ROOT, "schemas", schema),
          "--input", os.path.join(ROOT, "pipelines", "data", data),
          "--output", str(out)]


def _shards(out):
  shards = sorted(glob.glob(os.path.join(out, "*.tfrecord.gz")))
  assert shards
  return {os.path.basename(p): hashlib.sha256(
      open(p, "rb").read()).hexdigest() for p in shards}


def _build(out, schema, data, env):
  done = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", *_args(out, schema, data)],
      env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  return done.stderr, _shards(out)


@pytest.mark.parametrize("schema, data", BUILDS)
def test_a_process_without_the_core_writes_the_same_bytes(tmp_path, schema,
                                                          data):
  if native.core() is None:
    pytest.skip("the native core is not built: nothing to compare with")
  # A package of that name that fails to import, ahead of the installed one.
  blocker = tmp_path / "blocker" / "beam_tfrecords_native"
  blocker.mkdir(parents=True)
  (blocker / "__init__.py").write_text(
      "raise ImportError('not shipped to this worker')\n")
  # With the core: this process's (a child process of its own would only
  # pay the imports again).
  assert cli.main(_args(tmp_path / "with", schema, data)) == cli.EXIT_OK
  with_core = _shards(tmp_path / "with")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  env.pop(native.ENV, None)
  env["PYTHONPATH"] = os.pathsep.join(
      [str(blocker.parent), ROOT, env.get("PYTHONPATH", "")])
  log, without = _build(tmp_path / "without", schema, data, env)
  assert without == with_core
  # One warning line, even with -q, naming what to do.
  lines = [line for line in log.splitlines() if native.MISSING in line]
  assert len(lines) == 1, log
  assert lines[0].startswith("WARNING ")

"""beam_tfrecords/sources/preprocess.py, on values: User code on the workers: a
function over each batch of input rows."""

import os
import sqlite3

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.sources.preprocess import Versions, check_versions

from tests.helpers.cli_builds import _build, _build_cli
from tests.helpers.preprocess import SCHEMA, _csv


def test_a_function_that_does_not_pickle_fails_before_the_run(tmp_path):
  db = sqlite3.connect(":memory:")  # a client made outside the function

  def locked(batch):
    db.execute("select 1")
    return batch

  with pytest.raises(InputError, match=(
      r"the preprocess function tests\.unit\.sources\.test_preprocess:"
      r"test_a_function_that_does_"
      r"not_pickle_fails_before_the_run.<locals>.locked cannot be pickled "
      r"to ship it to the workers \(TypeError: cannot pickle "
      r"'sqlite3.Connection' object\)\. Define it at the top level of a module")):
    btr.build(SCHEMA, _csv(tmp_path), str(tmp_path / "out"),
              preprocess=locked)
  assert not os.path.exists(tmp_path / "out")


def test_workers_with_other_versions_are_refused_with_both():
  check_versions(Versions())  # the same: fine
  with pytest.raises(InputError) as e:
    check_versions(Versions(beam_tfrecords="0.0.1", apache_beam="2.60.0",
                            python="3.9"))
  here = Versions()
  assert str(e.value).startswith(
      f"the workers run {here} but the launcher runs beam_tfrecords 0.0.1, "
      "Apache Beam 2.60.0, Python 3.9; a stale worker container")


@pytest.mark.parametrize("spec,message", [
    ("../../etc/passwd:x", "'../../etc/passwd' is not a Python module name; "
     "give MODULE:FUNCTION with dotted names"),
    ("mod:not-a-name", "'not-a-name' is not a Python function name"),
    ("nocolon", "--preprocess takes MODULE:FUNCTION (e.g. "
     "mypackage.features:clean), got 'nocolon'"),
], ids=["path", "function", "no_colon"])
def test_a_preprocess_spec_that_is_no_module_is_refused(tmp_path, capsys,
                                                        spec, message):
  assert _build(tmp_path, "--preprocess", spec) == cli.EXIT_INPUT
  assert message in capsys.readouterr().err


# --- --preprocess specs that name no module --------------------------------

@pytest.mark.parametrize("spec,message", [
    ("../../etc/passwd:x",
     "--preprocess ../../etc/passwd:x: '../../etc/passwd' is not a Python "
     "module name; give MODULE:FUNCTION with dotted names, as you would "
     "import them (e.g. mypackage.features:clean), not a file path"),
    ("my_pkg/features.py:clean",
     "--preprocess my_pkg/features.py:clean: 'my_pkg/features.py' is not a "
     "Python module name; give MODULE:FUNCTION with dotted names, as you "
     "would import them (e.g. mypackage.features:clean), not a file path; "
     "for the file my_pkg/features.py give my_pkg.features:clean (modules "
     "under the folder the command runs in import)"),
    ("nocolon", "--preprocess takes MODULE:FUNCTION (e.g. "
     "mypackage.features:clean), got 'nocolon': no colon"),
    (":fn", "--preprocess takes MODULE:FUNCTION (e.g. "
     "mypackage.features:clean), got ':fn': the module before the colon is "
     "missing"),
    ("mod:", "--preprocess takes MODULE:FUNCTION (e.g. "
     "mypackage.features:clean), got 'mod:': the function after the colon "
     "is missing"),
    ("mod:not-an-identifier",
     "--preprocess mod:not-an-identifier: 'not-an-identifier' is not a "
     "Python function name; give MODULE:FUNCTION with dotted names, as you "
     "would import them (e.g. mypackage.features:clean), not a file path"),
    ("features.py:clean",
     "--preprocess features.py:clean: cannot import 'features.py' (No module "
     "named 'features'); run from the folder that holds it, or install it; "
     "features.py looks like a file name: give the module, features:clean"),
], ids=["path", "file_path", "no_colon", "no_module", "no_function",
        "bad_function", "py_suffix"])
def test_a_malformed_preprocess_spec_is_a_clean_error(tmp_path, capsys,
                                                      monkeypatch, spec,
                                                      message):
  monkeypatch.chdir(tmp_path)  # no module named features here
  assert _build_cli(tmp_path, "id\n1\n", "--preprocess", spec) == \
      cli.EXIT_INPUT
  assert capsys.readouterr().err == f"error: {message}\n"


def test_a_preprocess_spec_error_is_an_input_error():
  from beam_tfrecords.sources.preprocess import resolve_preprocess
  with pytest.raises(InputError, match="is not a Python module name"):
    resolve_preprocess("../../etc/passwd:x")

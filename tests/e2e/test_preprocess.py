"""--preprocess: user code over each batch of input rows, on the workers.

Values in, values out, read back with TensorFlow; every way the user's
function can be wrong fails with the function's name and what to do.
(tests/cluster/test_portable.py runs it on workers that cannot import it, and on
workers it is shipped to.)"""

import functools
import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.errors import InputError

from tests.helpers.records import tf_parse, tf_records
from tests.helpers.preprocess import SCHEMA, _csv


def full_name(batch):
  """CSV cells arrive as binary; join two of them, years from months."""
  name = pc.binary_join_element_wise(pc.cast(batch["first"], pa.string()),
                                     pc.cast(batch["last"], pa.string()), " ")
  years = pc.divide(pc.cast(batch["months"], pa.int64()), 12)
  return pa.RecordBatch.from_arrays([name, years], names=["name", "age"])


def test_values_go_through_the_function_and_come_back_from_tensorflow(
    tmp_path, tf):
  out = str(tmp_path / "out")
  result = btr.build(SCHEMA, _csv(tmp_path), out, preprocess=full_name,
                     max_bad_fraction=1.0)
  rows = tf_parse(tf, tf_records(tf, out), btr.feature_spec(out))
  assert [(r["name"], r["age"], r["city"]) for r in rows] == [
      (b"Ada Lovelace", 36, b"?"), (b"Alan Turing", 41, b"?")]
  # The row whose months are empty: age null -> rejected, as any row;
  # errors/ shows the row as it is in the input.
  errors = list(btr.open(out).errors())
  assert [(e["row"], e["raw"], e["reason"]) for e in errors] == [
      (3, {"first": "Grace", "last": "Hopper", "months": None},
       'In feature "age": required value is missing (column "age" has no '
       'value)')]
  assert result.info.options.preprocess == \
      f"{__name__}:full_name"


def test_the_function_gets_every_column_typed_as_the_format_reads_it(
    tmp_path):
  def record(batch):
    """name: what the function was given, as text (it runs on a copy)."""
    seen = ",".join(f"{n}:{t}" for n, t in zip(batch.schema.names,
                                               batch.schema.types))
    return pa.RecordBatch.from_arrays(
        [pa.array([seen] * batch.num_rows),
         pc.cast(batch["v"], pa.int64())], names=["name", "age"])

  pq.write_table(pa.table({"n": ["a", "b"], "v": [1.0, 2.0],
                           "unused": [b"x", b"y"]}), tmp_path / "in.parquet")
  out = str(tmp_path / "pq")
  btr.build(SCHEMA, str(tmp_path / "in.parquet"), out, preprocess=record)
  assert [(r["name"], r["age"]) for r in btr.iter_records(out)] == [
      ("n:string,v:double,unused:binary", 1),
      ("n:string,v:double,unused:binary", 2)]
  (tmp_path / "in.jsonl").write_text(
      '{"n": "a", "v": 1, "extra": true}\n{"n": "b", "v": 2}\n')
  out = str(tmp_path / "js")
  btr.build(SCHEMA, str(tmp_path / "in.jsonl"), out, preprocess=record)
  assert [r["name"] for r in btr.iter_records(out)] == [
      "n:string,v:int64,extra:bool"] * 2


def test_a_json_column_of_mixed_types_passes_around_the_function(tmp_path):
  """Arrow cannot hold it, so the function does not see it; the schema
  judges it value by value, as without a function."""
  (tmp_path / "in.jsonl").write_text(
      '{"n": "a", "age": 3}\n{"n": "b", "age": "x"}\n')

  def rename(batch):
    assert "age" not in batch.schema.names
    return pa.RecordBatch.from_arrays([batch["n"]], names=["name"])

  out = str(tmp_path / "out")
  btr.build(SCHEMA, str(tmp_path / "in.jsonl"), out, preprocess=rename,
            max_bad_fraction=1.0)
  assert [(r["name"], r["age"]) for r in btr.iter_records(out)] == [("a", 3)]
  assert [e["row"] for e in btr.open(out).errors()] == [2]


@pytest.mark.parametrize("fn,message", [
    (lambda b: b.slice(0, 1),
     r"returned 1 rows for the 3 rows 1-3 of .*in\.csv; it must keep every "
     r"row, in order"),
    (lambda b: pa.RecordBatch.from_arrays([b["first"]], names=["name"]),
     r"returned no column\(s\) \['age'\] for rows 1-3 of .*in\.csv, which "
     r"the schema reads \(it returned \['name'\]\)"),
    (lambda b: b.to_pydict(),
     r"returned dict for rows 1-3 of .*in\.csv; it must return a "
     r"pyarrow\.RecordBatch"),
    (lambda b: 1 / 0,
     r"failed on rows 1-3 of .*in\.csv: ZeroDivisionError: division by "
     r"zero; nothing was published"),
])
def test_a_wrong_function_fails_the_build_naming_it_and_the_rows(
    tmp_path, fn, message):
  with pytest.raises(InputError, match="the preprocess function "
                     r"tests\.e2e\.test_preprocess:.*<lambda> " + message):
    btr.build(SCHEMA, _csv(tmp_path), str(tmp_path / "out"), preprocess=fn)
  assert not os.path.exists(tmp_path / "out" / "_SUCCESS")


def test_a_table_may_be_returned(tmp_path):
  out = str(tmp_path / "out")
  btr.build(SCHEMA, _csv(tmp_path), out,
            preprocess=lambda b: pa.Table.from_batches([full_name(b)]),
                max_bad_fraction=1.0)
  assert len(list(btr.iter_records(out))) == 2


def _module(tmp_path, body):
  (tmp_path / "my_features.py").write_text(
      "import pyarrow as pa\nimport pyarrow.compute as pc\n\n" + body)


def _cli(tmp_path, *extra):
  (tmp_path / "s.yaml").write_text(json.dumps(SCHEMA))
  if not (tmp_path / "in.csv").exists():
    _csv(tmp_path)
  return subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema", "s.yaml",
       "--input", "in.csv", "--output", "out", "--max-bad-fraction", "1",
       *extra], cwd=tmp_path,
      capture_output=True, text=True, timeout=300,
      env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})


FN = '''
def clean(batch):
  name = pc.binary_join_element_wise(pc.cast(batch["first"], pa.string()),
                                     pc.cast(batch["last"], pa.string()), "{}")
  years = pc.divide(pc.cast(batch["months"], pa.int64()), 12)
  return pa.RecordBatch.from_arrays([name, years], names=["name", "age"])
'''


@pytest.mark.slow
def test_cli_imports_module_function_from_the_working_directory_and_a_changed_function_rebuilds(
    tmp_path):
  _module(tmp_path, FN.format(" "))
  first = _cli(tmp_path, "--preprocess", "my_features:clean")
  assert first.returncode == 0, first.stderr[-2000:]
  assert [r["name"] for r in btr.iter_records(str(tmp_path / "out"))] == [
      "Ada Lovelace", "Alan Turing"]
  again = _cli(tmp_path, "--preprocess", "my_features:clean")
  assert again.returncode == 0 and "is up to date" in again.stdout
  _module(tmp_path, FN.format("_"))  # the function's source changed
  changed = _cli(tmp_path, "--preprocess", "my_features:clean", "--overwrite")
  assert changed.returncode == 0 and "Built people" in changed.stdout
  assert [r["name"] for r in btr.iter_records(str(tmp_path / "out"))] == [
      "Ada_Lovelace", "Alan_Turing"]


@pytest.mark.slow
@pytest.mark.parametrize("spec,message", [
    ("my_features", "--preprocess takes MODULE:FUNCTION (e.g. "
                    "mypackage.features:clean), got 'my_features'"),
    ("no_such_module:clean", "--preprocess no_such_module:clean: cannot "
                             "import 'no_such_module' (No module named "
                             "'no_such_module'); run from the folder that "
                             "holds it, or install it"),
    ("my_features:nope", "--preprocess my_features:nope: my_features has "
                         "no 'nope'"),
    ("my_features:VALUE", "the preprocess my_features:VALUE is a int, not a "
                          "function"),
])
def test_cli_names_a_preprocess_it_cannot_use(tmp_path, spec, message,
                                             monkeypatch, capsys):
  """Through the command's entry point in this process (the import from
  the working folder in a fresh process: the test above)."""
  _module(tmp_path, FN.format(" ") + "\nVALUE = 3\n")
  (tmp_path / "s.yaml").write_text(json.dumps(SCHEMA))
  _csv(tmp_path)
  monkeypatch.chdir(tmp_path)
  monkeypatch.delitem(sys.modules, "my_features", raising=False)
  from beam_tfrecords import cli  # pylint: disable=import-outside-toplevel
  try:
    code = cli.main(["build", "--schema", "s.yaml", "--input", "in.csv",
                     "--output", "out", "--max-bad-fraction", "1",
                     "--preprocess", spec])
  except SystemExit as e:
    code = e.code
  err = capsys.readouterr().err
  sys.modules.pop("my_features", None)
  assert code == 2, err[-2000:]
  assert message in err.strip().splitlines()[-1]
  assert not (tmp_path / "out").exists()


def _pick(column):
  def pick(batch):
    return pa.RecordBatch.from_arrays([batch[column]], names=["name"])
  return pick


class Picker:
  def __init__(self, column):
    self.column = column

  def pick(self, batch):
    return pa.RecordBatch.from_arrays([batch[self.column]], names=["name"])


NAME_ONLY = {"name": "p", "features": {"name": {"type": "string",
                                                "required": True}}}


@pytest.mark.parametrize("make", [
    _pick,                                    # closures of one factory
    lambda c: Picker(c).pick,                 # bound methods
    lambda c: functools.partial(_take, c),    # partials
])
def test_the_same_code_with_other_values_is_not_up_to_date(tmp_path, make):
  (tmp_path / "in.csv").write_text("a,b\nx,y\n")
  out = str(tmp_path / "out")
  btr.build(NAME_ONLY, str(tmp_path / "in.csv"), out, preprocess=make("a"))
  assert btr.build(NAME_ONLY, str(tmp_path / "in.csv"), out,
                   preprocess=make("a")).up_to_date
  with pytest.raises(InputError, match="already holds a finished dataset"):
    btr.build(NAME_ONLY, str(tmp_path / "in.csv"), out, preprocess=make("b"))
  rebuilt = btr.build(NAME_ONLY, str(tmp_path / "in.csv"), out,
                      preprocess=make("b"), overwrite=True)
  assert not rebuilt.up_to_date
  assert [r["name"] for r in btr.iter_records(out)] == ["y"]


def _take(column, batch):
  return pa.RecordBatch.from_arrays([batch[column]], names=["name"])


def test_a_partial_is_named_by_its_function(tmp_path):
  (tmp_path / "in.csv").write_text("a\nx\n")
  result = btr.build(NAME_ONLY, str(tmp_path / "in.csv"),
                     str(tmp_path / "out"),
                     preprocess=functools.partial(_take, "a"))
  assert result.info.options.preprocess == \
      "functools.partial(tests.e2e.test_preprocess:_take)"


MAIN_SCRIPT = '''
import pyarrow as pa
from beam_tfrecords.sources.preprocess import resolve_preprocess

class Pick:
  def __init__(self, column):
    self.column = column
  def __call__(self, batch):
    return pa.RecordBatch.from_arrays([batch[self.column]], names=["name"])

def closure(column):
  return lambda batch: batch.select([column])

print(resolve_preprocess(Pick("a")).digest,
      resolve_preprocess(closure("a")).digest)
'''


@pytest.mark.slow
def test_functions_defined_in_main_have_the_same_key_in_every_process(
    tmp_path):
  """cloudpickle gives classes defined in __main__ a random id; the build
  key must not see it, or a scheduled build would never be up to date."""
  (tmp_path / "job.py").write_text(MAIN_SCRIPT)
  digests = [subprocess.run([sys.executable, "job.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120,
                            check=True).stdout.split() for _ in range(2)]
  assert digests[0] == digests[1] and len(digests[0]) == 2


def test_json_keys_missing_from_a_batch_are_named_in_the_failure(tmp_path):
  # A key some rows of the batch lack: null there (the row is rejected).
  (tmp_path / "in.jsonl").write_text(
      '{"first": "a", "last": "b", "months": 12}\n{"first": "c"}\n')
  out = str(tmp_path / "a")
  btr.build(SCHEMA, str(tmp_path / "in.jsonl"), out, preprocess=full_name,
            max_bad_fraction=1.0)
  assert [r["name"] for r in btr.iter_records(out)] == ["a b"]
  assert [e["raw"] for e in btr.open(out).errors()] == [
      {"first": "c", "last": None, "months": None}]
  # A key no row of the batch has: not a column of it.
  (tmp_path / "only.jsonl").write_text('{"first": "c"}\n')
  with pytest.raises(InputError, match=(
      r"\(the batch has the columns \['first'\]; with JSON input a key "
      r"that no row of a batch has is not a column of that batch")):
    btr.build(SCHEMA, str(tmp_path / "only.jsonl"), str(tmp_path / "b"),
              preprocess=full_name, max_bad_fraction=1.0)


def test_a_batch_of_unreadable_rows_only_does_not_reach_the_function(
    tmp_path):
  (tmp_path / "a.jsonl").write_text('{"n": "x", "v": 1}\n')
  (tmp_path / "b.jsonl").write_text('{"n": "z"\n')

  def rename(batch):
    return pa.RecordBatch.from_arrays(
        [batch["n"], batch["v"]], names=["name", "age"])

  out = str(tmp_path / "out")
  result = btr.build(SCHEMA, [str(tmp_path / "a.jsonl"),
                              str(tmp_path / "b.jsonl")], out,
                     preprocess=rename, max_bad_fraction=1.0)
  assert [r["name"] for r in btr.iter_records(out)] == ["x"]
  assert result.rows_rejected == 1
  assert [e["source"].endswith("b.jsonl") for e in btr.open(out).errors()] \
      == [True]


def test_a_column_returned_twice_is_refused(tmp_path):
  def twice(batch):
    name = pc.cast(batch["first"], pa.string())
    return pa.RecordBatch.from_arrays([name, name], names=["name", "name"])

  with pytest.raises(InputError, match=(
      r"returned the column\(s\) \['name'\] more than once for rows 1-3")):
    btr.build(SCHEMA, _csv(tmp_path), str(tmp_path / "out"),
              preprocess=twice)

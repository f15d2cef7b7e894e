"""Nothing silently ignored: arguments, rejected rows, interrupts, progress,
and the messages that were wrong or missing."""

import glob
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.core.errors import InputError, is_disk_full

SCHEMA_YAML = "name: t\nfeatures:\n  id: {type: int64}\n  score: {type: float}\n"


def _files(tmp_path, rows, schema=SCHEMA_YAML):
  (tmp_path / "s.yaml").write_text(schema)
  (tmp_path / "in.csv").write_text("id,score\n" + "".join(
      f"{i},{s}\n" for i, s in rows))
  return str(tmp_path / "s.yaml"), str(tmp_path / "in.csv")


def _build(tmp_path, *extra, rows=((1, 0.5), (2, 0.7))):
  schema, data = _files(tmp_path, rows)
  return cli.main(["build", "--schema", schema, "--input", data, "--output",
                   str(tmp_path / "out"), *extra])


# --- 1. No argument is silently discarded --------------------------------

@pytest.mark.parametrize("extra,message", [
    (["--num_shards", "4"], "unknown argument --num_shards; did you mean "
     "--num-shards?"),
    (["--overwite"], "unknown argument --overwite; did you mean "
     "--overwrite?"),
    (["--max_bad_rows", "0"], "unknown argument --max_bad_rows; did you "
     "mean --max-bad-rows?"),
    (["--direct_num_worker", "2"], "did you mean --direct_num_workers?"),
    (["--no_such_thing=1"], "unknown argument --no_such_thing=1 Neither "),
    # An unquoted glob: the shell expanded it to more files.
    (["b.csv", "c.csv"], "unexpected argument(s) b.csv c.csv: --input takes "
     "one file or glob: quote a glob so that the shell does not expand it "
     "(--input 'data/*.csv'), or repeat --input for each file"),
    (["--runner", "Nonexistent"], "--runner Nonexistent: Beam has no runner "
     "of that name. Known runners: DataflowRunner,"),
    (["--runner", "DirectRuner"], "did you mean DirectRunner?"),
], ids=["underscore", "typo", "threshold_flag", "beam_typo", "with_value",
        "unquoted_glob", "unknown_runner", "runner_typo"])
def test_unknown_arguments_are_refused(tmp_path, capsys, extra, message):
  assert _build(tmp_path, *extra) == cli.EXIT_INPUT
  err = capsys.readouterr().err
  assert message in err, err
  assert not os.path.exists(tmp_path / "out" / "_SUCCESS")


def test_beam_options_and_repeated_inputs_still_work(tmp_path, capsys):
  schema, data = _files(tmp_path, [(1, 0.5)])
  other = tmp_path / "in2.csv"
  other.write_text("id,score\n2,0.25\n")
  assert cli.main(["build", "--schema", schema, "--input", data, "--input",
                   str(other), "--output", str(tmp_path / "out"),
                   "--direct_num_workers=1", "--runner", "DirectRunner",
                   "--job_name", "trust-test"]) == 0
  assert sorted(r["id"] for r in btr.iter_records(str(tmp_path / "out"))) \
      == [1, 2]


def test_build_api_refuses_unparsed_beam_args(tmp_path):
  schema, data = _files(tmp_path, [(1, 0.5)])
  with pytest.raises(InputError, match="unknown argument --numshards"):
    btr.build(schema, data, str(tmp_path / "out"), beam_args=["--numshards",
                                                              "2"])


# --- 2. Strict by default about rejected rows ---------------------------

def _bad_rows(n_good, n_bad):
  return [(i, 0.5) for i in range(n_good)] + [(1000 + i, "x")
                                              for i in range(n_bad)]


@pytest.mark.parametrize("good,bad", [(0, 4), (1, 49), (3, 1)],
                         ids=["all", "98_percent", "25_percent"])
def test_rejected_rows_over_one_percent_fail_by_default(tmp_path, capsys,
                                                        good, bad):
  assert _build(tmp_path, rows=_bad_rows(good, bad)) == cli.EXIT_BAD_ROWS
  err = capsys.readouterr().err
  total = good + bad
  assert f"{bad:,} of {total:,} rows ({bad / total:.2%}) were rejected: " \
      "more than --max-bad-fraction 0.01 (the default) allow" in err
  assert "; the dataset was not published" in err
  assert f"  {bad:,} rows: In feature \"score\": could not parse … as " \
      "float\n    e.g. " in err
  assert "row " + str(good + 1) + ": In feature \"score\": could not parse " \
      "'x' as float" in err
  assert not os.path.exists(tmp_path / "out" / "_SUCCESS")
  assert not glob.glob(str(tmp_path / "out" / "*.tfrecord.gz"))


def test_one_percent_or_less_publishes_and_reports_reasons(tmp_path, capsys):
  assert _build(tmp_path, rows=_bad_rows(99, 1)) == 0
  out = capsys.readouterr().out
  assert "rejected: 1 (see" in out
  assert "  top reasons for rejected rows:\n    1 rows: In feature " \
      "\"score\": could not parse … as float\n      e.g. " in out
  assert "row 100: In feature \"score\": could not parse 'x' as float" in out
  assert os.path.exists(tmp_path / "out" / "_SUCCESS")


def test_an_explicit_threshold_replaces_the_default(tmp_path, capsys):
  assert _build(tmp_path, "--max-bad-fraction", "1",
                rows=_bad_rows(1, 3)) == 0
  assert btr.dataset_info(
      str(tmp_path / "out")).counts.rows_rejected == 3
  # The schema key does the same.
  schema = SCHEMA_YAML + "max_bad_rows: 5\n"
  schema_path, data = _files(tmp_path, _bad_rows(1, 3), schema)
  assert cli.main(["build", "--schema", schema_path, "--input", data,
                   "--output", str(tmp_path / "out2")]) == 0


SPLIT_SCHEMA = textwrap.dedent("""\
    name: t
    features:
      id: {type: int64}
      score: {type: float}
      part: {type: string}
    splits:
      column: part
      values: [train, eval]
    """)


def test_a_split_left_empty_by_rejections_fails_by_default(tmp_path, capsys):
  rows = [f"{i},0.5,train\n" for i in range(300)] + ["999,oops,eval\n"]
  (tmp_path / "s.yaml").write_text(SPLIT_SCHEMA)
  (tmp_path / "in.csv").write_text("id,score,part\n" + "".join(rows))
  args = ["build", "--schema", str(tmp_path / "s.yaml"), "--input",
          str(tmp_path / "in.csv"), "--output", str(tmp_path / "out")]
  # 1 of 301 rows (0.33%) is under the 1% default, but it was eval's only.
  assert cli.main(args) == cli.EXIT_BAD_ROWS
  err = capsys.readouterr().err
  assert "1 of 301 rows (0.33%) were rejected: the split eval got no " \
      "records; the dataset was not published" in err
  assert cli.main(args + ["--max-bad-rows", "1"]) == 0
  info = btr.dataset_info(str(tmp_path / "out"))
  assert info.splits["eval"].num_records == 0
  assert info.splits["train"].num_records == 300


# --- 5. Interrupts ---------------------------------------------------------

SLOW_MODULE = textwrap.dedent("""\
    import time

    def slow(batch):
      time.sleep(120)
      return batch
    """)


def test_ctrl_c_prints_one_line_exits_130_and_removes_staging(tmp_path):
  schema, data = _files(tmp_path, [(1, 0.5), (2, 0.25)])
  (tmp_path / "slowmod.py").write_text(SLOW_MODULE)
  out = tmp_path / "out"
  env = dict(os.environ, PYTHONPATH=str(tmp_path))
  proc = subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
       "--input", data, "--output", str(out), "--preprocess", "slowmod:slow"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
      cwd=str(tmp_path), start_new_session=True)
  deadline = time.monotonic() + 120
  # The staging folder appears when the pipeline starts.
  while not glob.glob(str(out / ".staging-*")):
    assert proc.poll() is None, proc.communicate()
    assert time.monotonic() < deadline
    time.sleep(0.1)
  time.sleep(2)  # well inside the sleeping step
  os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C does
  stdout, stderr = proc.communicate(timeout=60)
  assert proc.returncode == 130, stderr
  assert stderr == ("interrupted: nothing was published (this build's "
                    "staging folder was removed)\n")
  assert stdout == ""
  # As it was: the folder this build made for itself (and its lock) is gone.
  assert not out.exists()


# --- 6. Progress -----------------------------------------------------------

def test_progress_is_logged_where_stderr_is_not_a_terminal(
    tmp_path, caplog, monkeypatch):
  from beam_tfrecords.runners import progress
  monkeypatch.setattr(progress, "LOG_SECONDS", 0.05)
  schema, data = _files(tmp_path, _bad_rows(200, 1))
  with caplog.at_level(logging.WARNING, logger="beam_tfrecords.runners.progress"):
    btr.build(schema, data, str(tmp_path / "out"), progress=True)
  lines = [r.getMessage() for r in caplog.records
           if r.name == "beam_tfrecords.runners.progress"]
  size = progress.human_bytes(os.path.getsize(data))
  assert lines[-1] == (f"progress at the end: {size} of {size} read "
                       "(100%), 201 rows (" + lines[-1].split(" rows (")[1]
                       .split(")")[0] + "), 200 records, 1 rejected")
  assert "/s" in lines[-1]
  assert os.environ.get(progress.ENV_DIR) is None


def test_progress_draws_a_live_line_on_a_terminal(tmp_path):
  import pty
  schema, data = _files(tmp_path, [(i, 0.5) for i in range(50)])
  master, slave = pty.openpty()
  proc = subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
       "--input", data, "--output", str(tmp_path / "out")],
      stdout=subprocess.PIPE, stderr=slave, cwd=str(tmp_path))
  os.close(slave)
  shown = b""
  while True:
    try:
      chunk = os.read(master, 4096)
    except OSError:  # the child closed the terminal
      break
    if not chunk:
      break
    shown += chunk
  proc.wait(timeout=120)
  os.close(master)
  assert proc.returncode == 0
  text = shown.decode("utf-8", "replace")
  assert "building" in text and "rows (" in text and "records" in text
  # --quiet: nothing on the terminal.
  master, slave = pty.openpty()
  proc = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
       "--input", data, "--output", str(tmp_path / "out2"), "--quiet"],
      stdout=subprocess.PIPE, stderr=slave, cwd=str(tmp_path), timeout=120)
  os.close(slave)
  os.set_blocking(master, False)
  try:
    quiet = os.read(master, 4096)
  except (BlockingIOError, OSError):
    quiet = b""
  os.close(master)
  assert proc.returncode == 0 and b"building" not in quiet


def test_progress_counts_every_worker_file(tmp_path, monkeypatch):
  from beam_tfrecords.runners import progress
  monkeypatch.setenv(progress.ENV_DIR, str(tmp_path))
  t = progress.tally()
  t.add(rows=10, bytes=100)
  t.add(records=7, rejected=3)
  t.flush()
  (tmp_path / "other.json").write_text(json.dumps(
      {"rows": 5, "bytes": 50, "records": 5, "rejected": 0}))
  counts = progress.LocalProgress(str(tmp_path), 300).counts()
  assert counts == {"rows": 15, "bytes": 150, "records": 12, "rejected": 3}
  assert progress.progress_text(counts, 300, 3.0) == (
      "150 B of 300 B read (50%), 15 rows (5/s), 12 records, 3 rejected, "
      "ETA 0:03")


# --- 7. Messages -------------------------------------------------------------

def test_an_output_that_is_a_file_is_refused(tmp_path, capsys):
  schema, data = _files(tmp_path, [(1, 0.5)])
  assert cli.main(["build", "--schema", schema, "--input", data,
                   "--output", data]) == cli.EXIT_INPUT
  assert f"error: output {data} is a file; a dataset is a folder" in \
      capsys.readouterr().err


def test_vocabulary_auto_on_a_table_names_the_schema_key(tmp_path, capsys):
  schema = ("name: t\nfeatures:\n  id: {type: int64}\n"
            "  label: {type: string, vocabulary: auto}\n")
  (tmp_path / "s.yaml").write_text(schema)
  (tmp_path / "in.csv").write_text("id,label\n1,cat\n")
  assert cli.main(["build", "--schema", str(tmp_path / "s.yaml"), "--input",
                   str(tmp_path / "in.csv"), "--output",
                   str(tmp_path / "out")]) == cli.EXIT_INPUT
  assert (f"error: {tmp_path / 's.yaml'}: features.label.vocabulary: auto "
          "takes the class folder names of an image folder (--format "
          "images, column label), but this build reads csv input; list the "
          "values in index order instead: vocabulary: [cat, dog, ...]"
          ) in capsys.readouterr().err


def test_a_full_disk_is_a_clean_error_and_removes_staging(tmp_path, capsys,
                                                           monkeypatch):
  from apache_beam.io.filesystems import FileSystems
  real_create = FileSystems.create

  def full(path, *args, **kwargs):
    if path.endswith("schema.pbtxt"):
      raise OSError(28, "No space left on device")
    return real_create(path, *args, **kwargs)
  monkeypatch.setattr(FileSystems, "create", full)
  assert _build(tmp_path) == cli.EXIT_INPUT
  err = capsys.readouterr().err
  assert f"error: cannot write the dataset to {tmp_path / 'out'}: no space " \
      "left on the device (the build's staging folder was removed; " \
      "nothing was published; a finished dataset that was there is as it " \
      "was); free space there or write the dataset elsewhere" in err
  assert not os.path.exists(tmp_path / "out") or \
      os.listdir(tmp_path / "out") == []
  # On other runners a worker's full disk arrives as traceback text.
  assert is_disk_full(RuntimeError("... OSError: [Errno 28] No space left"))
  assert not is_disk_full(RuntimeError("[Errno 2] No such file"))


def test_inspect_shows_floats_as_float32_prints_them(tmp_path, capsys):
  assert _build(tmp_path, rows=[(1, 0.24)]) == 0
  capsys.readouterr()
  assert cli.main(["inspect", str(tmp_path / "out")]) == 0
  assert 'record 0: {"id": 1, "score": 0.24}' in capsys.readouterr().out


# --- 8. A fast command line --------------------------------------------------

@pytest.mark.parametrize("argv", [["--help"], ["build", "--help"],
                                  ["inspect", "--help"]],
                         ids=["help", "build_help", "inspect_help"])
def test_help_imports_neither_beam_nor_tensorflow(argv):
  code = textwrap.dedent(f"""\
      import sys
      from beam_tfrecords.cli import main
      try:
        main({argv!r})
      except SystemExit:
        pass
      heavy = [m for m in ("apache_beam", "tensorflow", "pyarrow")
               if m in sys.modules]
      print("heavy:", heavy)
      """)
  run = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, timeout=60)
  assert run.returncode == 0, run.stderr
  assert run.stdout.splitlines()[-1] == "heavy: []"


# --- 4. One value, one meaning across formats ------------------------------

ONE_VALUE_SCHEMA = {"name": "one", "features": {
    "id": {"type": "int64", "required": True},
    "n": {"type": "int64"},
    "ns": {"type": "int64", "shape": [-1], "separator": "|"}}}


def _three_formats(tmp_path, rows):
  """The same rows as CSV text (as pandas writes an int column with
  nulls), JSON lines numbers and a Parquet float64 column."""
  import pyarrow as pa
  import pyarrow.parquet as pq

  def text(v):
    return "" if v is None else repr(float(v))
  (tmp_path / "in.csv").write_text("id,n,ns\n" + "".join(
      f"{i},{text(n)},{'|'.join(text(v) for v in ns)}\n"
      for i, n, ns in rows))
  (tmp_path / "in.jsonl").write_text("".join(
      json.dumps({"id": i, "n": None if n is None else float(n),
                  "ns": [float(v) for v in ns]}) + "\n"
      for i, n, ns in rows))
  pq.write_table(pa.table({
      "id": pa.array([i for i, _, _ in rows], pa.int64()),
      "n": pa.array([n for _, n, _ in rows], pa.float64()),
      "ns": pa.array([[float(v) for v in ns] for _, _, ns in rows],
                     pa.list_(pa.float64()))}), str(tmp_path / "in.parquet"))
  return [str(tmp_path / f"in.{ext}") for ext in ("csv", "jsonl", "parquet")]


def test_whole_decimals_are_int64_values_in_every_format(tmp_path, tf):
  from conftest import tf_records
  # (An empty CSV cell is missing, a JSON [] an empty list: not compared.)
  rows = [(1, 1, [1, 2]), (2, None, [5]), (3, -3, [0, 2**52 + 1]),
          (4, 0, [7])]
  outs = []
  for src in _three_formats(tmp_path, rows):
    out = str(tmp_path / ("out-" + src.rsplit(".", 1)[1]))
    btr.build(ONE_VALUE_SCHEMA, src, out)
    outs.append(tf_records(tf, out))
  assert outs[0] == outs[1] == outs[2]
  spec = {"id": tf.io.FixedLenFeature([], tf.int64),
          "n": tf.io.VarLenFeature(tf.int64),
          "ns": tf.io.VarLenFeature(tf.int64)}
  got = [tf.io.parse_single_example(r, spec) for r in outs[0]]
  assert [(int(g["id"]), g["n"].values.numpy().tolist(),
           g["ns"].values.numpy().tolist()) for g in got] == [
               (i, [] if n is None else [n], ns) for i, n, ns in rows]


def test_a_fraction_is_rejected_alike_in_every_format(tmp_path):
  reasons = []
  for src in _three_formats(tmp_path, [(1, 1.5, [2]), (2, 2, [2.5])]):
    out = str(tmp_path / ("out-" + src.rsplit(".", 1)[1]))
    btr.build(ONE_VALUE_SCHEMA, src, out, max_bad_fraction=1.0)
    reasons.append([e["reason"] for e in btr.open(out).errors()])
  assert reasons[0] == reasons[1] == reasons[2] == [
      'In feature "n": 1.5 is not a whole number; int64 features take '
      "integers (use type: float for fractions)",
      'In feature "ns": at position 0: 2.5 is not a whole number; int64 '
      "features take integers (use type: float for fractions)"]


@pytest.mark.parametrize("text,value", [
    ("1.0", 1), ("2.000", 2), ("-3.0", -3), ("+4.00", 4), ("1e3", 1000),
    ("9223372036854775807.0", 2**63 - 1), ("-0.0", 0)],
    ids=["one", "zeros", "negative", "plus", "exponent", "max", "minus_zero"])
def test_whole_decimal_text_is_an_int64(text, value):
  from beam_tfrecords.schema.values import _to_int64
  assert _to_int64(text) == value


@pytest.mark.parametrize("text,reason", [
    ("1.5", "1.5 is not a whole number"),
    ("9223372036854775808.0", "9223372036854775808 is outside the int64 "
     "range"),
    ("1e30", "'1e30' is outside the int64 range"),
    ("nan", "could not parse 'nan' as int64"),
    ("1,0", "could not parse '1,0' as int64 (a decimal comma?")],
    ids=["fraction", "too_big", "huge_exponent", "nan", "comma"])
def test_other_number_text_is_refused_for_int64(text, reason):
  from beam_tfrecords.schema.values import _to_int64
  with pytest.raises(ValueError) as e:
    _to_int64(text)
  assert str(e.value).startswith(reason), str(e.value)


# --- 7. More messages ---------------------------------------------------------

def test_a_misspelled_schema_key_gets_a_suggestion(tmp_path):
  (tmp_path / "s.yaml").write_text(
      "name: t\nfeatures:\n  label: {type: string, vocabluary: [a, b]}\n")
  with pytest.raises(btr.SchemaError) as e:
    btr.load_schema(str(tmp_path / "s.yaml"))
  assert str(e.value) == (
      f"{tmp_path / 's.yaml'}: features.label.vocabluary: unknown key "
      "'vocabluary'; allowed keys: type, shape, source, separator, default, "
      'required, description, expect, vocabulary. Did you mean '
      '"vocabulary"?')


def test_a_csv_header_cell_too_long_is_a_clean_error(tmp_path, capsys):
  schema, _ = _files(tmp_path, [])
  (tmp_path / "wide.csv").write_text("id," + "x" * 140_000 + "\n1,2\n")
  assert cli.main(["build", "--schema", schema, "--input",
                   str(tmp_path / "wide.csv"), "--output",
                   str(tmp_path / "out")]) == cli.EXIT_INPUT
  assert capsys.readouterr().err == (
      f"error: {tmp_path / 'wide.csv'}: the header (first line, 140,003 "
      "characters) holds a column name of 140,000 characters, more than "
      "131,072; is it a CSV file with a header line? Check --csv-delimiter "
      "/ --csv-quote-char, or give --csv-no-header --csv-column-names "
      "a,b,c\n")


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


@pytest.mark.parametrize("splits,message", [
    ("splits:\n  hash: usr\n  weights: {train: 80%, eval: 20%}\n",
     "'usr' is the split rule's key (fix splits.hash:)"),
    ("splits:\n  column: prt\n  values: [train, eval]\n",
     "'prt' is the split rule's key (fix splits.column:)"),
], ids=["hash", "values"])
def test_a_misspelled_split_column_names_the_split_rule(tmp_path, capsys,
                                                        splits, message):
  schema, data = _files(tmp_path, [(1, 0.5)], SCHEMA_YAML + splits)
  assert cli.main(["build", "--schema", schema, "--input", data, "--output",
                   str(tmp_path / "out")]) == cli.EXIT_INPUT
  err = capsys.readouterr().err
  assert f"are not in the csv input ({data} has ['id', 'score']): " \
      f"{message}" in err
  assert "source" not in err


def test_validate_with_a_schema_of_the_other_record_kind(tmp_path, capsys):
  (tmp_path / "seq.yaml").write_text(
      "name: q\nrecord: sequence_example\ngroup_by: id\ncontext:\n"
      "  id: {type: int64}\nsequence:\n  score: {type: float}\n")
  schema, data = _files(tmp_path, [(1, 0.5), (1, 0.25), (2, 0.75)])
  assert cli.main(["build", "--schema", str(tmp_path / "seq.yaml"),
                   "--input", data, "--output", str(tmp_path / "seq")]) == 0
  capsys.readouterr()
  assert cli.main(["validate", "--schema", schema,
                   str(tmp_path / "seq")]) == 1
  assert capsys.readouterr().out == (
      "this dataset holds SequenceExamples (dataset.json: record: "
      f"sequence_example), but the schema {schema} describes Examples "
      "(record: example); validate it with a schema of its kind\n")


def test_inspect_validate_and_infer_schema_import_neither_beam_nor_tf(
    tmp_path):
  assert _build(tmp_path, rows=[(1, 0.5), (2, 0.25)]) == 0
  out, schema, data = (str(tmp_path / "out"), str(tmp_path / "s.yaml"),
                       str(tmp_path / "in.csv"))
  shard = glob.glob(os.path.join(out, "train-*.tfrecord.gz"))[0]
  for argv in (["inspect", out], ["inspect", shard],
               ["validate", "--schema", schema, out],
               ["infer-schema", "--input", data]):
    code = textwrap.dedent(f"""\
        import contextlib, io, sys
        from beam_tfrecords.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
          code = main({argv!r})
        heavy = [m for m in ("apache_beam", "tensorflow") if m in sys.modules]
        print(code, "heavy:", heavy)
        """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "0 heavy: []", (argv, run.stdout)


def test_other_runners_log_the_jobs_counters_while_it_runs(caplog):
  """poll_metrics against a job that reports counters as it runs (the
  DataflowRunner's and the portable job service's PipelineResult)."""
  from types import SimpleNamespace
  from apache_beam.runners.runner import PipelineState
  from beam_tfrecords.runners import progress

  def counter(name, value):
    return SimpleNamespace(key=SimpleNamespace(metric=SimpleNamespace(
        name=name)), committed=value, attempted=value)

  class Job:
    def __init__(self):
      self.polls = 0

    @property
    def state(self):
      return PipelineState.DONE if self.polls >= 2 else PipelineState.RUNNING

    def metrics(self):
      self.polls += 1
      n = 1000 * self.polls
      return SimpleNamespace(query=lambda _: {"counters": [
          counter("rows_read", n), counter("records", n - 1),
          counter("rows_rejected", 1), counter("bytes_read", 50 * n),
          counter("read_units", 9)]})
  with caplog.at_level(logging.WARNING, logger="beam_tfrecords.runners.progress"):
    progress.poll_metrics(Job(), 200_000, every=0.01)
  lines = [r.getMessage() for r in caplog.records]
  assert len(lines) == 2
  assert lines[1].startswith("progress: 97.7 KB of 195.3 KB read (50%), "
                             "2,000 rows (")
  assert lines[1].endswith("1,999 records, 1 rejected, ETA " +
                           lines[1].rsplit("ETA ", 1)[1])

"""Input checks before (and while) reading (issue 44): every Parquet
file's columns, a truncated gzip TFRecord file, an input directory this
user may not read. Each case is a clear error naming the file (or
directory) and what to do, exit code 2 from the CLI, nothing published."""

import ctypes
import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError

from tests.helpers.input_checks import (FLIGHTS, FRAMED, GZIPPED, HALF,
                                        RECORDS, _flights, _truncated,
                                        _whole_records)


def _cli(tmp_path, schema, inputs, preexec_fn=None):
  """Runs `beam_tfrecords build`; (exit code, the `error: ` lines of
  stderr, the output folder)."""
  path = tmp_path / "s.yaml"
  path.write_text(schema)
  out = tmp_path / "out"
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
       str(path), "--input", inputs, "--output", str(out)],
      capture_output=True, text=True, timeout=300, preexec_fn=preexec_fn,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  errors = [line for line in run.stderr.splitlines()
            if line.startswith("error: ")]
  return run.returncode, errors, out


@pytest.mark.slow
def test_a_parquet_file_without_a_needed_column_is_refused_by_the_cli(
    tmp_path):
  # Before: exit 0, and the 10,000 rows of b.parquet without tailnum.
  _flights(tmp_path / "a.parquet", 10_000)
  _flights(tmp_path / "b.parquet", 10_000, start=10_000, tailnum=False)
  code, errors, out = _cli(tmp_path, FLIGHTS, str(tmp_path / "*.parquet"))
  assert code == 2
  assert errors == [
      f"error: {tmp_path}/b.parquet lacks column(s) ['tailnum'] that the "
      f"schema needs and {tmp_path}/a.parquet has: 'tailnum' is the source "
      "of feature 'tailnum' (fix its source:, or give it a default:). Every "
      "Parquet file of one build must hold the columns the schema reads "
      "without a default: fix or replace that file, or leave it out of "
      "--input"]
  assert not out.exists()


def test_a_parquet_file_may_lack_a_column_with_a_default(tmp_path):
  """As a CSV file without the column: its rows take the default (a
  missing column is all missing values)."""
  pq.write_table(pa.table({"id": [1, 2], "tailnum": ["N1", None]}),
                 str(tmp_path / "a.parquet"))
  pq.write_table(pa.table({"id": [3]}), str(tmp_path / "b.parquet"))
  schema = {"name": "f", "features": {
      "id": "int64", "tailnum": {"type": "string", "default": "NONE"}}}
  result = btr.build(schema, str(tmp_path / "*.parquet"),
                     str(tmp_path / "out"))
  assert sorted(btr.iter_records(result.output), key=lambda r: r["id"]) == [
      {"id": 1, "tailnum": "N1"}, {"id": 2, "tailnum": "NONE"},
      {"id": 3, "tailnum": "NONE"}]


ID = "name: t\nfeatures:\n  id: int64\n"


# (case, file bytes, the message given the file's path)
TFRECORD_CASES = [
    # The records of a member the file ends inside are not handed out:
    # its CRC-32 cannot be checked.
    ("cut_in_the_middle", GZIPPED[:HALF], _truncated),
    ("trailer_cut", GZIPPED[:-3], _truncated),
    ("cut_in_the_header", GZIPPED[:5], _truncated),
    # A file that is not gzip keeps its message.
    ("not_gzip", FRAMED, lambda p: (
        f"{p}: cannot read it as a TFRecord file after 0 good records (no "
        "gzip member starts here (its first bytes are b'\\x10\\x00': not "
        "gzip) (gzip member 0, byte 0)); is it gzip? "
        "(--tfrecord-compression gzip|none)")),
]


@pytest.mark.parametrize("case", TFRECORD_CASES,
                         ids=[c[0] for c in TFRECORD_CASES])
def test_a_truncated_gzip_tfrecord_input_says_so(tmp_path, case):
  _, data, message = case
  path = tmp_path / "t.tfrecord.gz"
  path.write_bytes(data)
  with pytest.raises(InputError) as e:
    btr.build({"name": "t", "features": {"id": "int64"}}, str(path),
              str(tmp_path / "out"))
  assert str(e.value) == message(str(path))
  assert not (tmp_path / "out" / "_SUCCESS").exists()


@pytest.mark.slow
def test_the_cli_says_a_gzip_tfrecord_input_is_truncated(tmp_path):
  assert 0 < _whole_records(HALF) < len(RECORDS)
  path = tmp_path / "t.tfrecord.gz"
  path.write_bytes(GZIPPED[:HALF])
  code, errors, out = _cli(tmp_path, ID, str(path))
  assert (code, errors) == (2, ["error: " + _truncated(str(path))])
  assert not (out / "_SUCCESS").exists()


# --- 3. An input directory this user may not read ---------------------------

def _without_file_access():
  """A preexec_fn for a child that obeys permission bits. Root (the tests
  run as root in CI) ignores them; without CAP_DAC_OVERRIDE and
  CAP_DAC_READ_SEARCH (dropped from the bounding set, so the exec'd
  interpreter does not get them back) it keeps only an owner's rights,
  and a directory of mode 000 is closed to it. (Switching to nobody would
  do too, but the interpreter may live where nobody cannot run it, under
  /root.) Other users obey them already: None."""
  if os.geteuid() != 0:
    return None
  prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before fork

  def drop():
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
      if prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
  return drop


def _denied(folder, need):
  return (
      f"permission denied: this user cannot {need} the directory {folder}, "
      "so the files there cannot be found; give the user read and execute "
      f"(r-x) permission on it (chmod o+rx {folder}, or add the user to its "
      "group), or run the build as a user who can read it")


# (case, input below the folder, the message given the folder)
PERMISSION_CASES = [
    ("file_in_it", "data/locked/a.csv",
     lambda t: f"input '{t}/data/locked/a.csv': "
     + _denied(f"{t}/data/locked", "enter")),
    ("glob_in_it", "data/locked/*.csv",
     lambda t: f"input '{t}/data/locked/*.csv': "
     + _denied(f"{t}/data/locked", "list")),
    ("glob_into_it", "data/*/a.csv",
     lambda t: f"input '{t}/data/*/a.csv': "
     + _denied(f"{t}/data/locked", "list")),
    ("recursive_glob", "data/**.csv",
     lambda t: f"input '{t}/data/**.csv': "
     + _denied(f"{t}/data/locked", "list")),
    ("below_it", "data/locked/sub/a.csv",
     lambda t: f"input '{t}/data/locked/sub/a.csv': "
     + _denied(f"{t}/data/locked", "enter")),
    # Other files match too: the folder that cannot be listed is named,
    # never skipped (its files silently left out).
    ("recursive_glob_with_matches", "data/**.txt",
     lambda t: f"input '{t}/data/**.txt': "
     + _denied(f"{t}/data/locked", "list")),
    ("glob_into_it_with_matches", "data/*/c.csv",
     lambda t: f"input '{t}/data/*/c.csv': "
     + _denied(f"{t}/data/locked", "list")),
    # Paths that are not there still say so.
    ("missing_file", "data/open/b.csv",
     lambda t: f"input '{t}/data/open/b.csv' matches no file; check the "
     "path and quote globs so the shell does not expand them "
     "('data/*.csv')"),
    ("glob_beside_it", "data/*.csv",
     lambda t: f"input '{t}/data/*.csv' matches no file; check the path "
     "and quote globs so the shell does not expand them ('data/*.csv')"),
]

MATCH = """\
import json, sys
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.sources.files import match_inputs
out = {}
for pattern in sys.argv[1:]:
  try:
    out[pattern] = [f.path for f in match_inputs([pattern])]
  except InputError as e:
    out[pattern] = str(e)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
  """(a folder whose data/locked has mode 000, the preexec_fn, and what
  match_inputs says of each case's input in a child kept out of it)."""
  folder = tmp_path_factory.mktemp("inputs")
  locked = folder / "data" / "locked"
  (locked / "sub").mkdir(parents=True)
  (folder / "data" / "open").mkdir()
  (folder / "data" / "open" / "b.txt").write_text("id\n1\n")
  (folder / "data" / "open" / "c.csv").write_text("id\n1\n")
  (locked / "a.csv").write_text("id\n1\n")
  (locked / "sub" / "a.csv").write_text("id\n1\n")
  locked.chmod(0)
  preexec = _without_file_access()
  try:
    # The child is really kept out: it cannot list the directory.
    probe = subprocess.run(
        [sys.executable, "-c", f"import os; os.listdir({str(locked)!r})"],
        capture_output=True, text=True, preexec_fn=preexec, timeout=60)
    assert "PermissionError" in probe.stderr, probe.stderr
    run = subprocess.run(
        [sys.executable, "-c", MATCH]
        + [str(folder / c[1]) for c in PERMISSION_CASES],
        capture_output=True, text=True, preexec_fn=preexec, timeout=120)
    assert run.returncode == 0, run.stderr
    yield folder, preexec, json.loads(run.stdout)
  finally:
    locked.chmod(0o755)


@pytest.mark.parametrize("case", PERMISSION_CASES,
                         ids=[c[0] for c in PERMISSION_CASES])
def test_an_input_directory_that_cannot_be_read_is_named(locked, case):
  folder, _, said = locked
  _, inputs, message = case
  assert said[str(folder / inputs)] == message(str(folder))


@pytest.mark.slow
def test_the_cli_exits_2_naming_the_directory_it_cannot_read(locked,
                                                              tmp_path):
  folder, preexec, _ = locked
  code, errors, out = _cli(tmp_path, ID, str(folder / "data/locked/*.csv"),
                           preexec)
  assert (code, errors) == (2, [
      f"error: input '{folder}/data/locked/*.csv': "
      + _denied(f"{folder}/data/locked", "list")])
  assert not out.exists()

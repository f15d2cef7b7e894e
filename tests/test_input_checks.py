"""Input checks before (and while) reading (issue 44): every Parquet
file's columns, a truncated gzip TFRecord file, an input directory this
user may not read. Each case is a clear error naming the file (or
directory) and what to do, exit code 2 from the CLI, nothing published."""

import ctypes
import gzip
import json
import os
import struct
import subprocess
import sys
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError
from beam_tfrecords.core.tfrecord_files import frame_records


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


# --- 1. Parquet: every file's columns, from its footer ----------------------

FLIGHTS = """\
name: flights
features:
  id: int64
  tailnum: string
"""


def _flights(path, n, start=0, tailnum=True):
  columns = {"id": list(range(start, start + n))}
  if tailnum:
    columns["tailnum"] = [f"N{i}" for i in range(start, start + n)]
  pq.write_table(pa.table(columns), str(path))


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


NESTED = {"name": "n", "features": {
    "id": "int64",
    "tail": {"type": "string", "source": "plane.tail"}}}

# (case, schema, {file: table}, the file refused, its missing column(s),
# the file that has them)
PARQUET_CASES = [
    ("first_file_lacks_it", {"name": "f", "features": {
        "id": "int64", "tailnum": "string"}},
     {"a.parquet": {"id": [1]}, "b.parquet": {"id": [2], "tailnum": ["N"]}},
     "a.parquet", ["tailnum"], "b.parquet"),
    ("middle_file_of_three", {"name": "f", "features": {
        "id": "int64", "tailnum": "string", "origin": "string"}},
     {"a.parquet": {"id": [1], "tailnum": ["N"], "origin": ["JFK"]},
      "b.parquet": {"id": [2]},
      "c.parquet": {"id": [3], "tailnum": ["M"], "origin": ["EWR"]}},
     "b.parquet", ["origin", "tailnum"], "a.parquet"),
    ("split_key", {"name": "f", "features": {"id": "int64"},
                   "splits": {"hash": "user", "weights": {
                       "train": "50%", "eval": "50%"}}},
     {"a.parquet": {"id": [1], "user": ["u"]}, "b.parquet": {"id": [2]}},
     "b.parquet", ["user"], "a.parquet"),
    ("root_of_a_path", NESTED,
     {"a.parquet": {"id": [1], "plane": [{"tail": "N1"}]},
      "b.parquet": {"id": [2]}},
     "b.parquet", ["plane.tail"], "a.parquet"),
]


@pytest.mark.parametrize("case", PARQUET_CASES,
                         ids=[c[0] for c in PARQUET_CASES])
def test_every_parquet_file_is_checked_for_the_needed_columns(tmp_path, case):
  _, schema, tables, refused, missing, other = case
  for name, columns in tables.items():
    pq.write_table(pa.table(columns), str(tmp_path / name))
  with pytest.raises(InputError) as e:
    btr.build(schema, str(tmp_path / "*.parquet"), str(tmp_path / "out"))
  assert str(e.value).startswith(
      f"{tmp_path}/{refused} lacks column(s) {missing} that the schema "
      f"needs and {tmp_path}/{other} has: ")
  assert str(e.value).endswith(
      "Every Parquet file of one build must hold the columns the schema "
      "reads without a default: fix or replace that file, or leave it out "
      "of --input")
  assert not (tmp_path / "out").exists()


def test_a_column_no_parquet_file_has_is_reported_for_the_input(tmp_path):
  # (As before: the first file and the column names it has.)
  _flights(tmp_path / "a.parquet", 1, tailnum=False)
  _flights(tmp_path / "b.parquet", 1, start=1, tailnum=False)
  (tmp_path / "s.yaml").write_text(FLIGHTS)
  with pytest.raises(InputError) as e:
    btr.build(str(tmp_path / "s.yaml"), str(tmp_path / "*.parquet"),
              str(tmp_path / "out"))
  assert str(e.value) == (
      f"column(s) ['tailnum'] named by the schema are not in the parquet "
      f"input ({tmp_path}/a.parquet has ['id']): 'tailnum' is the source of "
      "feature 'tailnum' (fix its source:, or give it a default:)")


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


class _Counted:
  """A file that counts the bytes read from it."""

  def __init__(self, f, counts, path):
    self._f, self._counts, self._path = f, counts, path

  def read(self, *args):
    data = self._f.read(*args)
    self._counts[self._path] = self._counts.get(self._path, 0) + len(data)
    return data

  def __getattr__(self, name):
    return getattr(self._f, name)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self._f.close()


def test_the_parquet_check_reads_only_the_footers(tmp_path, monkeypatch):
  from beam_tfrecords.sources import files as file_io
  from beam_tfrecords.sources import plan_inputs
  # Files of 2 MB of data each (random bytes do not compress).
  rng = __import__("random").Random(44)
  for i in range(3):
    pq.write_table(pa.table({
        "id": list(range(64)),
        "tailnum": [rng.randbytes(32 * 1024) for _ in range(64)]}),
        str(tmp_path / f"f{i}.parquet"))
  # 1,000 small files.
  many = tmp_path / "many"
  many.mkdir()
  for i in range(1000):
    pq.write_table(pa.table({"id": [i], "tailnum": ["N"]}),
                   str(many / f"f{i:04d}.parquet"))
  counts = {}
  opened = file_io.open_input
  monkeypatch.setattr(file_io, "open_input", lambda path: _Counted(
      opened(path), counts, path))
  for name in ("read", "read_row_group", "read_row_groups", "iter_batches"):
    monkeypatch.setattr(pq.ParquetFile, name, lambda *a, **k: pytest.fail(
        "the check read data"))
  needed = {"id": "the id", "tailnum": "the tail number"}
  plan = plan_inputs([str(tmp_path / "*.parquet")], ["id", "tailnum"],
                     needed)
  assert len(plan.files) == 3
  for f in plan.files:
    footer = struct.unpack("<I", open(f.path, "rb").read()[-8:-4])[0]
    assert f.size > 2 << 20
    # pyarrow reads the last 64 KiB at once, the footer with them.
    assert 0 < counts[f.path] <= max(64 << 10, footer + 8) * 2, f.path
  counts.clear()
  plan = plan_inputs([str(many / "*.parquet")], ["id", "tailnum"], needed)
  assert len(plan.files) == len(counts) == 1000


# --- 2. A truncated gzip TFRecord file --------------------------------------


def _varint(n):
  out = b""
  while True:
    byte, n = n & 0x7F, n >> 7
    out += bytes([byte | (0x80 if n else 0)])
    if not n:
      return out


def _field(number, data):
  return _varint(number << 3 | 2) + _varint(len(data)) + data


def _example(i):
  """A tf.train.Example {id: [i]}, encoded by hand (no TensorFlow)."""
  feature = _field(3, _field(1, _varint(i)))  # int64_list, packed value
  return _field(1, _field(1, _field(1, b"id") + _field(2, feature)))


# 2,000 records of the same framed size (ids of two varint bytes).
RECORDS = [_example(i) for i in range(1000, 3000)]
FRAMED = frame_records(RECORDS)
GZIPPED = gzip.compress(FRAMED, mtime=0)
ID = "name: t\nfeatures:\n  id: int64\n"


def _whole_records(cut):
  """The records whole in the first `cut` bytes of GZIPPED."""
  inflated = zlib.decompressobj(zlib.MAX_WBITS | 16).decompress(
      GZIPPED[:cut])
  return len(inflated) // (len(FRAMED) // len(RECORDS))


def _truncated(path, good):
  return (f"{path}: the gzip data ends early: the file is truncated (an "
          f"interrupted download or copy?) after {good} good records; "
          "replace it or leave it out of --input. Nothing from this build "
          "is published.")


HALF = len(GZIPPED) // 2

# (case, file bytes, the message given the file's path)
TFRECORD_CASES = [
    ("cut_in_the_middle", GZIPPED[:HALF],
     lambda p: _truncated(p, _whole_records(HALF))),
    ("trailer_cut", GZIPPED[:-3], lambda p: _truncated(p, len(RECORDS))),
    ("cut_in_the_header", GZIPPED[:5], lambda p: _truncated(p, 0)),
    # A file that is not gzip keeps its message.
    ("not_gzip", FRAMED, lambda p: (
        f"{p}: cannot read it as a TFRecord file after 0 good records (Not "
        "a gzipped file (b'\\x10\\x00')); is it gzip? "
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


def test_the_cli_says_a_gzip_tfrecord_input_is_truncated(tmp_path):
  assert 0 < _whole_records(HALF) < len(RECORDS)
  path = tmp_path / "t.tfrecord.gz"
  path.write_bytes(GZIPPED[:HALF])
  code, errors, out = _cli(tmp_path, ID, str(path))
  assert (code, errors) == (
      2, ["error: " + _truncated(str(path), _whole_records(HALF))])
  assert not (out / "_SUCCESS").exists()


@pytest.mark.parametrize("cut", [HALF, len(GZIPPED) - 3],
                         ids=["cut_in_the_middle", "trailer_cut"])
def test_a_truncated_gzip_tfrecord_on_a_cloud_file_system_is_not_read_short(
    tmp_path, monkeypatch, cut):
  """Beam's gzip reader (gs://, s3://) ends a truncated stream without a
  word: the records after the cut were left out, or the last one was
  called a truncated record. Taken for a cloud path, a local file is read
  through Beam's file systems."""
  from beam_tfrecords.core import fs
  from beam_tfrecords.sources import tfrecord as source
  monkeypatch.setattr(fs, "is_local", lambda path: False)
  path = tmp_path / "t.tfrecord.gz"
  path.write_bytes(GZIPPED[:cut])
  unit = btr.sources.ReadUnit(str(path), "tfrecord",
                              options=(("scalar_columns", ("id",)),))
  with pytest.raises(InputError) as e:
    list(source.TFRecordFormat().read(unit, ["id"]))
  assert str(e.value) == _truncated(str(path), _whole_records(cut))


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


def test_the_cli_exits_2_naming_the_directory_it_cannot_read(locked,
                                                              tmp_path):
  folder, preexec, _ = locked
  code, errors, out = _cli(tmp_path, ID, str(folder / "data/locked/*.csv"),
                           preexec)
  assert (code, errors) == (2, [
      f"error: input '{folder}/data/locked/*.csv': "
      + _denied(f"{folder}/data/locked", "list")])
  assert not out.exists()

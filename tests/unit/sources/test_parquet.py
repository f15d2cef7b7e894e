"""beam_tfrecords/sources/parquet.py, on values: Parquet -> Arrow batches, one
read unit per row group of large files."""

import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError

from tests.helpers.input_checks import FLIGHTS, _flights


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


# --- A damaged row group, and a passing failure (issue 60) ------------------

def _three_row_groups(path):
  pq.write_table(pa.table({"id": list(range(1, 3001)),
                           "text": [f"row {i} " * 8 for i in range(3000)]}),
                 str(path), row_group_size=1000)
  return str(path)


def _read_all(path):
  from beam_tfrecords.sources.base import FORMATS, ReadUnit
  return [b.num_rows for b in FORMATS["parquet"].read(
      ReadUnit(path, "parquet"), None)]


def test_a_read_failure_that_does_not_come_again_is_not_called_damage(
    tmp_path, monkeypatch):
  """A file system that fails once (a reset connection) is raised as it
  is, which a runner may retry: only a row group that fails again when
  read alone is a damaged file (an InputError, which no retry mends)."""
  path = _three_row_groups(tmp_path / "t.parquet")

  def fails(self, *args, **kwargs):
    yield from ()
    raise OSError("Connection reset by peer")

  monkeypatch.setattr(pq.ParquetFile, "iter_batches", fails)
  with pytest.raises(OSError, match="^Connection reset by peer$"):
    _read_all(path)

  # Row group 1 fails when read alone too: it is named.
  def read_row_group(self, group, **kwargs):
    if group == 1:
      raise OSError("Connection reset by peer")

  monkeypatch.setattr(pq.ParquetFile, "read_row_group", read_row_group)
  with pytest.raises(InputError) as e:
    _read_all(path)
  assert str(e.value).startswith(
      f"{path}: row group 1 (of 3, counted from 0; rows 1,001-2,000) cannot "
      "be read: Connection reset by peer (pyarrow ")

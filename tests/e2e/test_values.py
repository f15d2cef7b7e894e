"""One value, one meaning across formats: the same numbers in CSV, JSON
lines and Parquet build the same records, and are refused alike."""

import json

import pyarrow as pa
import pyarrow.parquet as pq

import beam_tfrecords as btr
from beam_tfrecords.core.shard_reader import iter_tfrecords

from tests.helpers.cli_builds import NOT_WHOLE
from tests.helpers.records import shard_paths


# --- One value, one meaning across formats ---------------------------------

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
  from tests.helpers.records import tf_records
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


# (id, n, ns): None is a missing value (pandas then writes the column as
# floats: "1.0"); 1.5 and 2.5 are rejected.
ONE_VALUE_ROWS = [(1, 1, [1, 2]), (2, None, [5]), (3, -3, [0, 2**53 - 1]),
                  (4, 0, [7]), (5, 1.5, [1]), (6, 2, [3, 2.5]),
                  (7, 2**53 - 1, [-4])]


def _write_formats(tmp_path, rows):
  """The same rows as CSV text, JSON lines numbers, JSON lines strings and
  a Parquet float64 column with nulls."""

  def text(v):
    return repr(float(v))  # "1.0", "-3.0", "1.5", "9007199254740991.0"

  paths = {}
  paths["csv"] = tmp_path / "in.csv"
  paths["csv"].write_text("id,n,ns\n" + "".join(
      f"{i},{'' if n is None else text(n)},{'|'.join(map(text, ns))}\n"
      for i, n, ns in rows))
  paths["json_numbers"] = tmp_path / "numbers.jsonl"
  paths["json_numbers"].write_text("".join(json.dumps(
      {"id": i, "n": None if n is None else float(n),
       "ns": [float(v) for v in ns]}) + "\n" for i, n, ns in rows))
  paths["json_strings"] = tmp_path / "strings.jsonl"
  paths["json_strings"].write_text("".join(json.dumps(
      {"id": i, "n": None if n is None else text(n),
       "ns": [text(v) for v in ns]}) + "\n" for i, n, ns in rows))
  paths["parquet"] = tmp_path / "in.parquet"
  pq.write_table(pa.table({
      "id": pa.array([i for i, _, _ in rows], pa.int64()),
      "n": pa.array([None if n is None else float(n) for _, n, _ in rows],
                    pa.float64()),
      "ns": pa.array([[float(v) for v in ns] for _, _, ns in rows],
                     pa.list_(pa.float64()))}), str(paths["parquet"]))
  return {k: str(v) for k, v in paths.items()}


def test_the_same_values_build_the_same_records_in_every_format(tmp_path, tf):
  records, reasons = {}, {}
  for fmt, src in _write_formats(tmp_path, ONE_VALUE_ROWS).items():
    out = str(tmp_path / f"out-{fmt}")
    btr.build(ONE_VALUE_SCHEMA, src, out, max_bad_fraction=1.0)
    records[fmt] = sorted(r for p in shard_paths(out)
                          for r in iter_tfrecords(p))
    reasons[fmt] = sorted((e["row"], e["reason"])
                          for e in btr.open(out).errors())
  assert len(records["csv"]) == 5
  for fmt in ("json_numbers", "json_strings", "parquet"):
    assert records[fmt] == records["csv"], fmt  # byte for byte
    assert reasons[fmt] == reasons["csv"], fmt
  assert reasons["csv"] == [
      (5, f'In feature "n": 1.5 {NOT_WHOLE}'),
      (6, f'In feature "ns": at position 1: 2.5 {NOT_WHOLE}')]
  spec = {"id": tf.io.FixedLenFeature([], tf.int64),
          "n": tf.io.VarLenFeature(tf.int64),
          "ns": tf.io.VarLenFeature(tf.int64)}
  got = sorted((int(p["id"]), p["n"].values.numpy().tolist(),
                p["ns"].values.numpy().tolist())
               for p in (tf.io.parse_single_example(r, spec)
                         for r in records["csv"]))
  assert got == [(1, [1], [1, 2]), (2, [], [5]), (3, [-3], [0, 2**53 - 1]),
                 (4, [0], [7]), (7, [2**53 - 1], [-4])]

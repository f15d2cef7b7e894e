"""End to end: real Beam pipelines (DirectRunner) -> files TensorFlow reads."""

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError

from tests.helpers.cli_builds import _build_cli
from tests.helpers.inputs import write_csv
from tests.helpers.movies import ROWS, SCHEMA
from tests.helpers.records import shard_paths, tf_parse, tf_records


def write_jsonl(path, rows):
  with open(path, "w", encoding="utf-8") as f:
    for r in rows:
      f.write(json.dumps(r, ensure_ascii=False) + "\n")
  return str(path)


def write_parquet(path, rows):
  pq.write_table(pa.Table.from_pylist(rows), str(path))
  return str(path)


WRITERS = {"csv": (write_csv, "in.csv"), "jsonl": (write_jsonl, "in.jsonl"),
           "parquet": (write_parquet, "in.parquet")}


def _spec(tf):
  # Written by hand, as a user of the files would.
  return {
      "age": tf.io.FixedLenFeature([], tf.int64),
      "movies": tf.io.VarLenFeature(tf.string),
      "ratings": tf.io.VarLenFeature(tf.float32),
      "suggestion": tf.io.VarLenFeature(tf.string),
      "price": tf.io.FixedLenFeature([], tf.float32),
      "code": tf.io.VarLenFeature(tf.string),
  }


def _build(tmp_path, fmt, rows=ROWS, **kwargs):
  writer, name = WRITERS[fmt]
  src = writer(tmp_path / name, rows)
  out = str(tmp_path / f"out-{fmt}")
  return btr.build(SCHEMA, src, out, **kwargs), out


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_values_round_trip_through_tensorflow(tf, tmp_path, fmt):
  result, out = _build(tmp_path, fmt)
  records = tf_records(tf, out)
  parsed = tf_parse(tf, records, _spec(tf))
  assert len(parsed) == len(ROWS)
  by_age = {int(p["age"]): p for p in parsed}
  for row in ROWS:
    got = by_age[row["Age"]]
    assert [m.decode() for m in got["movies"]] == row["Movie"]
    np.testing.assert_array_equal(
        got["ratings"], np.array(row["Movie Ratings"], dtype=np.float32))
    assert [s.decode() for s in got["suggestion"]] == [row["Suggestion"]]
    price = -1.0 if row["Price"] is None else row["Price"]
    assert got["price"] == np.float32(price)
    assert [c.decode() for c in got["code"]] == (
        [] if row["Code"] is None else [row["Code"]])
  # dataset.json counts equal what is in the files.
  meta = result.info
  assert meta.counts.to_json() == {"rows_read": 4, "rows_written": 4,
                            "records_written": 4, "rows_rejected": 0,
                            "rows_dropped": 0}
  files = shard_paths(out)
  assert sorted(s.file for s in meta.splits["train"].shards) == \
      [os.path.basename(f) for f in files]
  for shard in meta.splits["train"].shards:
    path = os.path.join(out, shard.file)
    n = sum(1 for _ in tf.data.TFRecordDataset(path, compression_type="GZIP"))
    assert shard.num_records == n
    assert shard.num_bytes == os.path.getsize(path)
  assert os.path.exists(os.path.join(out, "_SUCCESS"))
  assert meta.inputs.format == fmt


def test_csv_jsonl_parquet_give_identical_records(tf, tmp_path):
  outs = {fmt: _build(tmp_path, fmt)[1] for fmt in WRITERS}
  records = {fmt: tf_records(tf, out) for fmt, out in outs.items()}
  assert records["csv"] == records["jsonl"] == records["parquet"]
  assert len(records["csv"]) == 4


def test_bad_rows_go_to_errors_with_reason(tmp_path):
  src = tmp_path / "in.csv"
  src.write_text('Age,Movie,Movie Ratings,Suggestion,Price,Code\n'
                 '1,a,1.0,s,2.0,c\n'
                 'x,a,1.0,s,2.0,c\n'
                 ',a,1.0,s,2.0,c\n'
                 '4,a,"9,7",s,2.0,c\n')
  result = btr.build(SCHEMA, str(src), str(tmp_path / "out"),
                     max_bad_fraction=1.0)
  assert result.info.counts.to_json() == {"rows_read": 4, "rows_written": 1,
                                       "records_written": 1,
                                       "rows_rejected": 3, "rows_dropped": 0}
  errors = []
  for name in os.listdir(tmp_path / "out" / "errors"):
    with open(tmp_path / "out" / "errors" / name) as f:
      errors += [json.loads(line) for line in f]
  errors.sort(key=lambda e: e["row"])
  assert [e["row"] for e in errors] == [2, 3, 4]
  assert errors[0]["reason"] == 'In feature "age": could not parse \'x\' as int64'
  assert errors[0]["raw"]["Age"] == "x"
  assert errors[0]["source"].endswith("in.csv")
  assert errors[1]["problems"] == [{
      "feature": "age",
      "reason": 'required value is missing (column "Age" has no value)'}]
  assert "could not parse '9,7' as float (a decimal comma?" in \
      errors[2]["reason"]
  assert result.info.errors.rows == 3
  # Overwritten by a build without bad rows: the old build's rejected
  # rows are not this dataset's, so they go with it (errors/ stays, empty).
  src.write_text('Age,Movie,Movie Ratings,Suggestion,Price,Code\n'
                 '1,a,1.0,s,2.0,c\n')
  again = btr.build(SCHEMA, str(src), str(tmp_path / "out"), overwrite=True)
  assert again.info.errors.rows == 0
  assert os.listdir(tmp_path / "out" / "errors") == []
  with open(tmp_path / "out" / "dataset.json") as f:
    assert json.load(f)["counts"]["rows_rejected"] == 0


def test_gzip_input_and_many_files(tf, tmp_path):
  a = write_csv(tmp_path / "a.csv.gz", ROWS[:2], gz=True)
  write_csv(tmp_path / "b.csv", ROWS[2:])
  out = str(tmp_path / "out")
  result = btr.build(SCHEMA, [a, str(tmp_path / "b.*")], out, num_shards=3)
  assert result.info.counts.records_written == 4
  assert [os.path.basename(p) for p in shard_paths(out)] == [
      f"train-0000{i}-of-00003.tfrecord.gz" for i in range(3)]
  assert len(tf_records(tf, out)) == 4


def test_finished_dataset_is_not_overwritten(tmp_path):
  result, out = _build(tmp_path, "jsonl")
  with pytest.raises(InputError, match="already holds a finished dataset"):
    _build(tmp_path, "jsonl")
  again, _ = _build(tmp_path, "jsonl", overwrite=True)
  assert again.info.counts == result.info.counts


@pytest.mark.slow
def test_cli_build_and_inspect(tmp_path):
  src = write_jsonl(tmp_path / "in.jsonl", ROWS)
  schema = tmp_path / "s.json"
  schema.write_text(json.dumps(SCHEMA))  # JSON is YAML too
  out = tmp_path / "out"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
       str(schema), "--input", src, "--output", str(out),
       "--direct_num_workers=1"], capture_output=True, text=True, env=env,
      timeout=300)
  assert run.returncode == 0, run.stderr
  assert "train: 4 records in 1 shard(s)" in run.stdout
  assert "rows read: 4; in records: 4; rejected: 0\n" in run.stdout
  assert "PrismRunner" not in run.stderr
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "inspect", str(out),
       "--records", "1"], capture_output=True, text=True, env=env, timeout=120)
  assert run.returncode == 0, run.stderr
  assert '"movies": ["The Shawshank Redemption", "Fight Club"]' in run.stdout
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
       str(tmp_path / "missing.yaml"), "--input", src, "--output",
       str(tmp_path / "o2")], capture_output=True, text=True, env=env,
      timeout=120)
  assert run.returncode == 2
  assert "missing.yaml: schema file not found" in run.stderr


def test_an_empty_quote_char_reads_the_header_unquoted(tmp_path):
  assert _build_cli(tmp_path, 'id,"x\n1,2\n', "--csv-quote-char", "") == 0
  assert list(btr.iter_records(str(tmp_path / "out"))) == [{"id": 1}]

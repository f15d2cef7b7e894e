"""`inspect` on TFRecord files made by anything, and `validate`."""

import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli


def _write_tf_files(tf, directory):
  """Files written by TensorFlow itself: one gzip, one plain; Examples."""
  def example(i):
    return tf.train.Example(features=tf.train.Features(feature={
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "text": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[b"x"] * (i % 3))),
    })).SerializeToString()
  paths = []
  for name, options, rows in (("a.tfrecord.gz", "GZIP", range(4)),
                              ("b.tfrecord", None, range(4, 7))):
    path = os.path.join(directory, name)
    with tf.io.TFRecordWriter(path, options=options) as w:
      for i in rows:
        w.write(example(i))
    paths.append(path)
  return paths


def test_inspect_reads_foreign_tfrecord_files(tf, tmp_path, capsys):
  _write_tf_files(tf, str(tmp_path))
  assert cli.main(["inspect", str(tmp_path), "--records", "2"]) == 0
  out = capsys.readouterr().out
  assert "2 TFRecord file(s), 7 records (examples)" in out
  assert f"{tmp_path}/a.tfrecord.gz: 4 records" in out and "gzip" in out
  assert f"{tmp_path}/b.tfrecord: 3 records" in out and "uncompressed" in out
  assert "  id: int64_list, in 7 of 7 records, 1 per record" in out
  assert "  text: bytes_list, in 7 of 7 records, 0-2 per record" in out
  assert 'record 0: {"id": [0], "text": []}' in out
  assert 'record 1: {"id": [1], "text": ["x"]}' in out
  # A single file, by a glob, works too.
  assert cli.main(["inspect", str(tmp_path / "b.*")]) == 0
  assert "1 TFRecord file(s), 3 records" in capsys.readouterr().out


def test_inspect_shows_sequence_examples_and_corrupt_files(tf, tmp_path,
                                                           capsys):
  ex = tf.train.SequenceExample()
  ex.context.feature["user"].int64_list.value.append(7)
  for v in (1.0, 2.0, 3.0):
    ex.feature_lists.feature_list["r"].feature.add().float_list.value.append(v)
  path = str(tmp_path / "s.tfrecord")
  with tf.io.TFRecordWriter(path) as w:
    w.write(ex.SerializeToString())
    w.write(ex.SerializeToString())
  assert cli.main(["inspect", path]) == 0
  out = capsys.readouterr().out
  assert "2 records (sequenceexamples)" in out
  assert "feature lists (steps per record):\n  r: float_list, in 2 of 2 " \
      "records, 3 per record" in out
  assert '"feature_lists": {"r": [[1.0], [2.0], [3.0]]}' in out
  data = open(path, "rb").read()
  with open(path, "wb") as f:  # flip a byte in the second record's payload
    f.write(data[:-10] + bytes([data[-10] ^ 1]) + data[-9:])
  assert cli.main(["inspect", path]) == 1
  assert "ERROR: " in capsys.readouterr().out


SCHEMA = {"name": "v", "features": {
    "id": {"type": "int64", "required": True},
    "pair": {"type": "float", "shape": [2], "separator": "|",
             "default": [0.0, 0.0]},
    "tags": {"type": "string", "shape": [-1], "separator": "|"}}}


def test_validate_passes_our_build_and_names_mismatches(tmp_path, capsys):
  src = tmp_path / "in.csv"
  src.write_text("id,pair,tags\n1,1|2,a\n2,,a|b\n3,5|6,\n")
  out = str(tmp_path / "out")
  btr.build(SCHEMA, str(src), out)
  import yaml
  good = tmp_path / "good.yaml"
  good.write_text(yaml.safe_dump(SCHEMA))
  assert cli.main(["validate", "--schema", str(good), out]) == 0
  assert "3 records in 1 file(s) checked against " in capsys.readouterr().out
  wrong = dict(SCHEMA, features={
      "id": {"type": "float", "required": True},
      "pair": {"type": "float", "shape": [3], "default": [0.0, 0.0, 0.0]},
      "extra": {"type": "int64", "required": True},
      "tags": {"type": "string", "shape": [-1]}})
  bad = tmp_path / "bad.yaml"
  bad.write_text(yaml.safe_dump(wrong))
  assert cli.main(["validate", "--schema", str(bad), out]) == 1
  text = capsys.readouterr().out
  assert ": 3 do not parse as it says" in text
  assert '  3 records: feature "extra" is missing (the spec reads it as a ' \
      "FixedLenFeature: required, or with a default)" in text
  assert '  3 records: feature "id" holds int64_list, the schema says ' \
      "float_list" in text
  assert '  3 records: feature "pair" has 2 value(s), the schema says 3 ' \
      "(shape [3])" in text
  assert "train-00000-of-00001.tfrecord.gz record 0: " in text


def test_infer_schema_gives_a_schema_that_builds(tmp_path, capsys):
  src = tmp_path / "Movie Ratings.csv"
  src.write_text("User Id,Age,Price,Title,Genres,Scores,Blank\n"
                 "1,29,9.99,Heat,Crime|Drama,1|2,\n"
                 "2,,0.5,Alien,Horror,3,\n"
                 "3,41,1e3,\"Up, again\",Kids|Fun|Comedy,4|5|6,\n")
  assert cli.main(["infer-schema", "--input", str(src)]) == 0
  text = capsys.readouterr().out
  assert 'name: "Movie_Ratings"\n' in text
  assert '  "user_id": {type: int64, source: "User Id", required: true}  # ' \
      "no missing value in the sample" in text
  assert "  \"age\": {type: int64, source: \"Age\"}  # 1 of 3 sampled values " \
      "missing: add `default:` or `required: true`" in text
  assert '  "genres": {type: string, source: "Genres", shape: [-1], ' \
      'separator: "|", required: true}' in text
  assert '  "scores": {type: int64, source: "Scores", shape: [-1], ' \
      'separator: "|", required: true}' in text
  schema_path = tmp_path / "s.yaml"
  schema_path.write_text(text)
  result = btr.build(str(schema_path), str(src), str(tmp_path / "out"))
  assert result.info.counts.rows_written == 3
  rows = list(btr.iter_records(result.output))
  assert rows[0]["genres"] == ["Crime", "Drama"] and rows[2]["scores"] == [
      4, 5, 6]
  assert rows[2]["price"] == 1000.0 and rows[2]["title"] == "Up, again"


def test_infer_schema_reads_parquet_and_json_lists(tmp_path, capsys):
  import pyarrow as pa
  import pyarrow.parquet as pq
  pq.write_table(pa.table({
      "ids": pa.array([[1, 2], [3]], pa.list_(pa.int64())),
      "vec": pa.array([[0.5, 1.0], [2.0, 3.0]], pa.list_(pa.float32())),
      "blob": pa.array([b"\x00", None]),
      "m": pa.array([{"a": 1}, {"a": 2}])}), tmp_path / "t.parquet")
  assert cli.main(["infer-schema", "--input", str(tmp_path / "t.parquet")]) \
      == 0
  text = capsys.readouterr().out
  assert "  \"ids\": {type: int64, shape: [-1], required: true}" in text
  assert "  \"vec\": {type: float, shape: [2], required: true}" in text
  assert "  \"blob\": {type: bytes}  # 1 of 2 sampled values missing" in text
  # A struct's fields are paths (see tests/test_nested.py).
  assert '  "m_a": {type: int64, source: "m.a", required: true}' in text
  (tmp_path / "j.jsonl").write_text('{"a": [1, 2], "b": "x"}\n'
                                    '{"a": [], "b": null}\n')
  assert cli.main(["infer-schema", "--input", str(tmp_path / "j.jsonl")]) \
      == 0
  text = capsys.readouterr().out
  assert "  \"a\": {type: int64, shape: [-1], required: true}" in text
  assert "  \"b\": {type: string}  # 1 of 2 sampled values missing" in text


def test_validate_passes_our_sequence_datasets(tmp_path, capsys):
  """Empty steps of optional step features, derive: first/last with list
  shapes and ragged lists parse with the spec; validate agrees."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  schema = os.path.join(root, "schemas", "user_events.yaml")
  src = os.path.join(root, "pipelines", "data", "user_events.csv")
  out = str(tmp_path / "out")
  btr.build(schema, src, out)
  assert cli.main(["validate", "--schema", schema, out]) == 0
  assert ": 0 do not parse as it says" in capsys.readouterr().out
  seq = {"name": "s", "record": "sequence_example", "group_by": "u",
         "order_by": "t",
         "context": {"u": "int64",
                     "firstv": {"type": "float", "shape": [2], "source": "v",
                                "separator": "|", "derive": "first"}},
         "sequence": {"t": "int64", "w": "float",
                      "v": {"type": "float", "shape": [2], "separator": "|"}}}
  data = tmp_path / "e.csv"
  data.write_text("u,t,w,v\n1,1,,1|2\n1,2,0.5,3|4\n2,1,1.5,\n")
  import yaml
  spath = tmp_path / "seq.yaml"
  spath.write_text(yaml.safe_dump(seq))
  built = btr.build(str(spath), str(data), str(tmp_path / "seq"))
  assert built.info.counts.rows_written == 3
  assert cli.main(["validate", "--schema", str(spath),
                   str(tmp_path / "seq")]) == 0


def test_inspect_reports_a_broken_gzip_file_instead_of_crashing(tf, tmp_path,
                                                                capsys):
  paths = _write_tf_files(tf, str(tmp_path))
  data = open(paths[0], "rb").read()
  with open(paths[0], "wb") as f:
    f.write(data[:len(data) // 2] + bytes(b ^ 0x55 for b in data[
        len(data) // 2:]))
  assert cli.main(["inspect", paths[0]]) == 1
  assert "ERROR: " in capsys.readouterr().out


def test_infer_schema_edge_cases(tmp_path, capsys):
  # YAML words as column names, a JSON array file with mixed types, an
  # all-missing column, NA as text (the build reads it as text too).
  (tmp_path / "2024.json").write_text(
      '[{"on": 1, "null": "a", "m": 1}, {"on": 2, "null": null, "m": "x"},'
      ' {"on": 3, "null": "NA", "m": null, "gone": null}]')
  assert cli.main(["infer-schema", "--input",
                   str(tmp_path / "2024.json")]) == 0
  text = capsys.readouterr().out
  assert 'name: "2024"' in text
  assert '  "on": {type: int64, required: true}' in text
  assert '  "m": {type: string}' in text  # 1 and "x": text
  assert '  "gone": {type: string}  # 3 of 3 sampled values missing' in text
  schema_path = tmp_path / "s.yaml"
  schema_path.write_text(text)
  schema = btr.load_schema(str(schema_path))
  assert [f.name for f in schema.features] == ["gone", "m", "null", "on"]
  (tmp_path / "empty.csv").write_text("a,b\n")
  assert cli.main(["infer-schema", "--input", str(tmp_path / "empty.csv")]) \
      == 2
  assert "no rows to look at" in capsys.readouterr().err

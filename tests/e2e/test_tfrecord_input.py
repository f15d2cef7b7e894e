"""--format tfrecord: existing TFRecord files of tf.train.Example as input.

Files written by TensorFlow itself (plain and GZIP), our own shards built
again (byte-identical), re-split, and every kind of bad record accounted
for."""

import gzip
import json
import os
import subprocess
import sys

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.shard_reader import iter_tfrecords

from tests.helpers.movies import SCHEMA, ROWS
from tests.helpers.records import tf_parse, tf_records
from tests.helpers.tfrecord_input import _example, _write


TARGET = {"name": "t", "features": {
    "id": {"type": "int64", "required": True},
    "score": {"type": "float", "default": -1.0},
    "name": {"type": "string", "source": "title"},
    "tags": {"type": "string", "shape": [-1]},
    "pair": {"type": "int64", "shape": [2]}}}


def test_examples_written_by_tensorflow_come_out_value_for_value(tmp_path,
                                                                  tf):
  records = [
      _example(tf, id=1, score=0.5, title=b"one", tags=[b"a", b"b"],
               pair=[1, 2]),
      _example(tf, id=2, title="zwei".encode(), tags=[], pair=[3, 4]),
      _example(tf, id=3, score=[], title=b"three", pair=[5, 6]),
  ]
  _write(tf, tmp_path / "a.tfrecord", records[:2])
  _write(tf, tmp_path / "b.tfrecord.gz", records[2:], gzip_it=True)
  out = str(tmp_path / "out")
  result = btr.build(TARGET, [str(tmp_path / "a.tfrecord"),
                              str(tmp_path / "b.tfrecord.gz")], out)
  assert result.info.inputs.format == "tfrecord"
  rows = tf_parse(tf, tf_records(tf, out), btr.feature_spec(out))
  got = [(int(r["id"]), float(r["score"]), r["name"],
          [t for t in r["tags"]], r["pair"].tolist()) for r in rows]
  # An absent feature and an empty list are both missing: the default.
  assert got == [(1, 0.5, b"one", [b"a", b"b"], [1, 2]),
                 (2, -1.0, "zwei".encode(), [], [3, 4]),
                 (3, -1.0, b"three", [], [5, 6])]
  assert result.info.counts.rows_read == 3
  assert result.rows_rejected == 0


def test_our_own_shards_built_again_hold_the_same_records(tmp_path):
  """A dataset's shards as input, the schema naming its stored features:
  the same records, byte for byte, in the same order."""
  import csv
  src = tmp_path / "in.csv"
  with open(src, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(ROWS[0]))
    w.writeheader()
    for row in ROWS:
      w.writerow({k: "|".join(map(str, v)) if isinstance(v, list) else
                  ("" if v is None else v) for k, v in row.items()})
  first = str(tmp_path / "first")
  btr.build(SCHEMA, str(src), first)
  again_schema = {"name": "movies", "features": {
      name: {k: v for k, v in spec.items() if k not in ("source",
                                                         "separator")}
      for name, spec in SCHEMA["features"].items()}}
  again = str(tmp_path / "again")
  btr.build(again_schema, os.path.join(first, "train-*.tfrecord.gz"), again)
  names = btr.dataset_info(first).splits["train"].files
  assert names == btr.dataset_info(again).splits["train"].files
  for name in names:
    before = list(iter_tfrecords(os.path.join(first, name)))
    assert before and list(iter_tfrecords(os.path.join(again, name))) == \
        before


def test_an_existing_dataset_is_split_again_by_hash(tmp_path, tf):
  _write(tf, tmp_path / "all.tfrecord.gz",
         [_example(tf, id=i, title=b"x", pair=[i, i]) for i in range(1000)],
         gzip_it=True)
  schema = dict(TARGET, splits={"hash": "id",
                                "weights": {"train": 8, "eval": 2}})
  out = str(tmp_path / "out")
  result = btr.build(schema, str(tmp_path / "all.tfrecord.gz"), out)
  ids = {split: sorted(r["id"] for r in btr.iter_records(out, split))
         for split in ("train", "eval")}
  assert sorted(ids["train"] + ids["eval"]) == list(range(1000))
  assert 700 < len(ids["train"]) < 900
  assert result.info.counts.records_written == 1000


def test_bad_records_go_to_errors_with_their_record_number(tmp_path, tf):
  seq = tf.train.SequenceExample()
  seq.context.feature["id"].int64_list.value.append(7)
  seq.feature_lists.feature_list["t"].feature.add().int64_list.value.append(1)
  records = [
      _example(tf, id=1, pair=[1, 2]),
      seq.SerializeToString(),                 # a SequenceExample
      b"\xff\xfe not a protocol buffer",       # not an Example at all
      _example(tf, id=[4, 5], pair=[1, 2]),    # two values for a scalar
      _example(tf, id=6, pair=[1]),            # one value for shape [2]
      _example(tf, id=7, pair=[7, 8]),
  ]
  _write(tf, tmp_path / "in.tfrecord", records)
  out = str(tmp_path / "out")
  result = btr.build(TARGET, str(tmp_path / "in.tfrecord"), out,
                     max_bad_fraction=1.0)
  assert [r["id"] for r in btr.iter_records(out)] == [1, 7]
  errors = {e["row"]: e["reason"] for e in btr.open(out).errors()}
  assert errors == {
      2: "the record is a tf.train.SequenceExample, not a tf.train.Example;"
         " --format tfrecord reads Examples",
      3: errors[3],
      4: 'In feature "id": expected one value (shape []), got a list of 2; '
         'declare shape: [-1] for lists',
      5: errors[5]}
  assert errors[3].startswith("the record is not a tf.train.Example")
  assert errors[5].startswith('In feature "pair": ') and "2" in errors[5]
  counts = result.info.counts
  assert (counts.rows_read, counts.records_written,
          counts.rows_rejected) == (6, 2, 4)


def test_a_feature_whose_kind_differs_between_records_is_judged_per_row(
    tmp_path, tf):
  records = [_example(tf, id=1, pair=[1, 2]),
             _example(tf, id=b"2", pair=[1, 2]),    # bytes that parse
             _example(tf, id=b"x", pair=[1, 2])]    # bytes that do not
  _write(tf, tmp_path / "in.tfrecord", records)
  out = str(tmp_path / "out")
  btr.build(TARGET, str(tmp_path / "in.tfrecord"), out, max_bad_fraction=1.0)
  assert [r["id"] for r in btr.iter_records(out)] == [1, 2]
  assert [e["row"] for e in btr.open(out).errors()] == [3]


def test_a_broken_file_stops_the_build_naming_it(tmp_path, tf):
  _write(tf, tmp_path / "in.tfrecord",
         [_example(tf, id=i, pair=[1, 2]) for i in range(10)])
  data = (tmp_path / "in.tfrecord").read_bytes()
  (tmp_path / "in.tfrecord").write_bytes(data[:-7])
  with pytest.raises(InputError, match=(
      r"in\.tfrecord: the file ends early \(the file ends inside record 10 "
      r"of 31 bytes \(byte 423\)\): it is truncated \(an interrupted "
      r"download or copy\?\) after 9 good records")):
    btr.build(TARGET, str(tmp_path / "in.tfrecord"), str(tmp_path / "out"))
  assert not os.path.exists(tmp_path / "out" / "_SUCCESS")


@pytest.mark.slow
def test_gzip_without_the_suffix_and_the_cli_flag(tmp_path, tf, capsys,
                                                  monkeypatch):
  _write(tf, tmp_path / "in.tfrecord", [_example(tf, id=5, pair=[1, 2])],
         gzip_it=True)
  (tmp_path / "s.json").write_text(json.dumps(TARGET))
  monkeypatch.chdir(tmp_path)
  # (In this process: each command in a child of its own cost 3 s of
  # imports; tests/e2e/test_cli_errors.py runs the CLI's error path in
  # child processes.)
  args = ["build", "--schema", "s.json", "--input", "in.tfrecord",
          "--output", "out"]
  assert cli.main(args) == cli.EXIT_OK, capsys.readouterr().err[-2000:]
  assert [r["id"] for r in btr.iter_records(str(tmp_path / "out"))] == [5]
  capsys.readouterr()
  assert cli.main(args[:-1] + ["out2", "--tfrecord-compression",
                               "none"]) == cli.EXIT_INPUT
  assert "in.tfrecord: corrupt length CRC at record 1" in \
      capsys.readouterr().err.splitlines()[-1]
  (tmp_path / "in.csv").write_text("id,pair\n1,2\n")
  assert cli.main(args[:4] + ["in.csv", "--output", "out3",
                              "--tfrecord-compression", "gzip"]) == \
      cli.EXIT_INPUT
  assert "--tfrecord-compression is for TFRecord input; these files are " \
      "csv" in capsys.readouterr().err.splitlines()[-1]


def _infer_run(path):
  return subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "infer-schema", "--input",
       str(path)], capture_output=True, text=True, timeout=300)


def _infer(path, capsys):
  """infer-schema's output, and its feature lines by name: its main() in
  this process (a child process costs 2 s of imports; the refused file
  below runs the real command line)."""
  capsys.readouterr()
  code = cli.main(["infer-schema", "--input", str(path)])
  run = capsys.readouterr()
  assert code == 0, run.err[-2000:]
  return run.out, {line.split(":")[0].strip().strip('"'): line
                   for line in run.out.splitlines() if line.startswith("  ")}


def test_infer_schema_reads_examples(tmp_path, tf, capsys):
  _write(tf, tmp_path / "in.tfrecord.gz", [
      _example(tf, id=1, title="é".encode(), tags=[b"a", b"b"], pair=[1, 2],
               raw=b"\xff"),
      _example(tf, id=2, title=b"b", tags=[b"c"], pair=[3, 4], raw=b"\x00"),
  ], gzip_it=True)
  inferred, features = _infer(tmp_path / "in.tfrecord.gz", capsys)
  assert "{type: int64, required: true}" in features["id"]
  assert "{type: string, required: true}" in features["title"]
  assert "{type: string, shape: [-1], required: true}" in features["tags"]
  assert "{type: int64, shape: [2], required: true}" in features["pair"]
  assert "{type: bytes, required: true}" in features["raw"]
  # And the inferred schema builds the same files.
  (tmp_path / "s.yaml").write_text(inferred)
  out = str(tmp_path / "out")
  btr.build(str(tmp_path / "s.yaml"), str(tmp_path / "in.tfrecord.gz"), out)
  assert [(r["id"], r["title"], r["tags"]) for r in btr.iter_records(out)] \
      == [(1, "é", ["a", "b"]), (2, "b", ["c"])]


def test_tensor_columns_and_keys_take_single_values(tmp_path, tf):
  _write(tf, tmp_path / "in.tfrecord", [
      _example(tf, p0=1, p1=2, p2=3, flat=[4, 5, 6], user=7, split=b"eval")])
  schema = {"name": "t", "splits": {"column": "split",
                                     "values": ["train", "eval"]},
            "features": {
                "g": {"type": "tensor", "dtype": "uint8", "shape": [3],
                      "source": ["p0", "p1", "p2"]},
                "f": {"type": "tensor", "dtype": "int32", "shape": [3],
                      "source": "flat"},
                "user": {"type": "int64"}}}
  out = str(tmp_path / "out")
  result = btr.build(schema, str(tmp_path / "in.tfrecord"), out)
  assert result.rows_rejected == 0
  (row,) = list(btr.iter_records(out, "eval"))
  assert row["user"] == 7 and row["g_shape"] == [3] and \
      row["g"] == bytes([1, 2, 3])


def test_kinds_that_differ_keep_their_values(tmp_path, tf, monkeypatch):
  """int64 7 next to float 2.5 in one batch: 7 stays 7 (not 7.0); an empty
  list of another kind takes the others' kind, and the batch is decoded
  in pieces, not record by record."""
  from beam_tfrecords.sources import tfrecord as source
  calls = []
  real = source._decode_ranges

  def counted(decoder, records, lo, hi, out):
    calls.append(hi - lo)
    return real(decoder, records, lo, hi, out)

  monkeypatch.setattr(source, "_decode_ranges", counted)
  records = [_example(tf, k=[7], s=[b"a"], id=1)]
  records += [_example(tf, k=[8], s=[b"b"], id=i) for i in range(2, 60)]
  records += [_example(tf, k=[2.5], s=[], id=60)]  # s: empty int64 list
  records += [_example(tf, k=[9], s=[b"c"], id=61)]
  columns, kept, errors = source.decode_examples(records)
  assert not errors and kept == list(range(61))
  assert columns["k"][:2] == [[7], [8]] and columns["k"][59] == [2.5]
  assert columns["s"].to_pylist()[58:] == [[b"b"], [], [b"c"]]
  assert len(calls) < 30  # not 61 single decodes
  schema = {"name": "t", "features": {"k": {"type": "string"},
                                      "id": {"type": "int64"}}}
  _write(tf, tmp_path / "in.tfrecord", records)
  out = str(tmp_path / "out")
  btr.build(schema, str(tmp_path / "in.tfrecord"), out, max_bad_fraction=1.0)
  got = {r["id"]: r["k"] for r in btr.iter_records(out)}
  assert got[1] == "7" and got[61] == "9" and 60 not in got
  assert [e["row"] for e in btr.open(out).errors()] == [60]


def test_examples_with_repeated_or_unknown_fields_are_examples(tmp_path, tf):
  """Protobuf merges a repeated features field and skips unknown fields;
  TensorFlow reads both, so do we."""
  merged = _example(tf, id=1) + _example(tf, pair=[1, 2])
  unknown = _example(tf, id=2, pair=[3, 4]) + b"\x18\x01"
  _write(tf, tmp_path / "in.tfrecord", [merged, unknown])
  out = str(tmp_path / "out")
  result = btr.build(TARGET, str(tmp_path / "in.tfrecord"), out)
  assert result.rows_rejected == 0
  assert [(r["id"], r["pair"]) for r in btr.iter_records(out)] == [
      (1, [1, 2]), (2, [3, 4])]


def test_gzip_is_recognised_by_its_bytes_and_a_stream_error_keeps_the_records_before_it(
    tmp_path, tf):
  from beam_tfrecords.core import shard_reader as records
  from beam_tfrecords.core.tfrecord_files import frame_records
  framed = frame_records([b"r%d" % i for i in range(49)])
  (tmp_path / "a.tfrecord").write_bytes(gzip.compress(framed))
  assert len(list(records.iter_tfrecords(str(tmp_path / "a.tfrecord")))) \
      == 49
  # 49 good records, then bytes that are not gzip.
  (tmp_path / "b.tfrecord.gz").write_bytes(gzip.compress(framed) +
                                           b"garbage!")
  seen = []
  with pytest.raises(Exception):
    for r in records.iter_tfrecords(str(tmp_path / "b.tfrecord.gz")):
      seen.append(r)
  assert len(seen) == 49
  # A .gz name on a file that is not gzip: the build says what to check.
  _write(tf, tmp_path / "c.tfrecord.gz", [_example(tf, id=1, pair=[1, 2])])
  with pytest.raises(InputError, match=(
      r"c\.tfrecord\.gz: cannot read it as a TFRecord file after 0 good "
      r"records \(.*\); is it gzip\? \(--tfrecord-compression gzip\|none\)")):
    btr.build(TARGET, str(tmp_path / "c.tfrecord.gz"), str(tmp_path / "o"))


def test_tensorflow_shard_names_and_preprocess_with_lists(tmp_path, tf):
  _write(tf, tmp_path / "data.tfrecord-00000-of-00001",
         [_example(tf, id=3, title=b"t", pair=[1, 2])])
  out = str(tmp_path / "out")
  # The function gets lists; the scalar features take single values from
  # what it returns.
  result = btr.build(TARGET, str(tmp_path / "data.tfrecord-*"), out,
                     preprocess=lambda batch: batch)
  assert result.info.inputs.format == "tfrecord"
  assert [(r["id"], r["name"]) for r in btr.iter_records(out)] == [
      (3, "t")]


def test_infer_schema_lists_features_it_cannot_type(tmp_path, tf, capsys):
  records = [tf.train.Example(features=tf.train.Features(feature={
      "nokind": tf.train.Feature(),
      "empty": tf.train.Feature(int64_list=tf.train.Int64List()),
      "k": tf.train.Feature(int64_list=tf.train.Int64List(value=[7])),
  })).SerializeToString(), tf.train.Example(features=tf.train.Features(
      feature={"k": tf.train.Feature(float_list=tf.train.FloatList(
          value=[2.5]))})).SerializeToString()]
  _write(tf, tmp_path / "in.tfrecord", records)
  _, lines = _infer(tmp_path / "in.tfrecord", capsys)
  assert "{type: float, required: true}" in lines["k"]
  for name in ("nokind", "empty"):
    assert "every sampled value is missing" in lines[name]
  (tmp_path / "bad.tfrecord").write_bytes(b"\x05\x00\x00")
  bad = _infer_run(tmp_path / "bad.tfrecord")
  assert bad.returncode == 2
  assert "bad.tfrecord: cannot read it as TFRecords" in bad.stderr

"""The public PTransforms in a user's own pipeline (issue 18): WriteDataset
from beam.Create of dicts and from ReadFromParquetBatched, grouped
SequenceExamples from a PCollection, EncodeRecords for a sink of one's
own; read back by TensorFlow's parsers."""

import filecmp
import json
import os

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

import beam_tfrecords as btr
from beam_tfrecords.core.tfrecord_files import decode_example

from tests.helpers.records import shard_paths
from tests.helpers.paths import ROOT
from tests.helpers.beam_transforms import ROWS, SCHEMA


BAD = {"id": "oops", "name": "x", "score": 1.0}


def _parsed(tf, output, split):
  spec = {"id": tf.io.FixedLenFeature([], tf.int64),
          "name": tf.io.FixedLenFeature([], tf.string),
          "score": tf.io.FixedLenFeature([], tf.float32)}
  ds = tf.data.TFRecordDataset(shard_paths(output, split),
                               compression_type="GZIP")
  out = []
  # Parsed a batch at a time (one record at a time, eagerly, took 5 s).
  for records in ds.batch(1024):
    parsed = tf.io.parse_example(records, spec)
    out += [{"id": int(i), "name": n.decode(), "score": float(s)}
            for i, n, s in zip(parsed["id"].numpy(), parsed["name"].numpy(),
                               parsed["score"].numpy())]
  return out


def _write(rows, output, workers=1, **options):
  args = ["--direct_num_workers", str(workers)] + (
      ["--direct_running_mode", "multi_processing"] if workers > 1 else [])
  with beam.Pipeline(options=PipelineOptions(args)) as p:
    published = (p | beam.Create(rows)
                 | btr.WriteDataset(SCHEMA, output, num_shards=2,
                                    max_bad_fraction=1.0, **options))
    assert_that(published | beam.Map(lambda info: info.counts.rows_read),
                equal_to([len(rows)]))


def test_write_dataset_from_dicts(tf, tmp_path):
  out = str(tmp_path / "dicts")
  _write(ROWS + [BAD], out)
  got = _parsed(tf, out, "train") + _parsed(tf, out, "eval")
  assert sorted(got, key=lambda r: r["id"]) == ROWS
  info = btr.dataset_info(out)
  assert info.inputs.format == "pcollection"
  assert info.counts.to_json() == {"rows_read": 301, "rows_written": 300,
                            "rows_rejected": 1, "rows_dropped": 0,
                            "records_written": 300}
  assert sum(s.num_records for s in info.splits.values()) == 300
  (error,) = list(btr.open(out).errors())
  assert error["source"] == "<pcollection>" and error["row"] is None
  assert len(error["element"]) == 24  # the row's content digest
  assert error["raw"] == BAD
  assert "could not parse 'oops' as int64" in error["reason"]
  assert not [n for n in os.listdir(out) if n.startswith(".")]


@pytest.mark.slow
def test_write_dataset_bytes_do_not_depend_on_order_or_workers(tmp_path):
  one, two = str(tmp_path / "one"), str(tmp_path / "two")
  _write(ROWS + [BAD], one)
  _write(list(reversed(ROWS + [BAD])), two, workers=2)
  files = sorted(f for f in os.listdir(one) if f.endswith(".gz"))
  assert len(files) == 4
  for name in files + ["errors/errors-00000-of-00001.jsonl", "dataset.json"]:
    assert filecmp.cmp(os.path.join(one, name), os.path.join(two, name),
                       shallow=False), name


@pytest.mark.slow
def test_write_dataset_from_parquet_batches(tf, tmp_path):
  path = str(tmp_path / "rows.parquet")
  pq.write_table(pa.Table.from_pylist(ROWS), path, row_group_size=64)
  out = str(tmp_path / "parquet")
  with beam.Pipeline() as p:
    _ = (p | beam.io.ReadFromParquetBatched(path)
         | btr.WriteDataset(SCHEMA, out, num_shards=2))
  got = _parsed(tf, out, "train") + _parsed(tf, out, "eval")
  assert sorted(got, key=lambda r: r["id"]) == ROWS
  assert btr.dataset_info(out).counts.rows_rejected == 0


def test_grouped_sequences_from_a_pcollection(tf, tmp_path):
  schema = {"name": "events", "record": "sequence_example",
            "group_by": "user", "order_by": "t",
            "context": {"user": {"type": "string", "required": True}},
            "sequence": {"t": "int64", "item": "string"}}
  events = [{"user": f"u{i % 7}", "t": (i * 37) % 101, "item": f"x{i}"}
            for i in range(70)]
  out = str(tmp_path / "seq")
  with beam.Pipeline() as p:
    _ = p | beam.Create(events) | btr.WriteDataset(schema, out)
  records = list(btr.iter_records(out))
  assert len(records) == 7
  assert sorted(r["context"]["user"] for r in records) == [
      f"u{i}" for i in range(7)]
  for r in records:
    want = sorted((e for e in events if e["user"] == r["context"]["user"]),
                  key=lambda e: e["t"])
    assert r["feature_lists"] == {"t": [e["t"] for e in want],
                                  "item": [e["item"] for e in want]}


def test_encode_records_for_a_sink_of_ones_own(tmp_path):
  schema = {"name": "plain", "features": {"id": {"type": "int64",
                                                 "required": True}}}
  with TestPipeline() as p:
    encoded = (p | beam.Create([{"id": 1}, {"id": 2}, {"id": "x"}])
               | btr.EncodeRecords(schema))
    ids = (encoded.records
           | beam.Map(lambda r: (r[0], decode_example(r[1])["id"][1])))
    assert_that(ids, equal_to([("train", [1]), ("train", [2])]),
                label="records")
    assert_that(encoded.errors | beam.Map(lambda e: (e["raw"], e["reason"])),
                equal_to([({"id": "x"}, 'In feature "id": could not parse '
                           "'x' as int64")]), label="errors")


@pytest.mark.slow
def test_write_dataset_refuses_a_finished_dataset_without_overwrite(
    tmp_path):
  out = str(tmp_path / "o")
  _write(ROWS, out)
  with pytest.raises(btr.InputError, match="already holds a finished "
                     "dataset; pass overwrite=True"):
    with beam.Pipeline() as p:
      _ = p | beam.Create(ROWS) | btr.WriteDataset(SCHEMA, out)
  assert not [n for n in os.listdir(out) if n.startswith(".")]


def test_elements_that_are_not_rows_get_a_clear_error(tmp_path):
  with pytest.raises(Exception, match="WriteDataset / EncodeRecords take "
                     "rows as dicts .* got int: 5"):
    with beam.Pipeline() as p:
      _ = p | beam.Create([5]) | btr.EncodeRecords(SCHEMA)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["jsonl_rows", "parquet_batches"])
def test_the_bundled_beam_user_pipelines(tf, tmp_path, name):
  import importlib
  here = ROOT
  with open(os.path.join(here, "pipelines", "data", "structured.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  module = importlib.import_module(f"pipelines.{name}")
  out = str(tmp_path / name)
  info = module.run(["--output", out, "--num-shards", "2"])
  assert info.inputs.format == "pcollection"
  spec = {"int_col": tf.io.FixedLenFeature([], tf.int64),
          "str_col": tf.io.FixedLenFeature([], tf.string),
          "float_col": tf.io.FixedLenFeature([], tf.float32),
          "label": tf.io.FixedLenFeature([], tf.string)}
  got = []
  for record in tf.data.TFRecordDataset(shard_paths(out),
                                        compression_type="GZIP"):
    p = tf.io.parse_single_example(record, spec)
    got.append((int(p["int_col"]), p["str_col"].numpy().decode(),
                float(np.float32(p["float_col"])),
                p["label"].numpy().decode()))
  want = [(r.get("int_col", -1) if r.get("int_col") is not None else -1,
           r["str_col"], float(np.float32(r["float_col"])), r["label"])
          for r in rows]
  assert sorted(got) == sorted(want)


HERE = ROOT


def test_write_dataset_with_images_by_path(tf, tmp_path):
  import csv
  data = os.path.join(HERE, "pipelines", "data")
  with open(os.path.join(data, "image_labels.csv")) as f:
    rows = list(csv.DictReader(f))
  schema = {"name": "images", "max_bad_fraction": 0.05, "features": {
      "image": {"type": "image", "source": "name", "required": True,
                "base_dir": data},
      "label": {"type": "int64", "required": True}}}
  out = str(tmp_path / "images")
  with beam.Pipeline() as p:
    _ = p | beam.Create(rows) | btr.WriteDataset(schema, out)
  records = list(btr.iter_records(out))
  assert len(records) == len(rows) - 1  # one file is missing
  by_label = sorted(r["label"] for r in records)
  assert by_label == sorted(int(r["label"]) for r in rows
                            if "lost" not in r["name"])
  first = next(r for r in rows if r["name"] == "shapes/circle/00.png")
  with open(os.path.join(data, first["name"]), "rb") as f:
    assert f.read() in [r["image"] for r in records]
  (error,) = list(btr.open(out).errors())
  assert "lost.png" in error["reason"] and "element" in error


@pytest.mark.slow
def test_write_dataset_with_tensorflow_transform(tmp_path):
  import csv
  with open(os.path.join(HERE, "pipelines", "data", "ratings.csv")) as f:
    rows = list(csv.DictReader(f))
  out = str(tmp_path / "tft")
  with beam.Pipeline() as p:
    _ = (p | beam.Create(rows)
         | btr.WriteDataset(os.path.join(HERE, "schemas",
                                         "movie_ratings_tft.yaml"), out))
  info = btr.dataset_info(out)
  want = {s: sum(1 for r in rows if r["split"] == s)
          for s in ("train", "eval")}
  assert {s: v.num_records for s, v in info.transform.splits.items()} \
      == want
  assert {s: v.num_records for s, v in info.splits.items()} == want
  assert os.path.exists(os.path.join(out, "transform_fn", "saved_model.pb"))
  assert sorted(r["user_id"] for r in btr.iter_records(out, "eval")) == \
      sorted(int(r["user_id"]) for r in rows if r["split"] == "eval")


@pytest.mark.slow
def test_grouped_records_for_a_sink_of_ones_own_and_beams_sink(tmp_path):
  """Grouped sequences travel as one element per bucket; EncodeRecords and
  --sink beam still give every group's record, the same bytes as the
  deterministic sink's."""
  schema = {"name": "events", "record": "sequence_example",
            "group_by": "user", "order_by": "t",
            "context": {"user": {"type": "string", "required": True},
                        "length": {"derive": "length"}},
            "sequence": {"t": "int64", "item": "string"}}
  events = [{"user": f"u{i % 23}", "t": (i * 37) % 101, "item": f"x{i}"}
            for i in range(400)]
  with TestPipeline() as p:
    encoded = p | beam.Create(events) | btr.EncodeRecords(schema)
    _ = (encoded.records | beam.Map(lambda r: r[1])
         | beam.io.WriteToText(str(tmp_path / "mine"), coder=_BytesCoder()))
  src = tmp_path / "events.csv"
  src.write_text("user,t,item\n" + "".join(
      f"{e['user']},{e['t']},{e['item']}\n" for e in events))
  out = str(tmp_path / "det")
  btr.build(schema, str(src), out, num_shards=3)
  deterministic = sorted(_records_of(out))
  assert len(deterministic) == 23
  mine = []
  for name in sorted(os.listdir(tmp_path)):
    if name.startswith("mine"):
      with open(tmp_path / name, "rb") as f:
        mine += [bytes.fromhex(line.decode()) for line in f.read().split()]
  assert sorted(mine) == deterministic
  beam_out = str(tmp_path / "beam")
  btr.build(schema, str(src), beam_out, num_shards=2, sink="beam")
  assert sorted(_records_of(beam_out)) == deterministic


class _BytesCoder(beam.coders.Coder):
  """Writes bytes as hex lines (WriteToText is line based)."""

  def encode(self, value):
    return value.hex().encode()

  def decode(self, encoded):
    return bytes.fromhex(encoded.decode())


def _records_of(path):
  from beam_tfrecords.read.reader import shard_files
  from beam_tfrecords.core.shard_reader import iter_tfrecords
  return [r for shard in shard_files(path, "train")
          for r in iter_tfrecords(shard)]


@pytest.mark.slow
def test_a_pipeline_built_and_never_run_leaves_nothing(tmp_path):
  """WriteDataset only plans when the graph is built: the output is
  checked, locked and staged by the pipeline's first step when it runs
  (as Beam's own file sinks do), so a graph built and dropped, or one
  whose run never starts, holds no lock and leaves no folder; a finished
  dataset there is refused when the pipeline runs, not when it is built."""
  fresh, finished = tmp_path / "fresh", tmp_path / "finished"
  _write(ROWS, str(finished))
  before = sorted(os.listdir(finished))
  for out in (fresh, finished):
    p = beam.Pipeline()
    _ = p | beam.Create(ROWS) | btr.WriteDataset(SCHEMA, str(out))
    del p
  assert not fresh.exists()
  assert sorted(os.listdir(finished)) == before
  # Then run: the build into the fresh output publishes, taking the lock
  # only now; the finished one is refused at run time, leaving it whole.
  with beam.Pipeline() as p:
    _ = p | beam.Create(ROWS) | btr.WriteDataset(SCHEMA, str(fresh))
  assert btr.dataset_info(str(fresh)).counts.records_written == len(ROWS)
  assert not [n for n in os.listdir(fresh) if n.startswith(".")]
  with pytest.raises(btr.InputError, match="already holds a finished"):
    with beam.Pipeline() as p:
      _ = p | beam.Create(ROWS) | btr.WriteDataset(SCHEMA, str(finished))
  assert sorted(os.listdir(finished)) == before

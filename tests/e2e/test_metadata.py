"""dataset.json's inputs and fingerprint; schema.pbtxt for TFX tools."""

import os
import re
import socket
import time

import pytest

import beam_tfrecords as btr



def _csv(path, rows):
  path.write_text("id,score,tags,pair\n" + "".join(
      f"{i},{i / 2},a|b,{i}|{-i}\n" for i in range(rows)))
  return str(path)


SIMPLE = {"name": "m", "features": {
    "id": {"type": "int64", "required": True}, "score": "float",
    "tags": {"type": "string", "shape": [-1], "separator": "|"},
    "pair": {"type": "float", "shape": [2], "separator": "|",
             "default": [0.0, 0.0]}}}


def test_inputs_are_listed_with_a_fingerprint(tmp_path):
  src = _csv(tmp_path / "a.csv", 5)
  first = btr.build(SIMPLE, src, str(tmp_path / "o1"))
  again = btr.build(SIMPLE, src, str(tmp_path / "o2"))
  inputs = first.info.inputs
  (entry,) = inputs.files
  assert entry.path == src and entry.num_bytes == os.path.getsize(src)
  assert entry.modified == pytest.approx(os.path.getmtime(src), abs=1)
  assert len(inputs.fingerprint) == 32
  assert again.info.inputs.fingerprint == inputs.fingerprint
  # Touching the file changes the fingerprint; so does another file.
  later = time.time() + 10
  os.utime(src, (later, later))
  touched = btr.build(SIMPLE, src, str(tmp_path / "o3"))
  assert touched.info.inputs.fingerprint != inputs.fingerprint


def test_schema_pbtxt_loads_with_tensorflow_metadata(tmp_path):
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2
  src = _csv(tmp_path / "a.csv", 5)
  result = btr.build(SIMPLE, src, str(tmp_path / "out"))
  with open(os.path.join(result.output, "schema.pbtxt")) as f:
    tfmd = text_format.Parse(f.read(), schema_pb2.Schema())
  by_name = {f.name: f for f in tfmd.feature}
  assert sorted(by_name) == ["id", "pair", "score", "tags"]
  assert by_name["id"].type == schema_pb2.INT
  assert by_name["id"].presence.min_fraction == 1.0
  assert by_name["id"].HasField("shape") and not by_name["id"].shape.dim
  assert by_name["score"].type == schema_pb2.FLOAT
  assert (by_name["score"].value_count.min,
          by_name["score"].value_count.max) == (1, 1)
  assert [d.size for d in by_name["pair"].shape.dim] == [2]
  assert by_name["tags"].type == schema_pb2.BYTES
  assert not by_name["tags"].HasField("value_count")
  assert result.info.tfmd_schema == "schema.pbtxt"


def test_tfx_bsl_reads_the_dataset_with_schema_pbtxt(tmp_path):
  """tfx-bsl's TFXIO (what TFDV and TFT read with) reads our shards with
  our schema.pbtxt into Arrow, value for value."""
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2
  from tfx_bsl.tfxio import tf_example_record
  import apache_beam as beam
  from apache_beam.testing.util import assert_that, equal_to
  src = _csv(tmp_path / "a.csv", 7)
  result = btr.build(SIMPLE, src, str(tmp_path / "out"), num_shards=2)
  with open(os.path.join(result.output, "schema.pbtxt")) as f:
    tfmd = text_format.Parse(f.read(), schema_pb2.Schema())
  tfxio = tf_example_record.TFExampleRecord(
      os.path.join(result.output, "train-*"), schema=tfmd)

  expected = [{"id": [i], "score": [i / 2], "tags": [b"a", b"b"],
               "pair": [float(i), float(-i)]} for i in range(7)]
  assert result.info.counts.rows_written == 7
  with beam.Pipeline() as p:
    rows = (p | tfxio.BeamSource()
            | beam.FlatMap(lambda batch: batch.to_pylist())
            | beam.Map(lambda r: (r["id"], r["score"], r["tags"], r["pair"])))
    assert_that(rows, equal_to([(e["id"], e["score"], e["tags"], e["pair"])
                                for e in expected]))


def test_text_defaults_are_written_to_dataset_json_and_load_back(tmp_path):
  """A string (or bytes) default of a column the input lacks: dataset.json
  holds the schema with its defaults as text, and it loads back equal."""
  (tmp_path / "in.csv").write_text("name\na\n")
  schema = {"name": "d", "features": {
      "name": {"type": "string"},
      "city": {"type": "string", "default": "Zürich"},
      "tags": {"type": "string", "shape": [2], "default": ["x", "y"]},
      "raw": {"type": "bytes", "default": "b"}}}
  out = str(tmp_path / "out")
  btr.build(schema, str(tmp_path / "in.csv"), out)
  assert list(btr.iter_records(out)) == [
      {"name": "a", "city": "Zürich", "tags": ["x", "y"], "raw": b"b"}]
  written = btr.dataset_info(out).schema
  assert written["features"]["city"]["default"] == "Zürich"
  assert written["features"]["tags"]["default"] == ["x", "y"]
  assert btr.load_schema(written) == btr.load_schema(schema)


def test_a_second_build_into_the_same_output_is_refused_while_one_runs(
    tmp_path, monkeypatch):
  """Two runs into one output at once (a scheduled job that overran): the
  one that comes second is refused while the first holds the lock; the
  first publishes its dataset, whole."""
  from beam_tfrecords.publish import finish as pipeline
  (tmp_path / "in.csv").write_text("x\n1\n2\n")
  (tmp_path / "other.csv").write_text("x\n3\n")
  schema = {"name": "d", "features": {"x": "int64"}}
  out = tmp_path / "out"
  refused = {}
  check = pipeline.check_thresholds

  def meanwhile(*args):
    # Another build starts while this one is about to publish.
    with pytest.raises(btr.OutputBusyError) as e:
      btr.build(schema, str(tmp_path / "other.csv"), str(out),
                overwrite=True)
    refused["message"] = str(e.value)
    return check(*args)

  monkeypatch.setattr(pipeline, "check_thresholds", meanwhile)
  btr.build(schema, str(tmp_path / "in.csv"), str(out))
  assert not (out / ".beam-tfrecords.lock").exists()
  assert re.fullmatch(
      rf"{out} is being built by another build \(run [0-9a-f]{{12}} on host "
      rf"{re.escape(socket.gethostname())}, pid {os.getpid()}, started "
      r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, lease renewed \d+ s ago; lock "
      rf"{out}/\.beam-tfrecords\.lock\)\. Two builds into one output would "
      r"mix their files: wait for it to end\. If it died, .*",
      refused["message"])
  assert sorted(r["x"] for r in btr.iter_records(str(out))) == [1, 2]

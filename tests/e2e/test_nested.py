"""Nested input: paths in `source` over JSON objects and Parquet structs,
lists of structs into aligned list features and into sequence steps.
Records are read back with TensorFlow's parsers and compared value for
value with the source data; JSON and Parquet give the same bytes."""

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

import beam_tfrecords as btr
from beam_tfrecords import InputError

from tests.helpers.records import tf_records as _tf_records
from tests.helpers.paths import ROOT
from tests.helpers.nested import PARQUET_TYPE, ROWS, _inputs


HERE = ROOT


EXAMPLES = {
    "name": "nested",
    "features": {
        "id": {"type": "int64", "required": True},
        "name": {"type": "string", "source": "user.name"},
        "city": {"type": "string", "source": "user.address.city",
                 "default": "?"},
        "movies": {"type": "int64", "shape": [-1],
                   "source": "ratings[].movie_id"},
        "scores": {"type": "float", "shape": [-1],
                   "source": "ratings[].score"},
        "tags": {"type": "string", "shape": [-1],
                 "source": "ratings[].tags[]"},
    },
}


def _expected(row):
  user = row["user"] or {}
  city = ((user.get("address") or {}).get("city")) or "?"
  ratings = row["ratings"] or []
  return {"id": [row["id"]],
          "name": [user["name"].encode()] if user.get("name") else [],
          "city": [city.encode()],
          "movies": [r["movie_id"] for r in ratings],
          "scores": [r["score"] for r in ratings],
          "tags": [t.encode() for r in ratings for t in (r["tags"] or [])]}


def tf_records(out):
  return _tf_records(tf, out)


def _parsed(out):
  spec = btr.feature_spec(out)
  got = []
  for record in tf_records(out):
    parsed = tf.io.parse_single_example(record, spec)
    row = {}
    for name, value in parsed.items():
      if isinstance(value, tf.sparse.SparseTensor):
        value = tf.sparse.to_dense(value)
      row[name] = np.asarray(value.numpy()).reshape(-1).tolist()
    got.append(row)
  return got


def test_paths_read_nested_json_and_parquet_into_the_same_records(tmp_path):
  jsonl, parquet = _inputs(tmp_path)
  a = btr.build(EXAMPLES, jsonl, str(tmp_path / "json"))
  b = btr.build(EXAMPLES, parquet, str(tmp_path / "parquet"))
  assert a.info.counts.records_written == len(ROWS)
  assert b.info.counts == a.info.counts
  from_json = list(tf_records(str(tmp_path / "json")))
  assert from_json == list(tf_records(str(tmp_path / "parquet")))
  # The lists read from ratings[] are aligned: dataset.json says so, and
  # the spec parses them as RaggedTensors (the same row lengths).
  assert a.info.aligned_lists == {"ratings[]": ["movies", "scores"]}
  spec = btr.feature_spec(str(tmp_path / "json"))
  assert isinstance(spec["movies"], tf.io.RaggedFeature)
  assert isinstance(spec["name"], tf.io.VarLenFeature)
  assert isinstance(spec["tags"], tf.io.VarLenFeature)  # ratings[].tags[]
  batch = tf.io.parse_example(tf.constant(from_json), spec)
  assert batch["movies"].row_lengths().numpy().tolist() == [2, 1, 0, 3]
  assert batch["scores"].row_lengths().numpy().tolist() == [2, 1, 0, 3]
  got = _parsed(str(tmp_path / "json"))
  for row, want in zip(got, [_expected(r) for r in ROWS]):
    assert row["id"] == want["id"]
    assert row["city"] == want["city"]
    assert row["movies"] == want["movies"]
    np.testing.assert_allclose(row["scores"], want["scores"])
    assert row["tags"] == want["tags"]
    assert row["name"] == want["name"] or (not want["name"]
                                           and row["name"] == [b""])


SEQUENCE = {
    "name": "ratings_seq",
    "record": "sequence_example",
    "context": {"id": {"type": "int64", "required": True},
                "length": {"derive": "length"}},
    "sequence": {"movie": {"type": "int64", "source": "ratings[].movie_id",
                           "required": True},
                 "score": {"type": "float", "source": "ratings[].score",
                           "required": True}},
}


def test_a_list_of_structs_gives_the_steps_of_the_same_records_as_rows(
    tmp_path):
  """One step per element of `ratings`: the same SequenceExamples, byte
  for byte, as the data flattened into rows and grouped by id."""
  rows = [r for r in ROWS if r["ratings"]]
  _, parquet = _inputs(tmp_path, rows)
  nested = btr.build(SEQUENCE, parquet, str(tmp_path / "nested"))
  flat = tmp_path / "flat.csv"
  flat.write_text("id,pos,movie,score\n" + "".join(
      f"{r['id']},{i},{x['movie_id']},{x['score']}\n"
      for r in rows for i, x in enumerate(r["ratings"])))
  grouped = dict(SEQUENCE, group_by="id",
                 order_by=[{"column": "pos", "type": "int64"}],
                 sequence={"movie": {"type": "int64", "required": True},
                           "score": {"type": "float", "required": True}})
  btr.build(grouped, str(flat), str(tmp_path / "grouped"))
  assert nested.info.counts.records_written == len(rows)
  assert list(tf_records(str(tmp_path / "nested"))) == \
      list(tf_records(str(tmp_path / "grouped")))


def test_a_json_row_whose_path_meets_a_non_object_names_file_and_row(
    tmp_path):
  src = tmp_path / "in.jsonl"
  src.write_text('{"user": {"name": "a"}}\n{"user": "b"}\n')
  schema = {"name": "bad", "features": {"name": {"type": "string",
                                                 "source": "user.name"}}}
  with pytest.raises(InputError) as e:
    btr.build(schema, str(src), str(tmp_path / "out"))
  assert f"{src}: row 2: the path 'user.name' reads .name of user, which " \
         "is str 'b', not an object" in str(e.value)


def test_a_key_with_dots_is_reachable_in_backticks(tmp_path):
  src = tmp_path / "in.jsonl"
  src.write_text('{"user.id": {"a.b": 7}}\n{"user.id": {}}\n')
  schema = {"name": "dots", "features": {"x": {"type": "int64",
                                               "source": "`user.id`.`a.b`",
                                               "default": -1}}}
  out = str(tmp_path / "out")
  btr.build(schema, str(src), out)
  assert [r["x"] for r in _parsed(out)] == [[7], [-1]]


def test_csv_headers_with_dots_stay_column_names(tmp_path):
  src = tmp_path / "in.csv"
  src.write_text("a.b,c[]\n1,2\n")
  schema = {"name": "csv", "features": {
      "x": {"type": "int64", "source": "a.b", "required": True},
      "y": {"type": "int64", "source": "c[]", "required": True}}}
  out = str(tmp_path / "out")
  btr.build(schema, str(src), out)
  assert _parsed(out) == [{"x": [1], "y": [2]}]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_infer_schema_proposes_a_path_per_leaf(tmp_path, fmt):
  from beam_tfrecords.inspect.infer import infer_schema
  jsonl, parquet = _inputs(tmp_path)
  text = infer_schema([jsonl if fmt == "jsonl" else parquet], fmt, "n")
  for line in ['"user_name": {type: string, source: "user.name"}',
               '"user_address_city": {type: string, source: '
               '"user.address.city"}',
               '"ratings_movie_id": {type: int64, source: '
               '"ratings[].movie_id", shape: [-1], required: true}',
               '"ratings_tags": {type: string, source: "ratings[].tags[]", '
               'shape: [-1], required: true}',
               "# ratings holds lists of objects: the features read from it "
               "are aligned lists (one value per object). For one step per "
               "object, make this `record: sequence_example`"]:
    assert line in text, text
  (tmp_path / "n.yaml").write_text(text)
  out = str(tmp_path / "out")
  btr.build(str(tmp_path / "n.yaml"), parquet, out)
  got = _parsed(out)
  assert [r["ratings_movie_id"] for r in got] == [
      [x["movie_id"] for x in r["ratings"]] for r in ROWS]


def test_the_bundled_detections_pipeline_keeps_boxes_with_their_labels(
    tmp_path):
  from pipelines import detections
  out = str(tmp_path / "out")
  detections.run(["--output", out])
  with open(os.path.join(HERE, "pipelines", "data", "detections.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  spec = btr.feature_spec(out)
  batch = tf.io.parse_example(tf.constant(tf_records(out)), spec)
  boxes = tf.stack([batch["ymin"], batch["xmin"], batch["ymax"],
                    batch["xmax"]], axis=-1)
  assert btr.dataset_info(out).aligned_lists == {
      "objects[]": ["label", "label_id", "xmax", "xmin", "ymax", "ymin"]}
  for i, row in enumerate(rows):
    objects = row["objects"]
    np.testing.assert_allclose(
        boxes[i].numpy().reshape(-1, 4),
        np.array([[o["bbox"][k] for k in ("ymin", "xmin", "ymax", "xmax")]
                  for o in objects], np.float32).reshape(-1, 4))
    assert batch["label"][i].numpy().tolist() == [
        o["label"].encode() for o in objects]
    assert batch["width"][i].numpy() == row["size"]["width"]


def test_group_by_order_by_and_splits_take_paths(tmp_path):
  rows = [{"u": {"id": i % 3}, "e": {"t": (i * 7) % 10, "v": i},
           "meta": {"split": "eval" if i % 5 == 0 else "train"}}
          for i in range(30)]
  src = tmp_path / "in.jsonl"
  src.write_text("".join(json.dumps(r) + "\n" for r in rows))
  schema = {"name": "g", "record": "sequence_example", "group_by": "u.id",
            "order_by": [{"column": "e.t", "type": "int64"}],
            "splits": {"hash": ["u.id"], "weights": {"a": 1, "b": 1}},
            "context": {"user": {"type": "int64", "source": "u.id"}},
            "sequence": {"v": {"type": "int64", "source": "e.v",
                               "required": True}}}
  out = str(tmp_path / "out")
  result = btr.build(schema, str(src), out)
  assert result.info.counts.records_written == 3
  spec = btr.feature_spec(out)
  got = {}
  for split in result.splits:
    for record in _tf_records(tf, out, split):
      context, sequence = tf.io.parse_single_sequence_example(record, *spec)
      got[int(context["user"])] = sequence["v"].numpy().reshape(-1).tolist()
  for user in range(3):
    mine = sorted((r["e"]["t"], r["e"]["v"]) for r in rows
                  if r["u"]["id"] == user)
    assert got[user] == [v for _, v in mine]


def test_lists_of_lists_flatten_in_order(tmp_path):
  """Parquet list<list<int64>>: `m[][]` is every value of every inner
  list, in order (a missing list: no values)."""
  table = pa.table({"m": pa.array([[[1, 2], [3]], [], None, [[4], [], [5]]],
                                  pa.list_(pa.list_(pa.int64())))})
  src = tmp_path / "in.parquet"
  pq.write_table(table, src)
  schema = {"name": "ll", "features": {
      "m": {"type": "int64", "shape": [-1], "source": "m[][]"}}}
  out = str(tmp_path / "out")
  btr.build(schema, str(src), out)
  assert [r["m"] for r in _parsed(out)] == [[1, 2, 3], [], [], [4, 5]]


@pytest.mark.slow
@pytest.mark.parametrize("elements", ["dicts", "record_batches"])
def test_write_dataset_resolves_paths_in_pcollection_elements(
    tmp_path, elements):
  """Nested dicts (or Arrow batches with struct columns) in a Beam
  pipeline: the same values as the same rows read from a file."""
  import apache_beam as beam
  out = str(tmp_path / "out")
  if elements == "dicts":
    items = ROWS
  else:
    table = pa.Table.from_pylist(ROWS, schema=PARQUET_TYPE)
    items = table.to_batches(max_chunksize=3)
  with beam.Pipeline() as p:
    _ = p | beam.Create(items) | btr.WriteDataset(EXAMPLES, out)
  got = sorted(_parsed(out), key=lambda r: r["id"])
  jsonl, _ = _inputs(tmp_path)
  btr.build(EXAMPLES, jsonl, str(tmp_path / "file"))
  assert got == sorted(_parsed(str(tmp_path / "file")),
                       key=lambda r: r["id"])


@pytest.mark.parametrize("case,reason", [
    ("object_without_the_field",
     'In feature "scores": the list has a null at position 1'),
    ("sequence_lists_of_different_lengths",
     'In feature "*": the feature lists differ in length: movie has 2 '
     'steps, v has 1 steps; give them the same length or declare ragged: '
     'true'),
])
def test_rows_whose_lists_cannot_stay_aligned_go_to_errors(
    tmp_path, case, reason):
  src = tmp_path / "in.json"  # a JSON array of objects
  rows = [{"id": 1, "ratings": [{"movie_id": 1, "score": 2.0},
                                {"movie_id": 2, "score": 3.0}],
           "other": [{"v": 1}, {"v": 2}]},
          {"id": 2, "ratings": [{"movie_id": 3, "score": 1.0},
                                {"movie_id": 4}],
           "other": [{"v": 3}]}]
  src.write_text(json.dumps(rows))
  if case == "object_without_the_field":
    schema = {"name": "a", "features": {
        "id": {"type": "int64", "required": True},
        "movies": {"type": "int64", "shape": [-1],
                   "source": "ratings[].movie_id"},
        "scores": {"type": "float", "shape": [-1],
                   "source": "ratings[].score"}}}
  else:
    schema = {"name": "s", "record": "sequence_example",
              "context": {"id": {"type": "int64", "required": True}},
              "sequence": {
                  "movie": {"type": "int64", "source": "ratings[].movie_id",
                            "required": True},
                  "v": {"type": "int64", "source": "other[].v",
                        "required": True}}}
  out = str(tmp_path / "out")
  result = btr.build(schema, str(src), out, max_bad_fraction=1.0)
  assert result.info.counts.rows_written == 1
  (error,) = list(btr.open(out).errors())
  assert error["row"] == 2
  assert error["reason"] == reason

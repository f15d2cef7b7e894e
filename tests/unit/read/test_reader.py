"""beam_tfrecords/read/reader.py on hand-made datasets (tf.train.Examples
serialized by TensorFlow's protos): what a dataset folder is, its
description, schema and shards, its records as plain Python values
(iter_records) and as tf.data parses them (load), its dead-letter rows,
and the errors that say what is wrong."""

import os

import numpy as np
import pytest

from beam_tfrecords import DatasetReplacedError, InputError, ShardDamagedError
from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.read.reader import (dataset_errors, dataset_info,
                                        dataset_schema, feature_spec,
                                        is_dataset, iter_records, load,
                                        shard_files, transform_output)
from beam_tfrecords.schema import load_schema

from tests.helpers.hand_made import (SUCCESS_TEXT, example, publish_over,
                                     sequence_example, write_dataset)

SCHEMA = {"name": "values", "label": "label", "features": {
    "id": {"type": "int64", "required": True},
    "label": {"type": "int64", "required": True},
    "score": {"type": "float"},
    "word": {"type": "string"},
    "blob": {"type": "bytes"},
    "tags": {"type": "string", "shape": [-1]},
    "pair": {"type": "float", "shape": [2]},
}}
# What went in: {feature: [values]}, a feature left out where it is
# missing; and what iter_records gives for it.
ROWS = [
    ({"id": [1], "label": [0], "score": [0.5], "word": ["é"],
      "blob": [b"\x00\xff"], "tags": ["a", "b"], "pair": [1.5, -2.0]},
     {"id": 1, "label": 0, "score": 0.5, "word": "é", "blob": b"\x00\xff",
      "tags": ["a", "b"], "pair": [1.5, -2.0]}),
    ({"id": [2], "label": [1], "tags": []},
     {"id": 2, "label": 1, "score": None, "word": None, "blob": None,
      "tags": [], "pair": None}),
    ({"id": [-2**63], "label": [1], "score": [0.0], "word": [""],
      "blob": [b""], "pair": [0.0, 0.0]},
     {"id": -2**63, "label": 1, "score": 0.0, "word": "", "blob": b"",
      "tags": None, "pair": [0.0, 0.0]}),
    ({"id": [2**63 - 1], "label": [0], "score": [3.4e38]},
     {"id": 2**63 - 1, "label": 0, "score": np.float32(3.4e38).item(),
      "word": None, "blob": None, "tags": None, "pair": None}),
]
ERRORS = [{"source": "in.csv", "row": 6, "rows": 1, "reason": "bad id",
           "problems": [{"feature": "id", "reason": "bad"}],
           "raw": {"id": "six"}},
          {"source": "in.csv", "row": 9, "rows": 1, "reason": "bad word",
           "problems": [], "raw": {"id": "9", "word": None}}]
SEQUENCES = {"name": "seq", "record": "sequence_example", "group_by": "user",
             "order_by": "t",
             "context": {"user": {"type": "string", "required": True}},
             "sequence": {"t": {"type": "int64", "required": True},
                          "clicks": {"type": "float", "shape": [-1]}}}


@pytest.fixture(scope="module")
def values(tmp_path_factory):
  """ROWS in train (2 shards: 3 records, 1), the first again in test;
  ERRORS in errors/."""
  records = [example(given) for given, _ in ROWS]
  return write_dataset(str(tmp_path_factory.mktemp("reader") / "ds"),
                       SCHEMA, {"train": [records[:3], records[3:]],
                                "test": [records[:1]]}, errors=ERRORS)


def test_is_dataset_is_a_folder_with_a_dataset_json(values, tmp_path):
  (tmp_path / "tfrecords").mkdir()
  (tmp_path / "tfrecords" / "a.tfrecord").write_bytes(b"")
  unfinished = write_dataset(str(tmp_path / "unfinished"), SCHEMA,
                             {"train": [[]]}, success=None)
  assert [is_dataset(p) for p in (values, values + "/", unfinished,
                                  str(tmp_path / "tfrecords"),
                                  str(tmp_path / "nothing"))] == [
      True, True, True, False, False]


def test_the_description_of_a_finished_dataset_and_its_generation(values):
  info = dataset_info(values + "/")
  assert info.generation == SUCCESS_TEXT
  assert {n: (s.num_records, s.num_shards) for n, s in info.splits.items()} \
      == {"train": (4, 2), "test": (1, 1)}
  assert info.label == ("label",)
  assert dataset_schema(values) == load_schema(SCHEMA)
  assert dataset_schema(values, info) == load_schema(SCHEMA)


def test_a_dataset_without_success_is_not_finished(tmp_path):
  out = write_dataset(str(tmp_path / "ds"), SCHEMA, {"train": [[]]},
                      success=None)
  with pytest.raises(InputError, match=(
      f"^{out} is not a finished dataset \\(no _SUCCESS file\\); its build "
      "failed, was killed or is still running$")):
    dataset_info(out)


def test_shard_files_are_a_splits_shards_in_order(values):
  assert shard_files(values) == [
      os.path.join(values, "train-00000-of-00002.tfrecord.gz"),
      os.path.join(values, "train-00001-of-00002.tfrecord.gz")]
  assert shard_files(values, "test") == [
      os.path.join(values, "test-00000-of-00001.tfrecord.gz")]
  with pytest.raises(InputError, match=(
      f"^{values} has no split 'eval'; it has \\['test', 'train'\\]$")):
    shard_files(values, "eval")


def test_iter_records_gives_the_values_that_went_in(values):
  assert list(iter_records(values)) == [want for _, want in ROWS]
  assert list(iter_records(values, "test")) == [ROWS[0][1]]
  with pytest.raises(InputError, match=f"^{values} has no split 'eval'"):
    list(iter_records(values, "eval"))


@pytest.mark.parametrize("shard,drop_remainder,ids", [
    ((0, 2), False, [1, 2]),
    ((1, 2), False, [-2**63, 2**63 - 1]),
    ((2, 3), False, [-2**63, 2**63 - 1]),
    ((2, 3), True, [-2**63]),
], ids=["first_half", "second_half", "last_third", "last_third_dropped"])
def test_iter_records_reads_a_ranks_share(values, shard, drop_remainder,
                                          ids):
  assert [r["id"] for r in iter_records(
      values, shard=shard, drop_remainder=drop_remainder)] == ids


def test_iter_records_in_a_seeded_order_is_the_same_every_time(values):
  orders = [[r["id"] for r in iter_records(values, shuffle_seed=seed,
                                           epoch=epoch, shuffle_buffer=2)]
            for seed, epoch in ((7, 0), (7, 0), (7, 1), (8, 0))]
  assert orders[0] == orders[1]
  assert all(sorted(o) == sorted(r["id"] for _, r in ROWS) for o in orders)
  assert len({tuple(o) for o in orders}) > 1


def test_iter_records_of_sequence_examples(tmp_path):
  records = [sequence_example({"user": ["ann"]},
                              {"t": [[1], [2]], "clicks": [[0.5, 1.0], []]}),
             sequence_example({"user": ["bo"]}, {"t": [[3]]})]
  out = write_dataset(str(tmp_path / "seq"), SEQUENCES, {"train": [records]})
  assert list(iter_records(out)) == [
      {"context": {"user": "ann"},
       "feature_lists": {"t": [1, 2], "clicks": [[0.5, 1.0], []]}},
      {"context": {"user": "bo"},
       "feature_lists": {"t": [3], "clicks": None}}]
  context, sequence = feature_spec(out)
  assert sorted(context) == ["user"] and sorted(sequence) == ["clicks", "t"]


def test_a_damaged_shard_stops_iter_records_naming_it(tmp_path):
  out = write_dataset(str(tmp_path / "ds"), SCHEMA, {"train": [
      [example(given) for given, _ in ROWS]]})
  shard = os.path.join(out, "train-00000-of-00001.tfrecord.gz")
  with open(shard, "r+b") as f:
    f.seek(40)
    byte = f.read(1)
    f.seek(40)
    f.write(bytes([byte[0] ^ 0xFF]))
  with pytest.raises(ShardDamagedError, match=f"^{shard}: "):
    list(iter_records(out))


def test_iter_records_of_a_replaced_dataset_never_mixes(tmp_path):
  """An overwrite published after the first record: the next file is
  refused (DatasetReplacedError); read again, the new records."""
  records = [example(given) for given, _ in ROWS]
  out = write_dataset(str(tmp_path / "ds"), SCHEMA, {"train": [
      records[:2], records[2:]]})
  it = iter_records(out)
  first = next(it)
  publish_over(out, SCHEMA, {"train": [records[3:], records[:1]]})
  with pytest.raises(DatasetReplacedError, match=(
      f"^{out} was replaced by a newer build while it was read")):
    list(it)
  assert first == ROWS[0][1]
  assert dataset_info(out).generation != SUCCESS_TEXT
  assert [r["id"] for r in iter_records(out)] == [2**63 - 1, 1]


def test_dataset_errors_are_the_dead_letter_rows_in_order(values):
  info = dataset_info(values)
  assert list(dataset_errors(values, info)) == ERRORS
  # The files its dataset.json lists, none other.
  none = DatasetInfo.from_json(dict(info.to_json(), errors={
      "rows": 0, "files": [], "reasons": []}))
  assert list(dataset_errors(values, none)) == []


def test_a_dataset_without_transform_has_no_transform_output(values):
  with pytest.raises(InputError, match=(
      f"^{values} has no transform \\(its schema has no `transform:` "
      "section\\)$")):
    transform_output(values)


def _numpy(tf, value):
  if isinstance(value, tf.SparseTensor):
    value = tf.sparse.to_dense(value)
  return value.numpy().tolist()


def _as_given(tf, parsed):
  """A parsed record as {feature: [values]} (strings as bytes)."""
  return {k: _numpy(tf, v) for k, v in sorted(parsed.items())}


def _given(values):
  out = {k: [v.encode() if isinstance(v, str) else v for v in vs]
         for k, vs in values.items()}
  for name in SCHEMA["features"]:
    out.setdefault(name, [])
  out["score"] = [np.float32(v).item() for v in out["score"]]
  return dict(sorted(out.items()))


def test_load_parses_what_went_in_with_tensorflow(tf, values):
  spec = feature_spec(values)
  assert spec["id"] == tf.io.FixedLenFeature([], tf.int64)
  assert spec["pair"] == tf.io.VarLenFeature(tf.float32)  # optional
  got = [_as_given(tf, r) for r in load(values)]
  want = [_given(given) for given, _ in ROWS]
  for row, given in zip(want, ROWS):
    row["id"], row["label"] = given[0]["id"][0], given[0]["label"][0]
  assert got == want
  batches = list(load(values, batch_size=3, decode=False))
  assert [b["id"].numpy().tolist() for b in batches] == [
      [1, 2, -2**63], [2**63 - 1]]


def test_load_as_supervised_splits_the_label_off(tf, values):
  pairs = [(features["id"].numpy(), label.numpy())
           for features, label in load(values, as_supervised=True)]
  assert pairs == [(1, 0), (2, 1), (-2**63, 1), (2**63 - 1, 0)]
  features, _ = next(iter(load(values, as_supervised=True)))
  assert "label" not in features


def test_load_as_supervised_needs_a_label(tf, tmp_path):
  schema = dict(SCHEMA)
  del schema["label"]
  out = write_dataset(str(tmp_path / "ds"), schema, {"train": [[example(
      ROWS[0][0])]]})
  with pytest.raises(InputError, match=(
      f"^{out}: the schema names no label, so there is nothing to return as "
      "the label; add label: <feature> to the schema and build again \\(or "
      "load without as_supervised\\)$")):
    load(out, as_supervised=True)
  with pytest.raises(InputError, match=(
      "^as_supervised reads the raw records' label; transformed=True reads "
      "TensorFlow Transform's outputs: split the label off them "
      "yourself$")):
    load(out, transformed=True, as_supervised=True)


def test_load_reads_a_ranks_share_and_a_seeded_order(tf, values):
  def ids(**kwargs):
    return [int(r["id"]) for r in load(values, **kwargs)]
  assert ids(shard=(1, 2)) == [-2**63, 2**63 - 1]
  seeded = ids(shuffle_seed=3, shuffle_buffer=4)
  assert seeded == ids(shuffle_seed=3, shuffle_buffer=4)
  assert sorted(seeded) == sorted(ids())

"""The user's own TensorFlow Transform preprocessing_fn (issue 33, part):
on real data (the Palmer penguins, CC0) the written records equal TFT's
own AnalyzeDataset on the training split and TransformDataset on the
others; TFX's serving recipe (raw_feature_spec, then
transform_features_layer) reproduces them; a function that cannot be
traced fails before anything runs."""

import csv
import json
import os
import pathlib

import numpy as np
import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError
from beam_tfrecords.read.reader import is_dataset

from tests.helpers.preprocessing_fn import SCHEMA, penguins_fns
from tests.helpers.records import tf_read


PENGUINS = pathlib.Path(__file__).resolve().parents[1] / "data" / "penguins" / \
    "penguins.csv"
USED = ("species", "island", "bill_length_mm", "flipper_length_mm",
        "body_mass_g", "sex")


def _rows():
  """The penguins with every used value, numbered."""
  with open(PENGUINS) as f:
    rows = [r for r in csv.DictReader(f) if all(r[k] for k in USED)]
  return [dict({k: r[k] for k in USED}, row=i) for i, r in enumerate(rows)]


def _serialized(out, split, transformed=False):
  """The serialized records of a split's shards, in shard order."""
  import glob
  import tensorflow as tf
  folder = os.path.join(out, "transformed") if transformed else out
  files = sorted(glob.glob(os.path.join(folder, f"{split}-*.tfrecord.gz")))
  assert files, (folder, split)
  return tf_read(tf, files)


def _parsed(records, spec):
  import tensorflow as tf
  parsed = tf.io.parse_example(tf.constant(records), spec)
  return {k: (tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor)
              else v).numpy() for k, v in parsed.items()}


def _by_row(columns):
  rows = columns["row"].reshape(-1)
  return {k: {int(r): np.asarray(v[i]).reshape(-1) for i, r in
              enumerate(rows)} for k, v in columns.items()}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("penguins_tft")
  rows = _rows()
  src = tmp / "penguins.csv"
  with open(src, "w", newline="") as f:
    w = csv.DictWriter(f, ["row"] + list(USED))
    w.writeheader()
    w.writerows(rows)
  out = str(tmp / "out")
  btr.build(SCHEMA, str(src), out,
            preprocessing_fn=penguins_fns().preprocessing_fn)
  return rows, out, tmp


def _reference(rows, train_ids, eval_ids, tmp):
  """TFT itself: AnalyzeDataset on the training rows, TransformDataset
  on the others (instance dicts, TFT's in-memory input)."""
  import apache_beam as beam
  import tensorflow as tf
  import tensorflow_transform.beam as tft_beam
  from tensorflow_transform.tf_metadata import dataset_metadata, \
      schema_utils
  spec = {"row": tf.io.FixedLenFeature([], tf.int64),
          "species": tf.io.FixedLenFeature([], tf.string),
          "island": tf.io.FixedLenFeature([], tf.string),
          "bill_length_mm": tf.io.FixedLenFeature([], tf.float32),
          "flipper_length_mm": tf.io.FixedLenFeature([], tf.int64),
          "body_mass_g": tf.io.FixedLenFeature([], tf.int64),
          "sex": tf.io.FixedLenFeature([], tf.string)}
  metadata = dataset_metadata.DatasetMetadata(
      schema_utils.schema_from_feature_spec(spec))

  def instance(r):
    return {"row": r["row"], "species": r["species"].encode(),
            "island": r["island"].encode(),
            "bill_length_mm": np.float32(r["bill_length_mm"]),
            "flipper_length_mm": int(r["flipper_length_mm"]),
            "body_mass_g": int(r["body_mass_g"]),
            "sex": r["sex"].encode()}
  train = [instance(r) for r in rows if r["row"] in train_ids]
  other = [instance(r) for r in rows if r["row"] in eval_ids]
  with beam.Pipeline() as p, tft_beam.Context(temp_dir=str(tmp / "ref")):
    fn = ((p | "Train" >> beam.Create(train), metadata)
          | tft_beam.AnalyzeDataset(penguins_fns().preprocessing_fn))
    for name, data in (("train", train), ("eval", other)):
      (out, _) = (((p | f"Data{name}" >> beam.Create(data), metadata), fn)
                  | f"Transform{name}" >> tft_beam.TransformDataset())
      _ = (out
           | f"Json{name}" >> beam.Map(lambda x: json.dumps(
               {k: np.asarray(v).reshape(-1).tolist() for k, v in x.items()}))
           | f"Write{name}" >> beam.io.WriteToText(
               str(tmp / "ref" / name), shard_name_template=""))
  got = {}
  for name in ("train", "eval"):
    with open(tmp / "ref" / name) as f:
      got[name] = [json.loads(line) for line in f]
  return got


@pytest.mark.slow
def test_the_records_are_tfts_own_values(built):
  rows, out, tmp = built
  import tensorflow_transform as tft
  spec = tft.TFTransformOutput(out).transformed_feature_spec()
  ours = {split: _by_row(_parsed(_serialized(out, split, True), spec))
          for split in ("train", "eval")}
  ids = {split: set(ours[split]["row"]) for split in ours}
  assert ids["train"] and ids["eval"]
  assert ids["train"] | ids["eval"] == {r["row"] for r in rows}
  reference = _reference(rows, ids["train"], ids["eval"], tmp)
  for split in ("train", "eval"):
    want = {int(x["row"][0]): {k: np.asarray(v) for k, v in x.items()}
            for x in reference[split]}
    assert set(want) == ids[split]
    for name in ("bill_z", "mass_centered"):
      for row, value in ours[split][name].items():
        np.testing.assert_allclose(value, want[row][name], rtol=1e-6,
                                   atol=1e-6, err_msg=f"{split} {name}")
    for name in ("island_id", "flipper_bucket", "species_island"):
      for row, value in ours[split][name].items():
        assert int(value[0]) == int(want[row][name][0]), (split, name, row)
  # tft.mean used as a constant: the training rows' mean, as numpy says.
  train_mass = np.array([r["body_mass_g"] for r in rows
                         if r["row"] in ids["train"]], np.float64)
  some = next(iter(ids["train"]))
  mass = {r["row"]: int(r["body_mass_g"]) for r in rows}[some]
  assert ours["train"]["mass_centered"][some][0] == pytest.approx(
      mass - train_mass.mean(), abs=1e-3)


@pytest.mark.slow
def test_tfx_serving_recipe_reproduces_the_records(built):
  """raw_feature_spec() minus the label, parse serialized raw Examples,
  transform_features_layer(): exactly the written transformed records."""
  import tensorflow as tf
  import tensorflow_transform as tft
  rows, out, _ = built
  output = tft.TFTransformOutput(out)
  raw_spec = output.raw_feature_spec()
  raw_spec.pop("sex")  # the label: not there when serving
  layer = output.transform_features_layer()
  served = layer(tf.io.parse_example(tf.constant(
      _serialized(out, "eval")), raw_spec))
  served = _by_row({k: (tf.sparse.to_dense(v) if isinstance(
      v, tf.SparseTensor) else v).numpy() for k, v in served.items()})
  written = _by_row(_parsed(_serialized(out, "eval", True),
                            output.transformed_feature_spec()))
  assert set(served) == set(written)
  for name in written:
    for row, value in written[name].items():
      np.testing.assert_array_equal(served[name][row], value,
                                    err_msg=name)


@pytest.mark.slow
def test_the_schema_names_the_function_and_merges_declared_features(
    tmp_path):
  src = tmp_path / "p.csv"
  rows = _rows()[:60]
  with open(src, "w", newline="") as f:
    w = csv.DictWriter(f, ["row"] + list(USED))
    w.writeheader()
    w.writerows(rows)
  schema = dict(SCHEMA, transform={
      "preprocessing_fn": "tft_penguins:preprocessing_fn",
      "features": {"sex_id": {"compute_and_apply_vocabulary": "sex"}}})
  result = btr.build(schema, str(src), str(tmp_path / "out"))
  spec = result.info.transform.feature_spec
  assert {"bill_z", "island_id", "sex_id", "row"} <= set(spec)
  assert btr.dataset_info(str(tmp_path / "out")).schema["transform"][
      "preprocessing_fn"] == "tft_penguins:preprocessing_fn"
  clash = dict(SCHEMA, transform={
      "preprocessing_fn": "tft_penguins:preprocessing_fn",
      "features": {"bill_z": {"scale_to_z_score": "bill_length_mm"}}})
  with pytest.raises(InputError, match="bill_z.*rename one"):
    btr.build(clash, str(src), str(tmp_path / "clash"))
  with pytest.raises(btr.SchemaError, match="MODULE:FUNCTION"):
    btr.build(dict(SCHEMA, transform={"preprocessing_fn": "a/b.py"}),
              str(src), str(tmp_path / "bad"))


def test_a_function_that_fails_on_a_batch_fails_the_build(tmp_path,
                                                          caplog):
  """Traced fine, fails on the data: the build fails with TensorFlow's
  message and nothing is published."""
  src = tmp_path / "p.csv"
  with open(src, "w", newline="") as f:
    w = csv.DictWriter(f, ["row"] + list(USED))
    w.writeheader()
    w.writerows(_rows())
  out = tmp_path / "out"
  with pytest.raises(Exception, match="too heavy"):
    btr.build(SCHEMA, str(src), str(out),
              preprocessing_fn=penguins_fns().fails_on_a_batch)
  assert not (out / "_SUCCESS").exists()
  assert not is_dataset(str(out))
  # The log's one-line summary carries TensorFlow's message.
  assert any("nothing was published" in r.message and "too heavy" in
             r.message for r in caplog.records)


def test_a_closure_builds_and_what_cannot_take_one_is_refused(tmp_path):
  """A function given as an object need not have an importable name (a
  closure, as a notebook makes); a SequenceExample schema and a
  transform without the analyzed split are refused before anything
  runs."""
  src = tmp_path / "p.csv"
  with open(src, "w", newline="") as f:
    w = csv.DictWriter(f, ["row"] + list(USED))
    w.writeheader()
    w.writerows(_rows()[:60])

  def make(scale):
    def fn(inputs):
      out = penguins_fns().preprocessing_fn(inputs)
      out["bill_scaled"] = inputs["bill_length_mm"] * scale
      return out
    return fn

  result = btr.build(SCHEMA, str(src), str(tmp_path / "out"),
                     preprocessing_fn=make(2.0))
  assert "bill_scaled" in result.info.transform.feature_spec
  assert result.info.schema["transform"]["preprocessing_fn"].endswith(
      ":test_a_closure_builds_and_what_cannot_take_one_is_refused."
      "<locals>.make.<locals>.fn")
  no_train = dict(SCHEMA, splits={"hash": "row",
                                  "weights": {"a": 0.5, "b": 0.5}})
  with pytest.raises(btr.SchemaError, match="analyze_split"):
    btr.build(no_train, str(src), str(tmp_path / "no_train"),
              preprocessing_fn=make(1.0))
  assert not (tmp_path / "no_train").exists()

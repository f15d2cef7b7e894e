"""`build --tfds` (issue 34, part 6): TensorFlow Datasets'
builder_from_directory reads the dataset (uncompressed shards, TFDS's
dataset_info.json and features.json), every value equal to what this
package's readers give; what TFDS cannot express is refused, saying so.
Real TFDS (the `tfds` extra; CI installs it)."""

import os
import pathlib

import numpy as np
import pytest

if os.environ.get("BTR_REQUIRE_EXTRAS"):
  import tensorflow_datasets as tfds
else:
  tfds = pytest.importorskip("tensorflow_datasets")

import beam_tfrecords as btr  # noqa: E402
from beam_tfrecords import InputError  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
PENGUINS = ROOT / "tests" / "data" / "penguins" / "penguins.csv"
SCHEMA = {
    "name": "penguins",
    "splits": {"hash": "species", "weights": {"train": 0.8, "test": 0.2}},
    "features": {
        "species": {"type": "string", "required": True},
        "island": {"type": "bytes", "required": True},
        "bill_length_mm": {"type": "float", "default": 0.0},
        "body_mass_g": {"type": "int64", "default": 0},
        "sex": {"type": "string", "shape": [-1]},
    },
}
IMAGES = {
    "name": "shapes",
    "max_bad_fraction": 0.2,  # the bundled table names one lost file
    "features": {
        "image": {"type": "image", "source": "name", "required": True,
                  "convert": "rgb", "encode": "png"},
        "label": {"type": "int64", "required": True},
    },
}


def _tfds_records(path, split):
  builder = tfds.builder_from_directory(path)
  # One file at a time: the shards' order (TFDS interleaves by default).
  return list(tfds.as_numpy(builder.as_dataset(
      split=split, read_config=tfds.ReadConfig(interleave_cycle_length=1))))


def _plain(value, text=True):
  """A TFDS value as iter_records gives it (`text`: a string feature's
  bytes as str; a bytes feature's stay bytes)."""
  if isinstance(value, bytes):
    return value.decode("utf-8") if text else value
  if isinstance(value, np.ndarray) and value.dtype == object:
    return [_plain(v, text) for v in value.tolist()]
  if isinstance(value, np.ndarray):
    return value.tolist()
  return value.item() if hasattr(value, "item") else value


def test_tfds_reads_every_value(tmp_path):
  out = str(tmp_path / "penguins")
  btr.build(SCHEMA, str(PENGUINS), out, tfds=True, num_shards=2)
  names = sorted(os.listdir(out))
  assert "dataset_info.json" in names and "features.json" in names
  assert "train-00000-of-00002.tfrecord" in names
  assert not [n for n in names if n.endswith(".gz")]
  builder = tfds.builder_from_directory(out)
  info = btr.dataset_info(out)
  assert {k: v.num_examples for k, v in builder.info.splits.items()} == {
      k: s.num_records for k, s in info.splits.items()}
  for split in ("train", "test"):
    want = list(btr.iter_records(out, split))
    got = _tfds_records(out, split)
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
      # TFDS has no missing values: an absent list reads as empty.
      assert {k: _plain(v, k != "island") for k, v in g.items()} == {
          k: [] if v is None else v for k, v in w.items()}
  # This package's readers read it too.
  loaded = [int(x["body_mass_g"]) for x in btr.load(out, "train")]
  assert loaded == [r["body_mass_g"] for r in btr.iter_records(out)]


def test_tfds_decodes_the_images(tmp_path):
  out = str(tmp_path / "shapes")
  btr.build(IMAGES, str(ROOT / "pipelines" / "data" / "image_labels.csv"),
            out, tfds=True)
  import tensorflow as tf
  want = list(btr.iter_records(out, "train"))
  got = _tfds_records(out, "train")
  assert len(got) == len(want) > 0
  for g, w in zip(got, want):
    assert g["label"] == w["label"]
    pixels = tf.io.decode_png(w["image"], channels=3).numpy()
    assert g["image"].shape == pixels.shape and g["image"].shape[2] == 3
    assert np.array_equal(g["image"], pixels)


def test_what_tfds_cannot_express_is_refused(tmp_path):
  src = str(PENGUINS)
  optional = dict(SCHEMA, features=dict(SCHEMA["features"], body_mass_g={
      "type": "int64"}))
  with pytest.raises(InputError, match=r"no missing values, and feature "
                     r"'body_mass_g' may be missing"):
    btr.build(optional, src, str(tmp_path / "a"), tfds=True)
  sequences = {"name": "s", "record": "sequence_example",
               "sequence": {"bill_length_mm": {"type": "float"}}}
  with pytest.raises(InputError, match="no SequenceExample feature"):
    btr.build(sequences, src, str(tmp_path / "b"), tfds=True)
  stored = dict(IMAGES, features=dict(IMAGES["features"], image={
      "type": "image", "source": "name", "required": True}))
  with pytest.raises(InputError, match="give image 'image' encode: png"):
    btr.build(stored, str(ROOT / "pipelines" / "data" / "image_labels.csv"),
              str(tmp_path / "c"), tfds=True)
  with pytest.raises(InputError, match="drop --shuffle-seed"):
    btr.build(SCHEMA, src, str(tmp_path / "d"), tfds=True, shuffle_seed=1)
  assert not any((tmp_path / d).exists() for d in "abcd")

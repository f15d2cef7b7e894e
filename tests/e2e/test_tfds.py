"""`build --tfds` (issue 34, part 6): TensorFlow Datasets'
builder_from_directory reads the dataset (uncompressed shards, TFDS's
dataset_info.json and features.json), every value equal to what this
package's readers give; what TFDS cannot express is refused, saying so.
Real TFDS (the `tfds` extra; CI installs it)."""

import os

import numpy as np
import pytest

import beam_tfrecords as btr  # noqa: E402

from tests.helpers.tfds import IMAGES, PENGUINS, ROOT, SCHEMA


if os.environ.get("BTR_REQUIRE_EXTRAS"):
  import tensorflow_datasets as tfds
else:
  tfds = pytest.importorskip("tensorflow_datasets")


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

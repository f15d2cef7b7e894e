"""beam_tfrecords/sinks/tfds_files.py, on values: A dataset TensorFlow Datasets
reads (`build --tfds`)."""

import os

import pytest

import beam_tfrecords as btr  # noqa: E402
from beam_tfrecords import InputError  # noqa: E402

from tests.helpers.tfds import IMAGES, PENGUINS, ROOT, SCHEMA


if os.environ.get("BTR_REQUIRE_EXTRAS"):
  import tensorflow_datasets as tfds
else:
  tfds = pytest.importorskip("tensorflow_datasets")


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

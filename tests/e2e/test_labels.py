"""A schema's label (issue 18): recorded in dataset.json, and
load(as_supervised=True) / make_batched_features_dataset(label_key=...)
give (features, label) pairs."""

import numpy as np
import pytest

import beam_tfrecords as btr

from tests.helpers.records import shard_paths
from tests.helpers.labels import SCHEMA


ROWS = [(50.0 + i, 1 + i % 4, 1000.0 * (i + 1)) for i in range(30)]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
  root = tmp_path_factory.mktemp("labels")
  (root / "in.csv").write_text("size,rooms,price\n" + "".join(
      f"{s},{r},{p}\n" for s, r, p in ROWS))
  out = str(root / "out")
  btr.build(SCHEMA, str(root / "in.csv"), out)
  return out


def test_the_label_is_recorded(dataset):
  info = btr.dataset_info(dataset)
  assert info.label == ("price",)
  assert info.schema["label"] == "price"


def test_as_supervised_gives_features_and_label(tf, dataset):
  pairs = list(btr.load(dataset, as_supervised=True))
  assert len(pairs) == 30
  got = sorted((float(f["size"]), int(f["rooms"]), float(label))
               for f, label in pairs)
  assert got == sorted(ROWS)
  assert all(set(f) == {"size", "rooms"} for f, _ in pairs)
  batched = next(iter(btr.load(dataset, batch_size=8, as_supervised=True)))
  assert batched[1].shape == (8,)


def test_make_batched_features_dataset_with_the_label_key(tf, dataset):
  info = btr.dataset_info(dataset)
  ds = tf.data.experimental.make_batched_features_dataset(
      file_pattern=shard_paths(dataset), batch_size=30,
      features=btr.feature_spec(dataset), label_key=info.label[0],
      reader=lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"),
      num_epochs=1, shuffle=False)
  features, label = next(iter(ds))
  np.testing.assert_array_equal(np.sort(label.numpy()),
                                np.array([p for _, _, p in ROWS], np.float32))
  assert "price" not in features


def test_as_supervised_without_a_label_says_what_to_do(tmp_path):
  (tmp_path / "in.csv").write_text("size\n1\n")
  out = str(tmp_path / "out")
  btr.build({"name": "n", "features": {"size": "float"}},
            str(tmp_path / "in.csv"), out)
  with pytest.raises(btr.InputError, match="the schema names no label"):
    btr.load(out, as_supervised=True)

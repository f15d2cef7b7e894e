"""The seeds' use cases, built by pipelines/ and read back as the seeds do."""

import csv
import os

import numpy as np

from pipelines import movie_ratings, structured_columns

from conftest import shard_paths, tf_parse, tf_records

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_seed_001_movie_ratings(tf, tmp_path):
  out = str(tmp_path / "movies")
  result = movie_ratings.run(["--output", out])
  with open(os.path.join(HERE, "pipelines", "data", "movie_ratings.csv"),
            encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  assert result.metadata["counts"]["records_written"] == len(rows) == 200
  # The seed's read_features, with its FixedLen / VarLen choices.
  spec = {
      "age": tf.io.FixedLenFeature([], dtype=tf.int64),
      "movies": tf.io.VarLenFeature(dtype=tf.string),
      "ratings": tf.io.VarLenFeature(dtype=tf.float32),
      "suggestion": tf.io.FixedLenFeature([], dtype=tf.string),
      "suggestion_purchased": tf.io.FixedLenFeature([], dtype=tf.float32),
      "price": tf.io.FixedLenFeature([], dtype=tf.float32),
  }
  parsed = tf_parse(tf, tf_records(tf, out), spec)
  first = next(p for p in parsed if p["age"] == 29 and
               p["suggestion"] == b"Inception")
  assert list(first["movies"]) == [b"The Shawshank Redemption", b"Fight Club"]
  np.testing.assert_array_equal(first["ratings"],
                                np.array([9.0, 9.7], np.float32))
  assert first["price"] == np.float32(9.99)
  assert sorted(int(p["age"]) for p in parsed) == sorted(
      int(r["Age"]) for r in rows)
  assert sum(float(p["price"]) for p in parsed) == sum(
      float(np.float32(r["Purchase Price"] or 0.0)) for r in rows)


def test_seed_003_make_batched_features_dataset(tf, tmp_path):
  import beam_tfrecords as btr
  out = str(tmp_path / "structured")
  structured_columns.run(["--output", out, "--num-shards", "2"])
  ds = tf.data.experimental.make_batched_features_dataset(
      file_pattern=shard_paths(out), batch_size=64,
      features=btr.feature_spec(out),
      reader=lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"),
      label_key="label", num_epochs=1, shuffle=False)
  labels, ints, strs = [], [], []
  for features, label in ds:
    labels.extend(label.numpy().tolist())
    ints.extend(features["int_col"].numpy().tolist())
    strs.extend(features["str_col"].numpy().tolist())
  import json
  with open(os.path.join(HERE, "pipelines", "data", "structured.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  assert sorted(labels) == sorted(r["label"].encode() for r in rows)
  assert sorted(ints) == sorted(r.get("int_col", -1) for r in rows)
  assert ints.count(-1) >= 30  # every 10th row had no int_col: the default
  assert sorted(strs) == sorted(r["str_col"].encode() for r in rows)

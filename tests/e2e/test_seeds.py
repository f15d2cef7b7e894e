"""The seeds' use cases, built by pipelines/ and read back as the seeds do."""

import csv
import json
import os

import numpy as np
from pipelines import (image_files, image_pixels, movie_ratings,
                       structured_columns, tokens_labels, user_events)

import beam_tfrecords as btr

from tests.helpers.records import shard_paths, tf_parse, tf_records
from tests.helpers.paths import ROOT
HERE = ROOT


def test_seed_001_movie_ratings(tf, tmp_path):
  out = str(tmp_path / "movies")
  result = movie_ratings.run(["--output", out])
  with open(os.path.join(HERE, "pipelines", "data", "movie_ratings.csv"),
            encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  assert result.info.counts.records_written == len(rows) == 200
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
  with open(os.path.join(HERE, "pipelines", "data", "structured.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  assert sorted(labels) == sorted(r["label"].encode() for r in rows)
  assert sorted(ints) == sorted(r.get("int_col", -1) for r in rows)
  assert ints.count(-1) >= 30  # every 10th row had no int_col: the default
  assert sorted(strs) == sorted(r["str_col"].encode() for r in rows)


def test_seed_000_tokens_and_labels(tf, tmp_path):
  out = str(tmp_path / "tokens")
  result = tokens_labels.run(["--output", out])
  with open(os.path.join(HERE, "pipelines", "data", "tokens_labels.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  assert result.info.counts.records_written == len(rows) == 300
  assert result.info.counts.steps_written == sum(
      len(r["tokens"]) for r in rows)
  # The seed's own parsing specs.
  context_features = {"length": tf.io.FixedLenFeature([], dtype=tf.int64)}
  sequence_features = {
      "tokens": tf.io.FixedLenSequenceFeature([], dtype=tf.int64),
      "labels": tf.io.FixedLenSequenceFeature([], dtype=tf.int64)}
  got = []
  for record in tf_records(tf, out):
    context, sequence = tf.io.parse_single_sequence_example(
        record, context_features, sequence_features)
    got.append((sequence["tokens"].numpy().tolist(),
                sequence["labels"].numpy().tolist(),
                int(context["length"])))
  # One shard, written in input order by the DirectRunner.
  assert sorted(got) == sorted((r["tokens"], r["labels"], len(r["tokens"]))
                               for r in rows)
  assert ([1, 2, 3], [0, 1, 0], 3) in got


def test_event_log_grouped_by_user_in_time_order(tf, tmp_path):
  out = str(tmp_path / "events")
  result = user_events.run(["--output", out])
  with open(os.path.join(HERE, "pipelines", "data", "user_events.csv")) as f:
    rows = list(csv.DictReader(f))
  counts = result.info.counts
  users = {r["user_id"] for r in rows}
  # User 13 has 400 events; max_length 100 with keep_last drops 300.
  assert counts.to_json() == {"rows_read": len(rows), "rows_written": len(rows) - 300,
                    "rows_rejected": 0, "rows_dropped": 300,
                    "records_written": len(users),
                    "steps_written": len(rows) - 300, "steps_dropped": 300}
  seen = set()
  for context, sequence in btr.load(out):
    user = int(context["user_id"])
    seen.add(user)
    mine = sorted((r for r in rows if int(r["user_id"]) == user),
                  key=lambda r: int(r["timestamp"]))
    if user == 13:
      mine = mine[-100:]
    ts = sequence["timestamp"].numpy().tolist()
    assert ts == [int(r["timestamp"]) for r in mine]
    assert sorted(zip(ts, sequence["event"].numpy().tolist(),
                      sequence["item"].numpy().tolist())) == sorted(
        (int(r["timestamp"]), r["event"].encode(), int(r["item_id"]))
        for r in mine)
    assert int(context["length"]) == len(mine)
    assert int(context["first_ts"]) == ts[0]
    assert int(context["last_ts"]) == ts[-1]
    assert context["country"].numpy() == mine[0]["country"].encode()
  assert seen == {int(u) for u in users}


def test_seed_002_image_pixels_shape_and_label(tf, tmp_path):
  """Raw pixels + shape + label, rebuilt with decode_raw + reshape."""
  out = str(tmp_path / "pixels")
  result = image_pixels.run(["--output", out])
  assert result.info.vocabularies == {
      "label": ["circle", "square", "triangle"]}
  shapes = os.path.join(HERE, "pipelines", "data", "shapes")
  seen = 0
  for raw in tf_records(tf, out):
    x = tf.io.parse_single_example(raw, btr.feature_spec(out))
    image = tf.reshape(tf.io.decode_raw(x["image"], tf.uint8), tf.stack(
        [x["image_height"], x["image_width"], x["image_channels"]]))
    name = x["filename"].numpy().decode()
    with open(os.path.join(shapes, name), "rb") as f:
      data = f.read()
    # The pixels TensorFlow decodes (JPEG: its accurate integer IDCT, which
    # Pillow uses too; TensorFlow's default fast one differs by a few).
    expected = (tf.io.decode_png(data, channels=3) if name.endswith(".png")
                else tf.io.decode_jpeg(data, channels=3,
                                       dct_method="INTEGER_ACCURATE"))
    assert np.array_equal(image.numpy(), expected.numpy())
    assert x["label"].numpy().decode() == name.split("/")[0]
    assert int(x["label_index"]) == ["circle", "square", "triangle"].index(
        name.split("/")[0])
    seen += 1
  assert seen == 24


def test_seed_003_image_files_with_a_missing_one(tf, tmp_path):
  out = str(tmp_path / "files")
  result = image_files.run(["--output", out])
  assert result.rows_rejected == 1
  errors = list(btr.open(out).errors())
  assert errors[0]["raw"]["name"] == "shapes/circle/lost.png"
  assert "lost.png: no such file" in errors[0]["reason"]
  ds = tf.data.experimental.make_batched_features_dataset(
      file_pattern=shard_paths(out), batch_size=8,
      features=btr.feature_spec(out),
      reader=lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"),
      label_key="label", num_epochs=1, shuffle=False)
  data = os.path.join(HERE, "pipelines", "data")
  with open(os.path.join(data, "image_labels.csv")) as f:
    rows = [r for r in csv.DictReader(f) if "lost" not in r["name"]]
  got = []
  for features, label in ds:
    for image, height, lab in zip(features["image"].numpy(),
                                  features["image_height"].numpy(),
                                  label.numpy()):
      got.append((image, int(height), int(lab)))
  expected = []
  for r in rows:
    with open(os.path.join(data, r["name"]), "rb") as f:
      expected.append((f.read(), 32, int(r["label"])))
  assert got == expected  # the files, byte for byte, in table order

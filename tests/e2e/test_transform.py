"""TensorFlow Transform from the schema: the written values against values
computed here with numpy on the training split, and the saved
transform_fn against the written records."""

import collections
import json
import os
import random

import numpy as np
import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError, SchemaError

from tests.helpers.records import tf_records
from tests.helpers.transform import SCHEMA


TITLES = {"Heat": 9, "Up": 7, "Jaws": 5, "Alien": 3, "Fargo": 2}  # weights


def _ratings(path, rows=3000, seed=1):
  """user,title,rating,ts,split; the eval rows include a title the
  training rows never have (an out-of-vocabulary value)."""
  rng = random.Random(seed)
  titles = [t for t, w in TITLES.items() for _ in range(w)]
  out = []
  with open(path, "w") as f:
    f.write("user,title,rating,ts,split\n")
    for i in range(rows):
      split = "eval" if i % 5 == 0 else "train"
      title = "Brazil" if split == "eval" and i % 7 == 0 else \
          rng.choice(titles)
      row = (f"u{rng.randrange(80)}", title, rng.randint(1, 5) + (
          rng.random() if i % 2 else 0.0), rng.randrange(10**6), split)
      out.append(row)
      f.write(",".join(str(v) for v in row) + "\n")
  return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("tft")
  rows = _ratings(tmp / "r.csv")
  result = btr.build(SCHEMA, str(tmp / "r.csv"), str(tmp / "out"))
  return rows, result


def _transformed(tf, output, split):
  out = collections.defaultdict(list)
  for x in btr.load(output, split, transformed=True):
    for k, v in x.items():
      out[k].append(v.numpy())
  return {k: np.array(v) for k, v in out.items()}


@pytest.mark.slow
def test_values_match_numpy_on_the_training_split(built, tf):
  rows, result = built
  train = [r for r in rows if r[4] == "train"]
  ratings = np.array([r[2] for r in train], dtype=np.float32).astype(
      np.float64)
  mean, std = ratings.mean(), ratings.std()  # population std, as TFT
  lo, hi = ratings.min(), ratings.max()
  counts = collections.Counter(r[1] for r in train)
  vocab = [t for t, _ in sorted(counts.items(), key=lambda kv: -kv[1])]
  assert len(set(counts.values())) == len(counts)  # no ties in the order
  ts = np.array([r[3] for r in train])
  for split in ("train", "eval"):
    part = [r for r in rows if r[4] == split]
    got = _transformed(tf, result.output, split)
    x = np.array([r[2] for r in part], dtype=np.float32).astype(np.float64)
    np.testing.assert_allclose(got["rating_z"], (x - mean) / std,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["rating_01"], (x - lo) / (hi - lo),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["rating_raw"], x.astype(np.float32))
    expected_ids = [vocab.index(r[1]) if r[1] in vocab else len(vocab)
                    for r in part]  # one OOV bucket after the vocabulary
    np.testing.assert_array_equal(got["title_id"], expected_ids)
    hashed = tf.strings.to_hash_bucket_fast([r[0] for r in part], 10)
    np.testing.assert_array_equal(got["user_hash"], hashed.numpy())
    if split == "eval":
      assert (got["title_id"] == len(vocab)).sum() == sum(
          r[1] == "Brazil" for r in part) > 0
    else:
      # Quartiles of the training timestamps (TFT's quantiles are
      # approximate: nearly every row lands where numpy's would put it).
      bounds = np.quantile(ts, [0.25, 0.5, 0.75])
      expected = np.searchsorted(bounds, ts, side="right")
      assert (got["ts_bucket"] == expected).mean() > 0.98
      shares = np.bincount(got["ts_bucket"], minlength=4) / len(ts)
      assert np.all(np.abs(shares - 0.25) < 0.02), shares
  tft_out = btr.open(result.output).transform_output()
  with open(tft_out.vocabulary_file_by_name("title_id")) as f:
    assert [line.strip() for line in f] == vocab


@pytest.mark.slow
def test_the_saved_transform_gives_the_written_records(built, tf):
  """transform_fn applied in TensorFlow to the raw records == the written
  transformed records, record by record (same order)."""
  _, result = built
  tft_out = btr.open(result.output).transform_output()
  raw_spec = btr.feature_spec(result.output)
  for split in ("train", "eval"):
    raw = tf_records(tf, result.output, split)
    parsed = tf.io.parse_example(raw, raw_spec)
    applied = tft_out.transform_raw_features(parsed)
    written = _transformed(tf, result.output, split)
    assert len(raw) == len(written["rating_z"])
    for name, values in written.items():
      np.testing.assert_array_equal(applied[name].numpy(), values)
    # The Keras layer for serving does the same.
    layer = tft_out.transform_features_layer()
    served = layer(parsed)
    np.testing.assert_array_equal(served["title_id"].numpy(),
                                  written["title_id"])
  # TFT's standard layout, listed in dataset.json.
  assert os.path.isdir(os.path.join(result.output, "transform_fn"))
  assert os.path.isdir(os.path.join(result.output, "transformed_metadata"))
  meta = result.info
  assert all(os.path.exists(os.path.join(result.output, f))
             for f in meta.transform.files)
  assert meta.transform.splits["train"].num_records == \
      meta.splits["train"].num_records


@pytest.mark.slow
def test_transformed_only_and_the_same_bytes(built, tmp_path, tf):
  """keep_raw: false, built by 2 worker processes: only the transformed
  splits, and the same transformed records as the module's build (raw
  records kept, one process)."""
  rows, kept = built
  schema = dict(SCHEMA, transform=dict(SCHEMA["transform"], keep_raw=False))
  one = btr.build(schema, os.path.join(os.path.dirname(kept.output),
                                       "r.csv"), str(tmp_path / "one"),
                  beam_args=["--direct_num_workers=2",
                             "--direct_running_mode=multi_processing"])
  assert one.info.splits == {}
  assert not [f for f in os.listdir(one.output) if f.endswith(".gz")]
  t = one.info.transform.splits
  assert t["train"].num_records + t["eval"].num_records == len(rows)
  # Every file checks, and croissant.json names the transformed splits
  # (no preview: the records are TensorFlow Transform's).
  assert btr.verify(one.output).ok
  with open(os.path.join(one.output, "croissant.json")) as f:
    described = json.load(f)
  assert [r["@id"] for r in described["recordSet"]] == ["splits"]
  assert [d["splits/name"] for d in described["recordSet"][0]["data"]] == [
      "eval", "train"]
  assert {e["@id"] for e in described["distribution"]
          if e["@type"] == "cr:FileSet"} == {"shards-transformed/eval",
                                             "shards-transformed/train"}
  mlc = pytest.importorskip("mlcroissant")
  mlc.Dataset(jsonld=os.path.join(one.output, "croissant.json"))  # valid
  with open(os.path.join(one.output, "README.md")) as f:
    card = f.read()
  assert "| train (transformed) | " in card
  assert 'btr.load(".", split="train", transformed=True)' in card
  # (That a rebuild writes the same transformed bytes: the bundled TFT
  # pipeline's are pinned, tests/e2e/test_bundled_bytes.py.)
  # Other workers: TFT's analyzers add floats in another order (the last
  # bits of a mean may differ); the records are the same otherwise.
  for split in ("train", "eval"):
    a = _transformed(tf, kept.output, split)
    b = _transformed(tf, one.output, split)
    assert sorted(a) == sorted(b)
    for name in a:
      np.testing.assert_allclose(a[name], b[name], rtol=1e-6, atol=1e-6)
  with pytest.raises(InputError, match="no split 'train'"):
    btr.load(one.output, "train")  # no raw records kept


def test_bundled_tft_pipeline(tmp_path, tf, capsys):
  from pipelines import movie_ratings_tft
  result = movie_ratings_tft.run(["--output", str(tmp_path / "tft")])
  t = result.info.transform
  assert t.splits["train"].num_records + t.splits["eval"].num_records \
      == 1000
  assert sorted(t.feature_spec) == ["rating", "rating_z", "time_bucket",
                                       "title_hash", "title_id", "user_id"]
  batch = next(iter(btr.load(result.output, "eval", batch_size=500,
                             transformed=True)))
  assert set(batch["time_bucket"].numpy()) <= set(range(8))
  assert abs(float(tf.reduce_mean(batch["rating_z"]))) < 0.3
  from beam_tfrecords import cli
  capsys.readouterr()
  assert cli.main(["inspect", result.output, "--records", "1"]) == 0
  shown = capsys.readouterr().out
  assert "transformed split train:" in shown and "rating_z" in shown


@pytest.mark.slow
def test_review_cases(tmp_path, tf, capsys):
  """int64 sources keep their precision; an empty analyze split fails;
  reserved names and non-text sources are schema errors; validate checks
  the transformed records."""
  rng = random.Random(4)
  big = [1_700_000_000 + rng.randint(0, 200) for _ in range(400)]
  src = tmp_path / "b.csv"
  src.write_text("big,split\n" + "".join(
      f"{b},{'eval' if i % 4 == 0 else 'train'}\n" for i, b in enumerate(big)))
  schema = {"name": "b", "splits": {"column": "split",
                                    "values": ["train", "eval"]},
            "features": {"big": {"type": "int64", "required": True}},
            "transform": {"features": {
                "big_z": {"scale_to_z_score": "big"},
                "big_01": {"scale_to_0_1": "big"}}}}
  result = btr.build(schema, str(src), str(tmp_path / "out"))
  train = np.array([b for i, b in enumerate(big) if i % 4], np.float64)
  got = _transformed(tf, result.output, "train")
  np.testing.assert_allclose(got["big_z"],
                             (train - train.mean()) / train.std(), atol=1e-5)
  np.testing.assert_allclose(got["big_01"], (train - train.min()) /
                             (train.max() - train.min()), atol=1e-6)
  from beam_tfrecords import cli
  capsys.readouterr()
  assert cli.main(["validate", "--schema", str(tmp_path / "b.yaml"),
                   result.output]) in (0, 2)
  import yaml
  (tmp_path / "b.yaml").write_text(yaml.safe_dump(schema))
  assert cli.main(["validate", "--schema", str(tmp_path / "b.yaml"),
                   result.output]) == 0
  assert "400 transformed records checked against the transformed " \
      "feature spec: 0 do not parse" in capsys.readouterr().out
  # Nothing in the analyzed split: refused, nothing published.
  only_eval = tmp_path / "e.csv"
  only_eval.write_text("big,split\n1,eval\n2,eval\n")
  with pytest.raises(InputError, match="the split 'train' that TensorFlow "
                     "Transform analyzes has no records"):
    btr.build(schema, str(only_eval), str(tmp_path / "empty"))
  assert not os.path.exists(tmp_path / "empty" / "_SUCCESS")
  for bad, message in (
      ({"__btr_row__": {"pass": "big"}}, "reserved"),
      ({"x": {"scale_to_z_score": ["big"]}}, "is not a stored feature")):
    with pytest.raises(SchemaError, match=message):
      btr.load_schema(dict(schema, transform={"features": bad}))


@pytest.mark.slow
def test_a_transform_build_reads_csv_in_smaller_blocks(built, tmp_path):
  # Its process holds TensorFlow: 1 MiB CSV batches, against 2 MiB for a
  # build without transform; a block size the user gives is kept, and
  # other formats get none.
  import json
  from beam_tfrecords.sources import plan_inputs
  from beam_tfrecords.sources.csv import CSV_DEFAULTS, TRANSFORM_BLOCK_SIZE
  _, result = built
  with open(os.path.join(result.output, "dataset.json")) as f:
    options = json.load(f)["options"]["format_options"]
  assert options["block_size"] == TRANSFORM_BLOCK_SIZE == 1 << 20
  assert CSV_DEFAULTS["block_size"] == 2 << 20
  src = tmp_path / "r.csv"
  _ratings(src, rows=20)
  columns = ["user", "title", "rating", "ts", "split"]
  assert plan_inputs([str(src)], columns).format_options["block_size"] == 2 << 20
  assert plan_inputs([str(src)], columns, block_size=1 << 20).format_options[
      "block_size"] == 1 << 20
  assert plan_inputs([str(src)], columns, format_options={"block_size": 4096},
                     block_size=1 << 20).format_options["block_size"] == 4096
  # (Still refused: an option CSV does not take.)
  with pytest.raises(InputError, match="--tfrecord-compression is for "
                     "TFRecord input; these files are csv"):
    plan_inputs([str(src)], columns, format_options={"compression": "GZIP"},
                block_size=1 << 20)
  jsonl = tmp_path / "r.jsonl"
  jsonl.write_text('{"user": "u1", "rating": 2.0}\n')
  assert "block_size" not in plan_inputs(
      [str(jsonl)], ["user", "rating"], block_size=1 << 20).format_options

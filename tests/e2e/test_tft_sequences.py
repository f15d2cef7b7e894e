"""TensorFlow Transform on SequenceExamples (issue 33, part 3): real
penguins grouped into sequences (one per species, island and year, the
birds in row order), declared analyzers and the user's preprocessing_fn
analyzed on the training split, every split transformed. Each per-step
value is checked against numpy over the raw training steps; each
transformed record is the transform of the raw record at the same
place."""

import csv
import pathlib

import numpy as np
import pytest

import beam_tfrecords as btr
from beam_tfrecords.read.reader import dataset_info, iter_transformed

from tests.helpers.preprocessing_fn import penguins_fns
from tests.helpers.tft_sequences import SCHEMA


PENGUINS = pathlib.Path(__file__).resolve().parents[1] / "data" / "penguins" / \
    "penguins.csv"


def _write(path):
  """The penguins with every value the schema reads; 2009 is eval."""
  with open(PENGUINS) as f:
    rows = [r for r in csv.DictReader(f)
            if r["body_mass_g"] and r["flipper_length_mm"] and r["sex"]]
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["row", "split", "species", "island", "year", "body_mass_g",
                "flipper_length_mm", "sex"])
    for i, r in enumerate(rows):
      w.writerow([i, "eval" if r["year"] == "2009" else "train",
                  r["species"], r["island"], r["year"], r["body_mass_g"],
                  r["flipper_length_mm"], r["sex"]])
  return len(rows)


def _pairs(out):
  """{split: [(raw record, transformed record)]}, in shard order."""
  info = dataset_info(out)
  pairs = {}
  for split in ("train", "eval"):
    raw = list(btr.iter_records(out, split))
    done = [r for shard in info.transform.splits[split].shards
            for r in iter_transformed(out, shard)]
    assert len(raw) == len(done) > 0
    pairs[split] = list(zip(raw, done))
  return pairs


def _vocab(values):
  """TFT's vocabulary order: most frequent first, ties by the value's
  bytes (an integer's digits), last first."""
  counts = {}
  for v in values:
    counts[v] = counts.get(v, 0) + 1
  return sorted(counts, key=lambda v: (counts[v], str(v).encode()),
                reverse=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("tft_sequences")
  n = _write(tmp / "penguins.csv")
  out = str(tmp / "out")
  btr.build(SCHEMA, str(tmp / "penguins.csv"), out,
            preprocessing_fn=penguins_fns().sequence_fn)
  return out, n


@pytest.mark.slow
def test_per_step_values_equal_numpy_over_the_training_steps(built):
  out, n = built
  pairs = _pairs(out)
  steps = sum(len(r["feature_lists"]["mass"]) for p in pairs.values()
              for r, _ in p)
  assert steps == n
  train = [r for r, _ in pairs["train"]]
  mass = np.array([v for r in train for v in r["feature_lists"]["mass"]],
                  dtype=np.float64)
  flipper = np.array([v for r in train
                      for v in r["feature_lists"]["flipper"]])
  sexes = _vocab([v for r in train for v in r["feature_lists"]["sex"]])
  islands = _vocab([r["context"]["island"] for r in train])
  upper = _vocab([v.upper() for r in train
                  for v in r["feature_lists"]["sex"]])
  for split, found in pairs.items():
    for raw, done in found:
      x = np.array(raw["feature_lists"]["mass"], dtype=np.float64)
      f = np.array(raw["feature_lists"]["flipper"], dtype=np.float64)
      lists, context = done["feature_lists"], done["context"]
      np.testing.assert_allclose(
          [s[0] for s in lists["mass_z"]], (x - mass.mean()) / mass.std(),
          rtol=1e-5, atol=1e-5)
      np.testing.assert_allclose(
          [s[0] for s in lists["flipper_01"]],
          (f - flipper.min()) / (flipper.max() - flipper.min()), atol=1e-6)
      np.testing.assert_allclose(
          [s[0] for s in lists["mass_centered"]], x - mass.mean(),
          rtol=1e-5, atol=1e-3)
      assert [s[0] for s in lists["sex_id"]] == [
          sexes.index(v) if v in sexes else -1
          for v in raw["feature_lists"]["sex"]]
      assert [s[0] for s in lists["sex_upper_id"]] == [
          upper.index(v.upper()) for v in raw["feature_lists"]["sex"]]
      # Context outputs: one value per sequence.
      assert context["island_id"] == [islands.index(
          raw["context"]["island"])]
      assert context["year"] == [raw["context"]["year"]]
      assert context["steps"] == [len(x)]
      assert context["island_lower"] == [
          raw["context"]["island"].lower().encode()]


@pytest.mark.slow
def test_transformed_sequences_parse_with_the_recorded_spec(built):
  import tensorflow as tf
  out, _ = built
  spec = dataset_info(out).transform.feature_spec
  assert spec["context"]["steps"]["kind"] == "FixedLenFeature"
  assert spec["sequence"]["mass_z"] == {
      "kind": "FixedLenSequenceFeature", "shape": [], "dtype": "float32",
      "allow_missing": True}
  context, lists = next(iter(btr.load(out, "eval", transformed=True)))
  first = next(iter(btr.iter_records(out, "eval")))
  assert int(context["steps"]) == lists["mass_z"].shape[0] == len(
      first["feature_lists"]["mass"])
  assert lists["sex_id"].dtype == tf.int64
  batch = next(iter(btr.load(out, "train", transformed=True,
                             batch_size=4)))
  assert batch[1]["mass_z"].shape[0] == 4
  from beam_tfrecords.inspect.check import validate_transformed
  assert validate_transformed(out).ok


def test_sequences_from_lists_take_a_transform(tmp_path):
  """No group_by: each row's list cells are its steps (the bundled
  tokens_labels data); a token vocabulary and a derived context feature."""
  root = pathlib.Path(__file__).resolve().parents[2]
  schema = btr.load_schema(str(root / "schemas" / "tokens_labels.yaml"))
  raw = dict(schema.to_dict(), transform={"features": {
      "token_id": {"compute_and_apply_vocabulary": "tokens"},
      "labels": {"pass": "labels"}, "length": {"pass": "length"}}})
  out = str(tmp_path / "out")
  btr.build(raw, str(root / "pipelines" / "data" / "tokens_labels.jsonl"),
            out)
  rows = list(btr.iter_records(out, "train"))
  vocab = _vocab([t for r in rows for t in r["feature_lists"]["tokens"]])
  shards = dataset_info(out).transform.splits["train"].shards
  done = [r for shard in shards for r in iter_transformed(out, shard)]
  assert len(done) == len(rows) > 0
  for r, d in zip(rows, done):
    assert [s[0] for s in d["feature_lists"]["token_id"]] == [
        vocab.index(t) for t in r["feature_lists"]["tokens"]]
    assert [s[0] for s in d["feature_lists"]["labels"]] == r[
        "feature_lists"]["labels"]
    assert d["context"]["length"] == [r["context"]["length"]]


def test_int64_steps_past_32_bits_are_analyzed_and_transformed_whole(
    tmp_path):
  """Epoch milliseconds (past 2**31) in a feature list: the analysis sees
  them whole (tfx-bsl's sequence decoder keeps 32 bits:
  read.sequence_batches makes them whole) and the transform passes them
  and scales them from their true range."""
  src = tmp_path / "events.csv"
  ts = [1_700_000_000_000 + 1_000 * i for i in range(6)]
  src.write_text("user,ts\n" + "".join(
      f"{'ab'[i % 2]},{t}\n" for i, t in enumerate(ts)))
  out = str(tmp_path / "out")
  btr.build({"name": "events", "record": "sequence_example",
             "group_by": {"column": "user", "type": "string"},
             "order_by": "ts",
             "context": {"user": {"type": "string"}},
             "sequence": {"ts": {"type": "int64", "required": True}},
             "transform": {"features": {"ts": {"pass": "ts"},
                                        "ts_01": {"scale_to_0_1": "ts"}}}},
            str(src), out)
  info = dataset_info(out)
  done = [r for shard in info.transform.splits["train"].shards
          for r in iter_transformed(out, shard)]
  # (a step's values: a list of one)
  got = sorted(v for r in done for step in r["feature_lists"]["ts"]
               for v in step)
  assert got == ts
  scaled = sorted(v for r in done for step in r["feature_lists"]["ts_01"]
                  for v in step)
  assert scaled == pytest.approx([(t - ts[0]) / (ts[-1] - ts[0])
                                  for t in ts], abs=1e-6)

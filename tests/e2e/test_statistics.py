"""Per-feature statistics in dataset.json, from the same pass."""

import collections
import json
import random

import numpy as np
import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.info import Span
from beam_tfrecords.encoding.stats import FINE_LEVEL_STAT, FINE_STAT


def test_statistics_match_values_computed_here(tmp_path):
  rng = random.Random(5)
  rows = []
  for i in range(5000):
    rows.append({"n": rng.randint(-50, 50) if i % 10 else None,
                 "x": rng.random() * 10,
                 "c": rng.choice(["a", "b", "b", "c", "c", "c"]),
                 "l": [rng.randint(0, 9) for _ in range(rng.randint(0, 4))]})
  src = tmp_path / "s.csv"
  src.write_text("n,x,c,l,split\n" + "".join(
      f"{'' if r['n'] is None else r['n']},{r['x']!r},{r['c']},"
      f"{'|'.join(map(str, r['l']))},{'train' if i % 4 else 'eval'}\n"
      for i, r in enumerate(rows)))
  schema = {"name": "s", "splits": {"column": "split",
                                    "values": ["train", "eval"]},
            "features": {"n": "int64", "x": "float", "c": "string",
                         "l": {"type": "int64", "shape": [-1],
                               "separator": "|"}}}
  result = btr.build(schema, str(src), str(tmp_path / "out"))
  got = result.info.statistics["train"]
  train = [r for i, r in enumerate(rows) if i % 4]
  ns = [r["n"] for r in train if r["n"] is not None]
  assert got["n"].present == len(ns)
  assert got["n"].missing == len(train) - len(ns)
  assert (got["n"].min, got["n"].max) == (min(ns), max(ns))
  assert got["n"].mean == pytest.approx(sum(ns) / len(ns))
  xs = np.array([r["x"] for r in train], dtype=np.float32).astype(float)
  assert got["x"].mean == pytest.approx(xs.mean())
  assert got["x"].max == float(xs.max())
  top = collections.Counter(r["c"] for r in train).most_common()
  assert got["c"].top == tuple((v, n) for v, n in top)
  assert got["c"].top_exact is True
  # An empty unquoted CSV cell is missing, not an empty list.
  lengths = [len(r["l"]) for r in train if r["l"]]
  assert got["l"].list_length == Span(min(lengths), max(lengths))
  assert got["l"].values == sum(lengths)
  assert got["l"].missing == len(train) - len(lengths)
  assert result.info.statistics["eval"]["c"].present == 1250


def test_sequence_statistics_of_feature_lists_and_context(tmp_path):
  """List-column sequences: the written records, exactly (a too-long
  sequence split into two, a rejected row left out)."""
  rng = random.Random(9)
  rows = []
  for u in range(300):
    n = rng.randint(0, 6)
    rows.append({"u": u, "items": [rng.choice("abcd") for _ in range(n)],
                 "s": [round(rng.uniform(-5, 5), 2) for _ in range(n)]})
  rows[7]["s"] = rows[7]["s"][:-1] if rows[7]["s"] else [1.0]  # lengths differ
  rows.append({"u": 999, "items": ["z"] * 9, "s": [0.5] * 9})  # split in 2
  src = tmp_path / "s.jsonl"
  src.write_text("".join(json.dumps(r) + "\n" for r in rows))
  schema = {"name": "seq", "record": "sequence_example", "max_length": 6,
            "overflow": "split",
            "context": {"u": "int64", "n": {"derive": "length"}},
            "sequence": {"items": "string", "s": "float"}}
  result = btr.build(schema, str(src), str(tmp_path / "out"))
  assert result.rows_rejected == 1
  got = result.info.statistics["train"]
  assert result.info.statistics_of == "the written records"
  kept = [r for i, r in enumerate(rows) if i != 7]
  # The records: one per row, the long one as 6 + 3 steps.
  records = [(r["u"], r["items"], r["s"]) for r in kept[:-1]]
  records += [(999, ["z"] * 6, [0.5] * 6), (999, ["z"] * 3, [0.5] * 3)]
  assert got["u"].present == len(records)
  assert got["n"].max == 6 and got["n"].min == 0
  assert got["n"].mean == pytest.approx(
      sum(len(i) for _, i, _ in records) / len(records))
  # A row with no steps has empty lists: present, 0 steps.
  assert got["items"].present == len(records)
  assert got["items"].steps == Span(min(len(i) for _, i, _ in records),
                                    max(len(i) for _, i, _ in records))
  assert got["items"].values == sum(len(i) for _, i, _ in records)
  top = collections.Counter(v for _, i, _ in records for v in i)
  assert got["items"].top == tuple(sorted(
      top.items(), key=lambda kv: (-kv[1], kv[0])))[:10]
  values = [v for _, _, s in records for v in s]
  f32 = np.array(values, dtype=np.float32).astype(float)
  assert (got["s"].min, got["s"].max) == (f32.min(), f32.max())
  assert got["s"].mean == pytest.approx(f32.mean())


def test_grouped_sequence_statistics_describe_the_rows_read(tmp_path):
  src = tmp_path / "e.csv"
  src.write_text("user,t,item\n1,2,b\n1,1,a\n2,1,a\n3,5,c\n3,6,c\n3,7,a\n"
                 "4,1,x\n")
  schema = {"name": "seq", "record": "sequence_example", "group_by": "user",
            "order_by": [{"column": "t", "type": "int64"}],
            "max_length": 2, "overflow": "keep_first",
            "context": {"user": {"type": "int64", "required": True}},
            "sequence": {"item": "string"}}
  result = btr.build(schema, str(src), str(tmp_path / "out"))
  got = result.info.statistics["train"]
  assert result.info.statistics_of.startswith("rows read into steps")
  # Every row that became a step, including the one keep_first dropped.
  assert got["item"].values == 7
  assert got["item"].top == (("a", 3), ("c", 2), ("b", 1), ("x", 1))
  assert (got["user"].min, got["user"].max) == (1, 4)
  assert result.info.counts.steps_dropped == 1


def test_split_sequences_with_a_record_too_big(tmp_path):
  """overflow: split + max_record_bytes: the row whose piece is too big
  goes to errors/ whole; the statistics describe the rest."""
  rows = [{"u": 1, "t": ["a"] * 4}, {"u": 2, "t": ["x" * 900] * 3},
          {"u": 3, "t": ["b"]}]
  src = tmp_path / "s.jsonl"
  src.write_text("".join(json.dumps(r) + "\n" for r in rows))
  schema = {"name": "seq", "record": "sequence_example", "max_length": 2,
            "overflow": "split", "max_record_bytes": "1KiB",
            "context": {"u": "int64"}, "sequence": {"t": "string"}}
  result = btr.build(schema, str(src), str(tmp_path / "out"),
                     max_bad_fraction=1.0)
  assert result.rows_rejected == 1
  assert [e["row"] for e in btr.open(result.output).errors()] == [2]
  got = result.info.statistics["train"]
  assert got["u"].present == 3  # 2 pieces of row 1, row 3
  assert got["t"].top == (("a", 4), ("b", 1))
  assert got["t"].steps == Span(1, 2)


def test_statistics_can_be_left_out(tmp_path):
  src = tmp_path / "s.csv"
  src.write_text("n\n1\n2\n")
  schema = {"name": "s", "features": {"n": "int64"}}
  on = btr.build(schema, str(src), str(tmp_path / "on"))
  off = btr.build(schema, str(src), str(tmp_path / "off"), statistics=False)
  assert on.info.statistics["train"]["n"].max == 2
  assert off.info.statistics is None
  assert off.info.options.statistics is False
  import yaml
  from beam_tfrecords import cli
  (tmp_path / "s.yaml").write_text(yaml.safe_dump(schema))
  assert cli.main(["build", "--schema", str(tmp_path / "s.yaml"), "--input",
                   str(src), "--output", str(tmp_path / "cli"),
                   "--no-statistics"]) == 0
  assert btr.dataset_info(str(tmp_path / "cli")).statistics is None


def _inside(values: np.ndarray, low: float, high: float) -> int:
  """The values in a histogram bucket: [low, high) above zero, (low,
  high] below (the mirror), (low, high) across it, [0, 0] for zero."""
  if low == high:
    return int((values == low).sum())
  above = values >= low if low >= 0 else values > low
  below = values <= high if high <= 0 else values < high
  return int((above & below).sum())


@pytest.mark.slow
def test_statistics_pb_is_tfdv_format_with_exact_histograms(tmp_path):
  """statistics.pb parses as TensorFlow Metadata's
  DatasetFeatureStatisticsList (what tfdv.load_stats_binary reads); its
  counts, moments, top values and histogram buckets equal what the source
  data gives, split by split, also with 2 worker processes."""
  from tensorflow_metadata.proto.v0 import statistics_pb2
  rng = random.Random(7)
  rows = [{"n": rng.randint(-500, 500) if i % 9 else None,
           "x": rng.lognormvariate(0, 2) * (1 if i % 3 else -1),
           "c": rng.choice(["a", "bb", "bb", "ccc"]),
           "split": "train" if i % 4 else "eval"} for i in range(6000)]
  src = tmp_path / "s.csv"
  src.write_text("n,x,c,split\n" + "".join(
      f"{'' if r['n'] is None else r['n']},{r['x']!r},{r['c']},{r['split']}\n"
      for r in rows))
  schema = {"name": "s", "splits": {"column": "split",
                                    "values": ["train", "eval"]},
            "features": {"n": "int64", "x": "float", "c": "string"}}
  outs = []
  for name, args in (("one", None), ("two", [
      "--direct_num_workers=2", "--direct_running_mode=multi_processing"])):
    out = tmp_path / name
    btr.build(schema, str(src), str(out), beam_args=args)
    outs.append((out / "statistics.pb").read_bytes())
    assert btr.dataset_info(str(out)).tfdv_statistics == "statistics.pb"
  assert outs[0] == outs[1]  # the same bytes on any number of workers
  stats = statistics_pb2.DatasetFeatureStatisticsList()
  stats.ParseFromString(outs[0])
  assert [d.name for d in stats.datasets] == ["eval", "train"]
  for dataset in stats.datasets:
    part = [r for r in rows if r["split"] == dataset.name]
    assert dataset.num_examples == len(part)
    features = {f.path.step[0]: f for f in dataset.features}
    assert set(features) == {"n", "x", "c"}
    for name in ("n", "x"):
      values = np.array([r[name] for r in part if r[name] is not None],
                        np.float64)
      if name == "x":
        values = values.astype(np.float32).astype(np.float64)
      num = features[name].num_stats
      assert num.common_stats.num_non_missing == len(values)
      assert num.common_stats.num_missing == len(part) - len(values)
      assert num.mean == pytest.approx(values.mean(), rel=1e-12)
      assert num.std_dev == pytest.approx(values.std(), rel=1e-9)
      assert num.num_zeros == int((values == 0).sum())
      assert (num.min, num.max) == (values.min(), values.max())
      standard, quantiles = num.histograms
      assert (standard.type, quantiles.type) == (
          statistics_pb2.Histogram.STANDARD,
          statistics_pb2.Histogram.QUANTILES)
      fine = {c.name: c for c in features[name].custom_stats}
      assert fine[FINE_LEVEL_STAT].num > 0
      for hist in (standard, quantiles, fine[FINE_STAT].histogram):
        assert sum(b.sample_count for b in hist.buckets) == len(values)
        for b in hist.buckets:
          assert b.sample_count == _inside(values, b.low_value,
                                           b.high_value), (name, b)
      assert len(quantiles.buckets) == 10
    text = features["c"].string_stats
    counts = collections.Counter(r["c"] for r in part)
    assert text.unique == len(counts)
    assert [(t.value, t.frequency) for t in text.top_values] == sorted(
        counts.items(), key=lambda kv: (-kv[1], kv[0]))
    assert text.avg_length == pytest.approx(
        sum(len(r["c"]) for r in part) / len(part))

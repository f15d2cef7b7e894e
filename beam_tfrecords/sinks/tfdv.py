"""The build's statistics as statistics.pb, TensorFlow Metadata's
`DatasetFeatureStatisticsList`, one dataset per split, the format
TensorFlow Data Validation reads (`tfdv.load_stats_binary`) for its
schema inference, anomaly checks and Facets view.

Everything comes from the build's one statistics pass (encoding.stats):
counts, value-count ranges, mean and standard deviation rounded once from
exact sums,
zeros, min / max, histograms, top values of text (exact where
`top_exact`), average length.

A number's histograms (encoding.histogram; exact counts, the same on any
number of workers) are TFDV's two: a STANDARD one of about 20 bars of a
round width and a QUANTILES one of 10 bars of about equal counts (each
bar a union of fine buckets: exact counts, edges that are bucket edges),
and the fine buckets themselves as the custom statistic FINE_STAT (its
level as FINE_LEVEL_STAT), which the report compares splits and
baselines on.
"""

from typing import Any, Dict

from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.core.layout import STATISTICS_FILE
from beam_tfrecords.encoding import histogram
from beam_tfrecords.encoding.stats import (FINE_LEVEL_STAT, FINE_STAT, plain,
                                           STEPS_STAT, TOP_SHOWN, mean, std_dev)

__all__ = ["statistics_bytes"]

_NUMERIC = ("int64", "float")


def _feature_types(schema: Dict[str, Any]) -> Dict[str, str]:
  """{feature: schema type} of every feature a schema dict declares."""
  types = {}
  for section in ("features", "context", "sequence"):
    for name, entry in (schema.get(section) or {}).items():
      kind = entry.get("type") if isinstance(entry, dict) else entry
      types[name] = kind or ("int64" if isinstance(entry, dict) and
                             entry.get("derive") == "length" else "float")
  return types


def _common(common, s: dict) -> None:
  common.num_non_missing = s["present"]
  common.num_missing = s["missing"]
  common.tot_num_values = s["values"]
  if s.get("present"):
    common.min_num_values = s.get("len_min", 0)
    common.max_num_values = s.get("len_max", 0)
    common.avg_num_values = s["values"] / s["present"]
  if s.get("len_hist"):
    _histogram(common.num_values_histogram, s["len_hist"])


def _steps(feature, s: dict) -> None:
  """A feature list's steps per record, as a custom statistic."""
  if s.get("steps_hist"):
    custom = feature.custom_stats.add()
    custom.name = STEPS_STAT
    _histogram(custom.histogram, s["steps_hist"])


def _histogram(hist, counts: histogram.Histogram, quantiles: bool = False
               ) -> None:
  from tensorflow_metadata.proto.v0 import statistics_pb2
  hist.type = statistics_pb2.Histogram.QUANTILES if quantiles else \
      statistics_pb2.Histogram.STANDARD
  _buckets(hist, histogram.quantile_bars(counts) if quantiles
           else histogram.bars(counts)[0])


def _buckets(hist, bars) -> None:
  for low, high, count in bars:
    bucket = hist.buckets.add()
    bucket.low_value, bucket.high_value = low, high
    bucket.sample_count = count


def _fine(feature, counts: histogram.Histogram) -> None:
  """The fine buckets, for comparisons (custom statistics)."""
  level = feature.custom_stats.add()
  level.name, level.num = FINE_LEVEL_STAT, counts.level
  fine = feature.custom_stats.add()
  fine.name = FINE_STAT
  _buckets(fine.histogram, histogram.buckets(counts))


def _numbers(feature, s: dict) -> None:
  num = feature.num_stats
  _common(num.common_stats, s)
  counted = s.get("counted", 0)
  if not counted:
    return
  num.mean, num.std_dev = mean(s), std_dev(s)
  num.num_zeros = s.get("zeros", 0)
  num.min, num.max = float(s["min"]), float(s["max"])
  _histogram(num.histograms.add(), s["hist"])
  _histogram(num.histograms.add(), s["hist"], quantiles=True)
  _fine(feature, s["hist"])


def _text(text, s: dict) -> None:
  _common(text.common_stats, s)
  top = sorted((plain(s).get("top") or {}).items(),
               key=lambda kv: (-kv[1], kv[0]))
  if s.get("top_exact", False):
    text.unique = len(top)
  for rank, (value, count) in enumerate(top[:TOP_SHOWN]):
    shown = value.decode("utf-8", "backslashreplace") if isinstance(
        value, bytes) else str(value)
    item = text.top_values.add()
    item.value, item.frequency = shown, count
    bucket = text.rank_histogram.buckets.add()
    bucket.low_rank = bucket.high_rank = rank
    bucket.label, bucket.sample_count = shown, count
  if s.get("values"):
    text.avg_length = s.get("len_sum", 0) / s["values"]


def statistics_bytes(info: DatasetInfo, described: Dict[str, dict]
                     ) -> bytes:
  """The serialized DatasetFeatureStatisticsList of a dataset.

  Args:
    info: its dataset.json (splits, schema).
    described: {split: {feature: merged encoding.stats description}}.
  """
  from tensorflow_metadata.proto.v0 import statistics_pb2
  types = _feature_types(info.schema or {})
  out = statistics_pb2.DatasetFeatureStatisticsList()
  for split, features in sorted(described.items()):
    dataset = out.datasets.add()
    dataset.name = split
    dataset.num_examples = (info.splits[split].num_records
                            if split in info.splits else 0)
    for name, s in sorted(features.items()):
      feature = dataset.features.add()
      feature.path.step.append(name)
      kind = types.get(name, "float" if "counted" in s else "string")
      _steps(feature, s)
      if kind in _NUMERIC or "counted" in s:
        feature.type = (statistics_pb2.FeatureNameStatistics.INT
                        if kind == "int64"
                        else statistics_pb2.FeatureNameStatistics.FLOAT)
        _numbers(feature, s)
      else:
        feature.type = (statistics_pb2.FeatureNameStatistics.BYTES
                        if kind in ("bytes", "image")
                        else statistics_pb2.FeatureNameStatistics.STRING)
        _text(feature.string_stats, s)
  return out.SerializeToString(deterministic=True)

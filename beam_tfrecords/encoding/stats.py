"""Per-feature statistics of the written records, computed from the
converted columns in the same pass as the encoding (no second read).

`column_stats(feature, lists)` describes one batch's column; `merge` adds
two descriptions (`merge_all` many at once); `finish` turns the merged
one into what dataset.json shows:

    {"present": records with the feature, "missing": records without,
     "values": values in all, "list_length": {"min", "max"} (values per
     record), a feature list of a SequenceExample: "steps": {"min", "max"}
     (steps per record that has it),
     numbers: "min", "max", "mean";
     text / bytes: "top": [[value, count], ...] (10 most frequent),
     "top_exact": false when the counts are estimates (see TOP_KEPT),
     "long_values": values longer than TOP_VALUE_BYTES, not in "top"}

Top values are counted exactly per batch; a description keeps the
TOP_KEPT most frequent values (ties: the smaller value), of its batch or
of the sum of the descriptions merged into it, so counts of values
outside that set in some batch or merge are missing from the total
(top_exact: false then).

Numbers also carry their sum of squares, a count of zeros and a
histogram (encoding.histogram: exact, in any merge order); text the total
length of its values. dataset.json does not show them; statistics.pb
(sinks.tfdv) does.

Sums and sums of squares are exact integers (encoding.exact_sums), and
`mean` / `std_dev` round once from them, so every float written is the
same to the last bit on any CPU, for any batch sizes and whatever order
the workers' descriptions are merged in. No BLAS, no float reduction:
statistics.pb, dataset.json and the report are byte-identical on any
machine and worker count (tests/e2e/test_determinism.py).
"""

import heapq
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.core import native
from beam_tfrecords.encoding import exact_sums, histogram, top_counts
from beam_tfrecords.encoding.top_counts import TopCounts
from beam_tfrecords.schema.model import Feature, FeatureType

__all__ = ["column_stats", "merge", "merge_all", "merge_splits", "finish",
           "plain", "plain_splits",
           "mean", "std_dev",
           "TOP_KEPT", "TOP_SHOWN", "STEPS_STAT", "FINE_STAT",
           "FINE_LEVEL_STAT"]

TOP_KEPT = 1000
# statistics.pb's custom statistic of a SequenceExample feature list: a
# histogram of its steps per record (sinks.tfdv writes it, report reads it).
STEPS_STAT = "steps per record"
# ... and of a number: its fine histogram's buckets and level
# (encoding.histogram), what the report compares splits and baselines on.
FINE_STAT = "fine histogram"
FINE_LEVEL_STAT = "fine histogram level"
TOP_SHOWN = 10
# Top values are counted among values at most this long; longer ones
# (documents, image bytes, raw tensors) are only counted (long_values).
TOP_VALUE_BYTES = 128


def column_stats(feature: Feature, lists: pa.LargeListArray) -> dict:
  out = _column_stats(feature, lists)
  if feature.expect is not None:
    _expected(feature, pc.list_flatten(lists), out)
  return out


def _expected(feature: Feature, values: pa.Array, out: dict) -> None:
  """What a feature's expect: section needs beyond the usual description:
  the values outside `values` (exact), the count of each allowed value,
  and for drift the full histogram or value counts in dataset.json."""
  expect = feature.expect
  assert expect is not None
  if feature.type is FeatureType.FLOAT and (
      expect.min is not None or expect.max is not None):
    # min / max describe finite values: NaN and infinities are counted.
    out["non_finite"] = len(values) - int(
        pc.sum(pc.is_finite(values)).as_py() or 0)
  if expect.values is not None:
    allowed = pa.array(list(expect.values), type=values.type)
    inside = pc.is_in(values, value_set=allowed)
    out["unexpected"] = len(values) - int(pc.sum(inside).as_py() or 0)
    if expect.drift is not None:
      counts = pc.value_counts(values.filter(inside))
      out["expected_counts"] = dict(zip(
          counts.field("values").to_pylist(),
          counts.field("counts").to_pylist()))
  elif expect.drift is not None:
    out["keep"] = "histogram" if feature.type in (
        FeatureType.INT64, FeatureType.FLOAT) else "frequencies"


def _column_stats(feature: Feature, lists: pa.LargeListArray) -> dict:
  module = native.core()
  if module is not None:
    got = _native_column_stats(module, feature, lists)
    if got is not None:
      return got
  n = len(lists)
  present = n - lists.null_count
  lengths = pc.list_value_length(lists)
  values = pc.list_flatten(lists)
  out: Dict[str, Any] = {"present": present, "missing": n - present,
                         "values": len(values)}
  if present:
    mm = pc.min_max(lengths)
    out["len_min"], out["len_max"] = mm["min"].as_py(), mm["max"].as_py()
    if feature.is_variable_length:
      # Values per record (present records), in the numeric buckets.
      counts = lengths.drop_null().to_numpy(zero_copy_only=False)
      out["len_hist"] = histogram.of_ints(counts, out["len_min"],
                                          out["len_max"])
  if not len(values):
    return out
  if feature.type is FeatureType.INT64:
    _int_stats(values.to_numpy(zero_copy_only=False), out)
    return out
  if feature.type is FeatureType.FLOAT:
    _float_stats(pc.cast(values, pa.float64()), out)
    return out
  if feature.type in (FeatureType.STRING, FeatureType.BYTES):
    out["len_sum"] = int(pc.sum(pc.binary_length(values)).as_py() or 0)
    short = pc.less_equal(pc.binary_length(values), TOP_VALUE_BYTES)
    if not pc.all(short).as_py():
      values = values.filter(short)
      out["long_values"] = len(short) - len(values)
  counts = pc.value_counts(values)
  out["top_exact"] = len(counts) <= TOP_KEPT
  if not out["top_exact"]:
    # _most_frequent's cut, by Arrow (a null value sorts last there too)
    counts = counts.take(pc.select_k_unstable(
        pa.table({"v": counts.field("values"), "c": counts.field("counts")}),
        TOP_KEPT, [("c", "descending"), ("v", "ascending")]))
  out["top"] = dict(zip(counts.field("values").to_pylist(),
                        counts.field("counts").to_pylist()))
  return out


_NATIVE_TYPES = {FeatureType.INT64: (pa.large_list(pa.int64()),),
                 FeatureType.STRING: (pa.large_list(pa.large_string()),
                                      pa.large_list(pa.large_binary())),
                 FeatureType.BYTES: (pa.large_list(pa.large_binary()),
                                     pa.large_list(pa.large_string()))}


def _native_column_stats(module, feature: Feature,
                         lists: pa.LargeListArray) -> Optional[dict]:
  """_column_stats by the native core, one pass per column: int64 and
  text or bytes columns; None for any other (floats, a list whose
  missing rows hold values, values that are null), which the reference
  path below describes. Every number is an exact integer or an input value,
  so the two paths give the same description, the top values as a
  TopCounts here (the same dict by `plain`; tests/unit/encoding/
  test_stats.py runs every test on both, and compares them on random
  columns)."""
  if lists.type not in _NATIVE_TYPES.get(feature.type, ()):
    return None
  n = len(lists)
  buffers = lists.buffers()
  offsets = _offsets(lists, buffers[1])
  known, length_range = module.length_range(
      offsets, buffers[0] if lists.null_count else None, lists.offset)
  start, end = (int(offsets[0]), int(offsets[-1])) if n else (0, 0)
  values = lists.values.slice(start, end - start)
  if not known or values.null_count:
    return None
  present = n - lists.null_count
  out: Dict[str, Any] = {"present": present, "missing": n - present,
                         "values": len(values)}
  if length_range is not None:
    out["len_min"], out["len_max"] = length_range
    if feature.is_variable_length:
      lengths = np.diff(offsets)
      if lists.null_count:
        lengths = lengths[lists.is_valid().to_numpy(zero_copy_only=False)]
      out["len_hist"] = histogram.of_ints(lengths, *length_range)
  if not len(values):
    return out
  if feature.type is FeatureType.INT64:
    _native_int_stats(module, values.to_numpy(), out)
  else:
    _native_top(module, values, out)
  return out


def _offsets(array: pa.Array, buffer: pa.Buffer) -> np.ndarray:
  """A large list, text or bytes array's int64 offsets, n + 1 of them,
  without a copy (absolute: they index its unsliced values); `buffer`:
  its offsets buffer (array.buffers()[1])."""
  return np.frombuffer(buffer, dtype=np.int64)[
      array.offset:array.offset + len(array) + 1]


def _native_int_stats(module, v: np.ndarray, out: dict) -> None:
  """_int_stats in one pass, and the histogram of a small range of
  values (histogram.of_ints) from a second that counts each value."""
  low, high, total, squares_low, squares_high, zeros, made = \
      module.int_stats(v, histogram.BY_VALUE)
  out["min"], out["max"] = low, high
  out["sum"] = total << -exact_sums.SUM_SCALE
  out["sumsq"] = ((squares_high << 128) | squares_low) << \
      -exact_sums.SQUARES_SCALE
  out["zeros"] = zeros
  if made is None:
    out["hist"] = histogram.of_values(v.astype(np.float64))
  else:
    level, keys, counts, positive, negative = made
    out["hist"] = histogram.Histogram(
        level, np.frombuffer(keys, dtype=np.int64),
        np.frombuffer(counts, dtype=np.int64), (positive, negative))
  out["counted"] = len(v)


def _native_top(module, values: pa.Array, out: dict) -> None:
  """The text or bytes part of _column_stats: total length, long values
  and the top values (a TopCounts: encoding.top_counts), cut past
  TOP_KEPT as the reference cuts them (_most_frequent), in the native
  core."""
  buffers = values.buffers()
  offsets = _offsets(values, buffers[1])
  out["len_sum"] = int(offsets[-1] - offsets[0])
  text = pa.types.is_large_string(values.type)
  (data, value_offsets, counts), long, exact = module.value_counts(
      b"" if buffers[2] is None else buffers[2], offsets, TOP_VALUE_BYTES,
      text, TOP_KEPT)
  if long:
    out["long_values"] = long
  out["top"] = TopCounts(data, value_offsets, counts, text)
  out["top_exact"] = exact


def _int_stats(v: np.ndarray, out: dict) -> None:
  """min / max, exact sums, zeros and the histogram of int64 values."""
  low, high = int(v.min()), int(v.max())
  out["min"], out["max"] = low, high
  # Exact sums (integers) of the int64 values themselves, not of their
  # float64 casts (which round past 2**53).
  out["sum"], out["sumsq"] = exact_sums.sums(v)
  out["zeros"] = int(np.count_nonzero(v == 0))
  out["hist"] = histogram.of_ints(v, low, high)
  out["counted"] = len(v)


def _float_stats(numbers: pa.Array, out: dict) -> None:
  """The same of the finite ones of float values (NaN and infinities
  are in no sum, min, max or histogram)."""
  finite = numbers.filter(pc.is_finite(numbers))
  if not len(finite):
    return
  mm = pc.min_max(finite)
  # -0.0 as 0.0: which of two equal zeros a min or max returns depends
  # on the order of the values and of the merges.
  out["min"], out["max"] = mm["min"].as_py() + 0.0, mm["max"].as_py() + 0.0
  x = finite.to_numpy(zero_copy_only=False)
  out["sum"], out["sumsq"] = exact_sums.sums(x)
  out["zeros"] = int(np.count_nonzero(x == 0))
  out["hist"] = histogram.of_values(x)
  out["counted"] = len(finite)


def merge(a: Optional[dict], b: Optional[dict]) -> Optional[dict]:
  """Two descriptions as one (`merge_all` of the two)."""
  return merge_all([a, b])


_PICKED = (("len_min", min), ("len_max", max), ("min", min), ("max", max),
           ("steps_min", min), ("steps_max", max))
# Integers, the sums exact ones (exact_sums): any order, same total.
_ADDED = ("counted", "long_values", "zeros", "len_sum", "sum", "sumsq",
          "unexpected", "non_finite")


def merge_all(descriptions: Sequence[Optional[dict]]) -> Optional[dict]:
  """The descriptions as one, in one pass over them (None counts as no
  description; one is returned as it is). Nothing depends on their
  order; the top values depend on which are merged together: of their
  sum, the TOP_KEPT most frequent are kept (ties: the smaller value)."""
  given: List[dict] = [d for d in descriptions if d is not None]
  if len(given) <= 1:
    return given[0] if given else None
  out: Dict[str, Any] = {k: sum(d[k] for d in given)
                         for k in ("present", "missing", "values")}
  for k, pick in _PICKED:
    got = [d[k] for d in given if k in d]
    if got:
      out[k] = pick(got)
  for k in _ADDED:
    got = [d[k] for d in given if k in d]
    if got:
      out[k] = sum(got)
  keep = [d.get("keep") for d in given if "keep" in d]
  if keep:
    out["keep"] = next((k for k in keep if k), keep[-1])
  for k in ("hist", "len_hist", "steps_hist"):
    got = [d[k] for d in given if k in d]
    if got:
      out[k] = histogram.merge_all(got)
  got = [d["expected_counts"] for d in given if "expected_counts" in d]
  if got:
    counts = dict(got[0])
    for more in got[1:]:
      for value, count in more.items():
        counts[value] = counts.get(value, 0) + count
    out["expected_counts"] = counts
  if any("top" in d for d in given):
    out["top"], out["top_exact"] = _merged_top(given)
  return out


def merge_splits(partials: Iterable[Dict[str, Dict[str, dict]]]
                 ) -> Dict[str, Dict[str, Optional[dict]]]:
  """{split: {feature: description}} partials as one: merge_all of each
  feature's descriptions, in the partials' order."""
  grouped: Dict[str, Dict[str, list]] = {}
  for partial in partials:
    for split, features in partial.items():
      into = grouped.setdefault(split, {})
      for name, s in features.items():
        into.setdefault(name, []).append(s)
  return {split: {name: merge_all(described)
                  for name, described in features.items()}
          for split, features in grouped.items()}


def _merged_top(descriptions: List[dict]) -> Tuple[Any, bool]:
  """The top values of the descriptions added up, cut to the TOP_KEPT
  most frequent (_most_frequent) if there are more: the same in any
  order of the descriptions. TopCounts (the native core's) are added by
  it, into a TopCounts; any other mix into a dict."""
  described = [d for d in descriptions if d.get("top") is not None]
  exact = all(d.get("top_exact", True) for d in described)
  tops = [d["top"] for d in described]
  module = native.core() if tops and all(
      isinstance(t, TopCounts) for t in tops) else None
  got = None if module is None else top_counts.summed(module, tops,
                                                      TOP_KEPT)
  if got is not None:
    return got[0], exact and got[1]
  top: Dict[Any, int] = {}
  for got_top in tops:
    if isinstance(got_top, TopCounts):
      got_top = got_top.to_dict()
    if not top:
      top = dict(got_top)
      continue
    get = top.get
    for value, count in got_top.items():
      top[value] = get(value, 0) + count
  if len(top) > TOP_KEPT:
    return _most_frequent(top), False
  return top, exact


def plain(description: dict) -> dict:
  """A description with its top values as a dict (a TopCounts made one);
  the description itself when they are one already."""
  if not isinstance(description.get("top"), TopCounts):
    return description
  return dict(description, top=description["top"].to_dict())


def plain_splits(splits: Dict[str, Dict[str, Optional[dict]]]
                 ) -> Dict[str, Dict[str, Optional[dict]]]:
  """plain() of every description of {split: {feature: description}}."""
  return {split: {name: None if d is None else plain(d)
                  for name, d in features.items()}
          for split, features in splits.items()}


def _most_frequent(top: dict) -> dict:
  """The TOP_KEPT values of highest count, ties by the smaller value
  (the first TOP_KEPT of sorting by (-count, value); a None value, null
  values counted, sorts last); in no particular order (every reader of
  top values sorts them)."""
  counts = np.fromiter(top.values(), dtype=np.int64, count=len(top))
  # The TOP_KEPT-th highest count: every value above it is kept, and of
  # those at it, the smallest values that fill TOP_KEPT.
  kth = int(np.partition(counts, len(counts) - TOP_KEPT)[-TOP_KEPT])
  above = [(v, c) for v, c in top.items() if c > kth]
  tied = heapq.nsmallest(TOP_KEPT - len(above),
                         (v for v, c in top.items() if c == kth),
                         key=lambda v: (v is None, v))
  return dict(above + [(v, kth) for v in tied])


def mean(stats: dict) -> float:
  """The mean of a merged description's numbers, correctly rounded."""
  return exact_sums.mean(stats["sum"], stats["counted"])


def std_dev(stats: dict) -> float:
  """The population standard deviation of its numbers (as TFDV's)."""
  return exact_sums.std_dev(stats["sum"], stats["sumsq"], stats["counted"])


def finish(stats: dict) -> dict:
  stats = plain(stats)
  out = {k: stats[k] for k in ("present", "missing", "values")}
  if "len_min" in stats:
    out["list_length"] = {"min": stats["len_min"], "max": stats["len_max"]}
  if "steps_min" in stats:
    out["steps"] = {"min": stats["steps_min"], "max": stats["steps_max"]}
  if stats.get("counted"):
    out.update(min=stats["min"], max=stats["max"], mean=mean(stats))
  if stats.get("long_values"):
    out["long_values"] = stats["long_values"]
  if stats.get("top"):
    ranked = sorted(stats["top"].items(), key=lambda kv: (-kv[1], kv[0]))
    out["top"] = [[v.decode("utf-8", "backslashreplace")
                   if isinstance(v, bytes) else v, c]
                  for v, c in ranked[:TOP_SHOWN]]
    out["top_exact"] = stats["top_exact"]
  _finish_expected(stats, out)
  return out


def _finish_expected(stats: dict, out: dict) -> None:
  """What the checks of an expect: section read (only for such features)."""
  for key in ("unexpected", "non_finite"):
    if key in stats:
      out[key] = stats[key]
  if "expected_counts" in stats:
    out["frequencies"] = _ranked(stats["expected_counts"])
  elif stats.get("keep") == "frequencies":
    if stats.get("top_exact", True):
      out["frequencies"] = _ranked(stats.get("top", {}))
    else:  # the kept values would depend on which partials were merged
      out["drift_note"] = (f"more than {TOP_KEPT:,} distinct values; give "
                           "values: to measure drift over them")
  elif stats.get("keep") == "histogram":
    if stats.get("hist") is not None:
      out["histogram"] = histogram.to_json(stats["hist"])


def _ranked(counts: dict) -> list:
  """[[value, count], ...], most frequent first (text as text)."""
  ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
  return [[v.decode("utf-8", "backslashreplace") if isinstance(v, bytes)
           else v, c] for v, c in ranked]

"""beam_tfrecords/encoding/stats.py, on values: Per-feature statistics of the
written records, computed from the converted columns in the same pass as the
encoding (no second read).

Every test runs on both paths: the pure-Python reference (BTR_NATIVE=0)
and the native core's one pass per column (native/src/stats.rs); a
property compares the two on random columns."""

import collections
from fractions import Fraction
import functools
import itertools
import json
import os
import random
import types

from hypothesis import HealthCheck, given, settings, strategies as st
import numpy as np
import pyarrow as pa
import pytest

from beam_tfrecords.core import native
from beam_tfrecords.core.info import SplitInfo
from beam_tfrecords.encoding import stats
from beam_tfrecords.encoding.exact_sums import sums
from beam_tfrecords.encoding.stats import finish, merge
from beam_tfrecords.schema.model import Feature, FeatureType
from beam_tfrecords.sinks.tfdv import statistics_bytes

from tests.helpers.native_paths import NATIVE, both_paths




path = both_paths("python")


# The property: statistics of the same values do not depend on batching
# or merge order.

_FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e6, max_value=1e6),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1.7976931348623157e308,
                     -1.7976931348623157e308, 0.1, 1e16, 1.0]),
    st.floats(allow_nan=True, allow_infinity=True))
_INTS = st.one_of(st.integers(-2**63, 2**63 - 1),
                  st.integers(-1000, 1000))


def _batch_stats(feature, rows, cuts):
  kind = pa.float32() if feature.type is FeatureType.FLOAT else pa.int64()
  parts, start = [], 0
  for stop in list(cuts) + [len(rows)]:
    lists = pa.array(rows[start:stop], pa.large_list(kind))
    parts.append(stats.column_stats(feature, lists))
    start = stop
  return parts


def _merged(parts, rng):
  """The parts merged in a random tree, in a random order."""
  parts = list(parts)
  rng.shuffle(parts)
  while len(parts) > 1:
    i = rng.randrange(len(parts) - 1)
    parts[i:i + 2] = [stats.merge(parts[i], parts[i + 1])]
  return parts[0]


def _written(feature, merged):
  """What a build writes of one feature: dataset.json's part and
  statistics.pb's bytes."""
  kind = "float" if feature.type is FeatureType.FLOAT else "int64"
  info = types.SimpleNamespace(
      schema={"features": {feature.name: {"type": kind, "shape": [-1]}}},
      splits={"train": SplitInfo(
          "train", merged["present"] + merged["missing"], 0, ())})
  return (json.dumps(stats.finish(merged), sort_keys=True),
          statistics_bytes(info, {"train": {feature.name: merged}}))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), is_float=st.booleans())
def test_statistics_do_not_depend_on_batches_or_merge_order(data, is_float):
  feature = Feature("x", FeatureType.FLOAT if is_float else
                    FeatureType.INT64, shape=(-1,))
  values = _FLOATS if is_float else _INTS
  rows = data.draw(st.lists(st.one_of(st.none(), st.lists(values,
                                                          max_size=5)),
                            min_size=1, max_size=40))
  seed = data.draw(st.integers(0, 2**32))
  rng = random.Random(seed)
  written = set()
  for _ in range(4):
    cuts = sorted(rng.sample(range(1, len(rows)), rng.randint(
        0, len(rows) - 1))) if len(rows) > 1 else []
    written.add(_written(feature, _merged(
        _batch_stats(feature, rows, cuts), rng)))
  assert len(written) == 1


def test_top_values_are_marked_inexact_past_the_kept_set(monkeypatch):
  monkeypatch.setattr(stats, "TOP_KEPT", 2)
  a = {"present": 3, "missing": 0, "values": 3, "top": {b"x": 2, b"y": 1},
       "top_exact": True}
  b = {"present": 2, "missing": 1, "values": 2, "top": {b"z": 2},
       "top_exact": True}
  merged = stats.merge(a, b)
  assert merged["top_exact"] is False and len(merged["top"]) == 2
  assert stats.finish(merged)["top"] == [["x", 2], ["z", 2]]
  assert stats.merge(a, None) is a


def _reference_sum(parts, kept):
  """The top values of merging the parts, written plainly: add them all,
  then sort by (-count, value) and cut."""
  top = {}
  for p in parts:
    for value, count in p["top"].items():
      top[value] = top.get(value, 0) + count
  exact = all(p["top_exact"] for p in parts) and len(top) <= kept
  return dict(sorted(top.items(), key=lambda kv: (-kv[1], kv[0]))[:kept]), \
      exact


@settings(max_examples=150, deadline=None)
@given(tops=st.lists(st.dictionaries(st.binary(max_size=2),
                                     st.integers(1, 4), max_size=12),
                     min_size=1, max_size=12),
       kept=st.integers(1, 8), seed=st.integers(0, 2**32))
def test_merging_adds_the_top_values_then_keeps_the_most_frequent(
    tops, kept, seed):
  # Few distinct counts and values: many ties at the cut, where the
  # smaller value is kept.
  stats.TOP_KEPT, saved = kept, stats.TOP_KEPT
  try:
    parts = [{"present": 1, "missing": 0, "values": len(t), "top": t,
              "top_exact": len(t) <= kept} for t in tops]
    merged = stats.merge_all(parts)
    shuffled = list(parts)
    random.Random(seed).shuffle(shuffled)
    in_any_order = stats.merge_all(shuffled)
  finally:
    stats.TOP_KEPT = saved
  if len(parts) == 1:
    assert merged is parts[0]
    return
  assert (merged["top"], merged["top_exact"]) == _reference_sum(parts, kept)
  assert merged == in_any_order
  assert merged["values"] == sum(len(t) for t in tops)


def test_a_batch_keeps_its_most_frequent_values_then_the_smallest():
  # counts: d 1, c 4, b 2, a 2, e 2; of the three tied at 2, a and b.
  feature = Feature("t", FeatureType.STRING)
  lists = pa.array([[w] for w in "dcbaecbacec"],
                   pa.large_list(pa.large_string()))
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(stats, "TOP_KEPT", 3)
    got = stats.plain(stats.column_stats(feature, lists))
  assert got["top"] == {"c": 4, "b": 2, "a": 2}
  assert got["top_exact"] is False
  assert stats.finish(got)["top"] == [["c", 4], ["a", 2], ["b", 2]]


def _part(value):
  total, squares = sums(np.array([value]))
  return {"present": 1, "missing": 0, "values": 1, "min": value,
          "max": value, "sum": total, "sumsq": squares, "counted": 1}


def test_the_mean_does_not_depend_on_the_merge_order():
  # Values whose float sum depends on the order of the additions.
  values = [1e16, 1.0, -1e16, 3.3, 0.1, 0.2, 1e-3]
  # (merge makes new parts: each value's is made once)
  part_of = {v: _part(v) for v in values}
  means = set()
  for order in itertools.permutations(values):
    folded = None
    for v in order:
      folded = merge(folded, part_of[v])
    means.add(finish(folded)["mean"])
    parts = [part_of[v] for v in order]
    tree = merge(merge(parts[0], parts[1]),
                 merge(merge(parts[2], parts[3]),
                       merge(parts[4], merge(parts[5], parts[6]))))
    means.add(finish(tree)["mean"])
  # One value, and the correctly rounded one.
  assert means == {float(sum(map(Fraction, values)) / len(values))}
  # Plain float addition would not have been order-free.
  assert len({sum(order) for order in itertools.permutations(values)}) > 1


# The native core against the reference, column by column.

def _reference(feature, lists):
  """column_stats by the pure-Python path, whatever path the test is on."""
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv(native.ENV, "0")
    return stats.column_stats(feature, lists)


def _native(feature, lists):
  """The native core's description, its top values as a dict."""
  assert NATIVE is not None
  # pylint: disable=protected-access
  got = stats._native_column_stats(NATIVE, feature, lists)
  return None if got is None else stats.plain(got)


# Values at both ends of int64, and small ranges anywhere (counted by
# value, histogram made natively), near 2**63 too, where float64 rounds
# neighbouring integers into one bucket.
@st.composite
def _int_values(draw):
  base = draw(st.one_of(st.integers(-2**63, 2**63 - 1 - 2**17),
                        st.sampled_from([0, -5, 2**62, 2**63 - 2**17,
                                         -2**63])))
  return draw(st.one_of(st.integers(-2**63, 2**63 - 1),
                        st.integers(base, min(2**63 - 1, base + draw(
                            st.sampled_from([3, 2**16 - 1, 2**16,
                                             2**17])))),
                        st.sampled_from([0, -1, 1, -2**63, 2**63 - 1])))


_TEXT = st.one_of(st.text(max_size=6), st.text(min_size=120, max_size=140),
                  st.sampled_from(["", "a", "é", "\x00"]))
_BYTES = st.one_of(st.binary(max_size=4), st.binary(min_size=127,
                                                    max_size=130))


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kind=st.sampled_from(["int64", "string", "bytes"]),
       shape=st.sampled_from([(), (2,), (-1,)]),
       kept=st.sampled_from([2, 5, 1000]))
def test_the_native_core_describes_a_column_as_the_reference_does(
    data, kind, shape, kept):
  if os.environ.get(native.ENV) != "1":
    pytest.skip("compares the two paths itself")
  feature = Feature("x", FeatureType(kind), shape=shape)
  arrow = {"int64": pa.int64(), "string": pa.large_string(),
           "bytes": pa.large_binary()}[kind]
  values = {"int64": _int_values(), "string": _TEXT, "bytes": _BYTES}[kind]
  size = {(): 1, (2,): 2}.get(shape)
  row = st.lists(values, min_size=size if size else 0,
                 max_size=size if size else 6)
  rows = data.draw(st.lists(st.one_of(st.none(), row), max_size=60))
  lists = pa.array(rows, pa.large_list(arrow))
  # A slice: offsets that start past 0, a validity bitmap past bit 0.
  start = data.draw(st.integers(0, len(rows)))
  lists = lists.slice(start, data.draw(st.integers(0, len(rows) - start)))
  stats.TOP_KEPT, saved = kept, stats.TOP_KEPT
  try:
    got = _native(feature, lists)
    assert got is not None
    assert got == _reference(feature, lists)
  finally:
    stats.TOP_KEPT = saved


def test_runs_and_scattered_values_are_described_alike():
  """The core counts a column's values in blocks, each by runs of one
  value or one by one as the block before suggests: sections of each,
  over many blocks, in values of every length class, describe as the
  reference does, and as a plain count says."""
  if NATIVE is None:
    pytest.skip("the native core is not built")
  rng = random.Random(7)
  words = [c * n for n in (1, 6, 12, 24, 60, 140) for c in "abcdefg"]
  picked = []
  for section in range(6):
    while len(picked) < (section + 1) * 1500:
      picked += [rng.choice(words)] * (rng.randint(1, 40) if section % 2
                                       else 1)
  feature = Feature("t", FeatureType.STRING)
  lists = pa.array([[w] for w in picked], pa.large_list(pa.large_string()))
  got = _native(feature, lists)
  assert got == _reference(feature, lists)
  short = [w for w in picked if len(w) <= stats.TOP_VALUE_BYTES]
  assert got["top"] == dict(collections.Counter(short))
  assert got["long_values"] == len(picked) - len(short) > 0


def test_long_columns_with_few_missing_rows_are_described_alike():
  """The core takes 64 present rows at a time whole (their bitmap's
  bytes all set): lengths of columns with stretches of them, sliced at
  every bit offset, as the reference gives them."""
  if NATIVE is None:
    pytest.skip("the native core is not built")
  rng = random.Random(11)
  feature = Feature("n", FeatureType.INT64, shape=(-1,))
  for share in (0.01, 0.3):
    # rows 64 to 400 all present, the longest and shortest among them
    rows = [None if rng.random() < share and not 64 <= i < 400 else
            [rng.randint(-3, 3)] * rng.randint(2, 8) for i in range(700)]
    rows[200], rows[300] = [5] * 11, [4]
    lists = pa.array(rows, pa.large_list(pa.int64()))
    assert lists.null_count
    for start in range(9):
      part = lists.slice(start, 600 + start)
      got = _native(feature, part)
      assert got == _reference(feature, part)
      lengths = [len(r) for r in rows[start:start + 600 + start]
                 if r is not None]
      assert (got["len_min"], got["len_max"]) == (min(lengths),
                                                  max(lengths))


def test_the_native_core_leaves_lists_it_does_not_read_to_the_reference():
  if NATIVE is None:
    pytest.skip("the native core is not built")
  feature = Feature("x", FeatureType.INT64, shape=(-1,))
  # A missing row that holds values (Arrow's flatten skips them).
  offsets = pa.array([0, 2, 3, 5], pa.int64())
  hidden = pa.LargeListArray.from_arrays(
      offsets, pa.array([1, 2, 99, 3, 4], pa.int64()),
      mask=pa.array([False, True, False]))
  assert _native(feature, hidden) is None
  assert stats.column_stats(feature, hidden) == _reference(feature, hidden)
  assert stats.column_stats(feature, hidden)["sum"] == \
      sums(np.array([1, 2, 3, 4]))[0]
  # Null values inside lists, and floats: the reference's.
  with_nulls = pa.array([[1, None]], pa.large_list(pa.int64()))
  assert _native(feature, with_nulls) is None
  floats = Feature("f", FeatureType.FLOAT, shape=(-1,))
  assert _native(floats, pa.array([[1.5]], pa.large_list(pa.float32()))) \
      is None


def test_null_values_in_lists_are_counted_and_sort_last_at_the_cut():
  # (the reference path's, on both: the core leaves null values to it)
  feature = Feature("t", FeatureType.STRING, shape=(-1,))
  lists = pa.array([["b", None, "a", "c"], [None, "c", "b", "a"]],
                   pa.large_list(pa.large_string()))
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(stats, "TOP_KEPT", 3)
    got = stats.plain(stats.column_stats(feature, lists))
    merged = stats.merge_all([got, {"present": 1, "missing": 0,
                                    "values": 1, "top": {None: 2},
                                    "top_exact": True}])
  assert got["top"] == {"a": 2, "b": 2, "c": 2} and not got["top_exact"]
  assert merged["top"] == {"a": 2, "b": 2, "c": 2}


def test_the_native_core_keeps_the_same_top_values_past_the_kept_set(
    monkeypatch):
  if NATIVE is None:
    pytest.skip("the native core is not built")
  # Ties at the cut: the smaller of the tied values is kept, on both
  # paths, whatever order the values come in.
  monkeypatch.setattr(stats, "TOP_KEPT", 2)
  feature = Feature("t", FeatureType.STRING)
  words = ["d", "c", "b", "a", "e", "c", "b", "a", "z" * 200]
  for order in (words, words[::-1]):
    lists = pa.array([[w] for w in order], pa.large_list(pa.large_string()))
    got = _native(feature, lists)
    assert got == _reference(feature, lists)
    assert got["top"] == {"a": 2, "b": 2} and got["top_exact"] is False
    assert got["long_values"] == 1 and got["len_sum"] == 8 + 200

"""beam_tfrecords/encoding/histogram.py, on values: Exact, mergeable histograms
of numbers, fine enough for any range."""

import functools
import math
import random

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from beam_tfrecords.encoding import histogram as H

from tests.helpers.histogram import _inside


_VALUES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e4, max_value=1e4),
    st.floats(min_value=1.7e9, max_value=1.7e9 + 86400),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1.7976931348623157e308,
                     -1.7976931348623157e308, 1.0, 2.0, 0.75]))


@settings(max_examples=200, deadline=None)
@given(values=st.lists(_VALUES, min_size=1, max_size=60),
       seed=st.integers(0, 2**32))
def test_exact_and_the_same_in_any_merge_order(values, seed):
  x = np.array(values, dtype=np.float64)
  whole = H.of_values(x)
  rng = random.Random(seed)
  cuts = sorted(rng.sample(range(1, len(x)), rng.randint(0, len(x) - 1))) \
      if len(x) > 1 else []
  parts = [H.of_values(p) for p in np.split(x, cuts)]
  rng.shuffle(parts)
  assert functools.reduce(H.merge, parts) == whole
  assert H.merge_all(parts) == whole  # all at once: the same
  # Every value lies in its bucket's range.
  fine = H.buckets(whole)
  assert sum(c for _, _, c in fine) == len(x)
  for low, high, count in fine:
    if not (math.isinf(low) or math.isinf(high)) and abs(low) > 1e-300:
      assert count == _inside(x, low, high), (low, high)
  # Bars and quantile bars are unions of buckets: the same total.
  assert sum(c for _, _, c in H.bars(whole)[0]) == len(x)
  assert sum(c for _, _, c in H.quantile_bars(whole)) == len(x)


def test_a_narrow_range_gets_fine_buckets():
  """Epoch seconds of one day (a ratio of 1.00005): half of SPAN buckets
  or more between the smallest and largest value."""
  rng = np.random.default_rng(3)
  x = 1.7e9 + rng.uniform(0, 86400, 20000)
  h = H.of_values(x)
  assert len(h.keys) >= H.SPAN // 2
  bars, width = H.bars(h)
  assert width == 5000.0 and len(bars) >= 17


def test_round_widths():
  assert H.round_width(59, 20) == 5.0
  assert H.round_width(27.5, 20) == 2.0
  assert H.round_width(0.4, 20) == 0.02
  assert H.round_width(3600, 20) == 200.0
  assert H.round_width(1e-7, 4) == 2.5e-8


def test_comparable_buckets_do_not_depend_on_the_order():
  rng = np.random.default_rng(5)
  a = H.of_values(rng.normal(50, 30, 5000))
  b = H.of_values(rng.normal(55, 30, 7000))
  level, p, q = H.comparable(a, b)
  level2, q2, p2 = H.comparable(b, a)
  assert (level, p, q) == (level2, p2, q2)
  assert len(set(p) | set(q)) <= H.DRIFT_KEYS
  assert sum(p.values()) == pytest.approx(1) == sum(q.values())


def test_histograms_round_trip_through_json_and_statistics_buckets():
  rng = np.random.default_rng(9)
  h = H.of_values(np.concatenate([rng.normal(0, 100, 3000), [0.0] * 7]))
  back = H.from_json(H.to_json(h))
  assert np.array_equal(back.keys, h.keys) and back.level == h.level
  again = H.from_buckets(h.level, H.buckets(h))
  assert np.array_equal(again.keys, h.keys)
  assert np.array_equal(again.counts, h.counts)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.one_of(st.integers(-2**63, 2**63 - 1),
                                 st.integers(-300, 70000)),
                       min_size=1, max_size=80))
def test_ints_by_value_are_the_same_as_by_float(values):
  """of_ints counts a small range by value first: the same histogram as
  every value cast to float64 (what the general path does)."""
  v = np.array(values, dtype=np.int64)
  assert H.of_ints(v, int(v.min()), int(v.max())) == \
      H.of_values(v.astype(np.float64))


_KEYS = st.integers(0, (2098 << H.FINEST) + (1 << H.FINEST) - 1)
_RANGE = st.one_of(st.none(), st.tuples(_KEYS, _KEYS).map(sorted).map(tuple))


@settings(max_examples=300, deadline=None)
@given(ranges=st.tuples(_RANGE, _RANGE))
def test_the_level_is_the_finest_that_spans_at_most_span_keys(ranges):
  # (The level is found by halving; this is the level by its definition:
  # the first shift, from the finest, at which the keys fit.)
  shift = 0
  # pylint: disable=protected-access
  while shift < H.FINEST and H._span(ranges, shift) > H.SPAN:
    shift += 1
  assert H._level(ranges) == H.FINEST - shift


@settings(max_examples=100, deadline=None)
@given(values=st.lists(_VALUES, max_size=60))
def test_a_histogram_pickles_as_it_is(values):
  # (a batch's histograms go into each kept unit, their arrays as bytes)
  import pickle  # pylint: disable=import-outside-toplevel
  hist = H.of_values(np.array(values, dtype=np.float64)) if values else \
      H.Histogram(H.FINEST, np.array([], np.int64), np.array([], np.int64),
                  (None, None))
  back = pickle.loads(pickle.dumps(hist))
  assert back == hist
  assert back.keys.dtype == np.int64 and back.counts.dtype == np.int64
  wide = H.Histogram(3, np.array([-2**62, 5, 2**62], np.int64),
                     np.array([1, 2**40, 7], np.int64), ((5, 9), (1, 2)))
  assert pickle.loads(pickle.dumps(wide)) == wide

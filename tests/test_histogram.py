"""Histograms people can read (issue 31): exact and mergeable in any order
(encoding.histogram), fine enough that a feature spanning less than a
power of two gets ten bars or more, in statistics.pb and in the report,
with round axis labels.

Real data: the Palmer penguins (CC0, tests/data/penguins): flipper length
172-231 mm, bill length 32.1-59.6 mm, bill depth 13.1-21.5 mm each span
less than one power of two (the old fixed buckets gave them 3 to 5 bars).
"""

import csv
import functools
import math
import pathlib
import random
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import beam_tfrecords as btr
from beam_tfrecords.encoding import histogram as H

PENGUINS = pathlib.Path(__file__).resolve().parent / "data" / "penguins" / \
    "penguins.csv"
NARROW = ("flipper_length_mm", "bill_length_mm", "bill_depth_mm")


def _column(name):
  with open(PENGUINS) as f:
    return np.array([float(r[name]) for r in csv.DictReader(f) if r[name]])


def _inside(values, low, high):
  if low == high:
    return int((values == low).sum())
  above = values >= low if low >= 0 else values > low
  below = values <= high if high <= 0 else values < high
  return int((above & below).sum())


@pytest.fixture(scope="module")
def penguins(tmp_path_factory):
  out = tmp_path_factory.mktemp("penguins") / "out"
  schema = {"name": "penguins", "features": {
      "species": {"type": "string", "required": True},
      "bill_length_mm": "float", "bill_depth_mm": "float",
      "flipper_length_mm": "int64", "body_mass_g": "int64",
      "year": {"type": "int64", "required": True}}}
  btr.build(schema, str(PENGUINS), str(out))
  from tensorflow_metadata.proto.v0 import statistics_pb2
  stats = statistics_pb2.DatasetFeatureStatisticsList()
  stats.ParseFromString((out / "statistics.pb").read_bytes())
  [train] = stats.datasets
  return out, {f.path.step[0]: f for f in train.features}


def test_a_feature_within_a_power_of_two_gets_ten_bars_or_more(penguins):
  _, features = penguins
  for name in NARROW:
    values = _column(name)
    if name == "bill_length_mm" or name == "bill_depth_mm":
      values = values.astype(np.float32).astype(np.float64)
    assert values.max() < 2 * values.min()  # within one power of two
    standard, quantiles = features[name].num_stats.histograms
    bars = [b for b in standard.buckets if b.sample_count]
    assert len(bars) >= 10, (name, len(bars))
    assert len(quantiles.buckets) == 10
    # Exact: every bar holds exactly the values in its range.
    for b in list(standard.buckets) + list(quantiles.buckets):
      assert b.sample_count == _inside(values, b.low_value, b.high_value)
    assert sum(b.sample_count for b in standard.buckets) == len(values)


def test_the_report_draws_those_bars_with_round_labels(penguins):
  out, _ = penguins
  page = (out / "report.html").read_text()
  for name in NARROW:
    section = page[page.index(f"id='feature-{name}'"):]
    svg = section[:section.index("</svg>")]
    counts = [int(c) for c in re.findall(r'data-count="(\d+)"', svg)]
    assert len([c for c in counts if c]) >= 10, name
    ticks = [float(t) for t in re.findall(r'class="tick"[^>]*>([^<]+)<',
                                          svg)]
    assert len(ticks) >= 2, name
    # Round: 1, 2, 2.5 or 5 times a power of ten apart, each a multiple
    # of that step, written with few digits.
    step = ticks[1] - ticks[0]
    mantissa = float(f"{step:.3e}".split("e")[0])
    assert mantissa in (1.0, 2.0, 2.5, 5.0), (name, ticks)
    for t in ticks:
      assert abs(t / step - round(t / step)) < 1e-9, (name, ticks)
      assert len(re.sub(r"[^0-9]", "", f"{t:g}").strip("0")) <= 3


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


def test_the_report_says_where_the_deciles_are(penguins):
  """10%, median and 90% of the flipper lengths (integers): the values
  numpy's inverted-CDF percentiles give."""
  out, _ = penguins
  page = (out / "report.html").read_text()
  section = page[page.index("id='feature-flipper_length_mm'"):]
  line = re.search(r"<div class='deciles muted'>([^<]*)</div>", section)
  want = np.percentile(_column("flipper_length_mm"), [10, 50, 90],
                       method="inverted_cdf")
  assert line.group(1) == "10%: ~{:g}, median: ~{:g}, 90%: ~{:g}".format(
      *want)

"""Histograms people can read (issue 31): exact and mergeable in any order
(encoding.histogram), fine enough that a feature spanning less than a
power of two gets ten bars or more, in statistics.pb and in the report,
with round axis labels.

Real data: the Palmer penguins (CC0, tests/data/penguins): flipper length
172-231 mm, bill length 32.1-59.6 mm, bill depth 13.1-21.5 mm each span
less than one power of two (the old fixed buckets gave them 3 to 5 bars).
"""

import csv
import pathlib
import re

import numpy as np
import pytest

import beam_tfrecords as btr

from tests.helpers.histogram import _inside


PENGUINS = pathlib.Path(__file__).resolve().parents[1] / "data" / "penguins" / \
    "penguins.csv"
NARROW = ("flipper_length_mm", "bill_length_mm", "bill_depth_mm")


def _column(name):
  with open(PENGUINS) as f:
    return np.array([float(r[name]) for r in csv.DictReader(f) if r[name]])


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

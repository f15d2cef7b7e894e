"""How much a feature's distribution differs between two splits or two
datasets: one measure for the report, the publish gate and anything else.

    d = distance(distribution_of(new), distribution_of(old))
    d.kind, d.value        # "Jensen-Shannon", 0.031
    d.new, d.old           # the shares compared, for a chart

A `Distribution` comes from either form a build keeps:
- dataset.json's `statistics` (an `expect:` section's full histogram or
  exact value counts: `from_json`);
- statistics.pb (TFDV's FeatureNameStatistics: the fine histogram of
  numbers, the top values of text: `from_proto`).

Both give the same numbers for the same data, and dataset.json's form is
preferred where both datasets have it (`pick`): the report shows the very
distance the gate judged.

Numbers: the Jensen-Shannon divergence (base 2, 0..1) of the two fine
histograms put on common buckets (encoding.histogram.comparable: the
finest at which the two have at most DRIFT_KEYS non-empty buckets
together). Categories (text, int64 with `values:`): the L-infinity
distance of the values' shares, every value counted: those not counted
one by one (outside the allowed set, past the top values kept) as one
bucket, OTHER.
"""

import dataclasses
import math
from typing import Any, Dict, Mapping, Optional

from beam_tfrecords.core.info import FeatureStats
from beam_tfrecords.encoding import histogram

__all__ = ["Distribution", "Drift", "distance", "from_json", "from_proto",
           "pick", "OTHER", "JENSEN_SHANNON", "L_INFINITY",
           "jensen_shannon", "l_infinity", "log2"]

JENSEN_SHANNON = "Jensen-Shannon"
L_INFINITY = "L-infinity"
# The bucket of every value not counted one by one.
OTHER = ("other",)


@dataclasses.dataclass(frozen=True)
class Distribution:
  """A feature's values: `fine`, its fine histogram (numbers), or
  `counts` (categories, OTHER for the rest)."""
  fine: Optional[histogram.Histogram] = None
  counts: Optional[Dict[Any, int]] = None
  # How `counts` were taken: "allowed" (the values: set, the rest in
  # OTHER), "all" (every value), "top" (statistics.pb's top values);
  # counts taken alike compare.
  counted: str = ""


@dataclasses.dataclass(frozen=True)
class Drift:
  """A distance (`kind`: JENSEN_SHANNON or L_INFINITY) and the shares it
  compared: {(low, high): share} of numbers, {value: share} of
  categories."""
  kind: str
  value: float
  new: Dict[Any, float]
  old: Dict[Any, float]


def from_json(s: FeatureStats) -> Optional[Distribution]:
  """The distribution in one feature's dataset.json statistics (None:
  not kept, without an `expect:` section that measures drift, or too many
  distinct values to count one by one)."""
  if s.drift_note:
    return None
  if s.histogram is not None:
    return Distribution(fine=histogram.from_json(s.histogram))
  if s.frequencies is not None:
    counts: Dict[Any, int] = {v: c for v, c in s.frequencies}
    rest = s.values - sum(counts.values())
    if rest > 0:
      counts[OTHER] = rest
    return Distribution(counts=counts, counted=(
        "allowed" if s.unexpected is not None else "all"))
  return None


def from_proto(feature) -> Optional[Distribution]:
  """The distribution in statistics.pb's FeatureNameStatistics (None:
  no fine histogram, no top values)."""
  from beam_tfrecords.encoding.stats import FINE_LEVEL_STAT, FINE_STAT
  if feature.HasField("num_stats"):
    level = fine = None
    for custom in feature.custom_stats:
      if custom.name == FINE_LEVEL_STAT:
        level = int(custom.num)
      elif custom.name == FINE_STAT:
        fine = [(b.low_value, b.high_value, int(b.sample_count))
                for b in custom.histogram.buckets]
    if level is None or fine is None:
      return None
    return Distribution(fine=histogram.from_buckets(level, fine))
  if feature.HasField("string_stats") and feature.string_stats.top_values:
    s = feature.string_stats
    counts: Dict[Any, int] = {v.value: int(v.frequency)
                              for v in s.top_values}
    rest = s.common_stats.tot_num_values - sum(counts.values())
    if rest > 0:
      counts[OTHER] = rest
    return Distribution(counts=counts, counted="top")
  return None


def pick(new_json: Optional[FeatureStats],
         old_json: Optional[FeatureStats], new_proto, old_proto
         ) -> Optional[Drift]:
  """The distance of one feature between two datasets: from dataset.json's
  statistics where both have them (what the gate judged), else from
  statistics.pb's."""
  a = from_json(new_json) if new_json is not None else None
  b = from_json(old_json) if old_json is not None else None
  if a is not None and b is not None:
    return distance(a, b)
  if new_proto is None or old_proto is None:
    return None
  a, b = from_proto(new_proto), from_proto(old_proto)
  return distance(a, b) if a is not None and b is not None else None


def distance(new: Optional[Distribution], old: Optional[Distribution]
             ) -> Optional[Drift]:
  """The drift from `old` to `new` (None: not comparable: a number beside
  a category, or an empty side)."""
  if new is None or old is None:
    return None
  if new.fine is not None and old.fine is not None:
    if not new.fine.total or not old.fine.total:
      return None
    level, a, b = histogram.comparable(new.fine, old.fine)
    p = {histogram.bounds(k, level): v for k, v in a.items()}
    q = {histogram.bounds(k, level): v for k, v in b.items()}
    return Drift(JENSEN_SHANNON, jensen_shannon(p, q), p, q)
  if new.counts is not None and old.counts is not None and \
      new.counted == old.counted:
    p, q = _shares(new.counts), _shares(old.counts)
    if not p or not q:
      return None
    return Drift(L_INFINITY, l_infinity(p, q), p, q)
  return None


def _shares(counts: Mapping[Any, int]) -> Dict[Any, float]:
  total = sum(counts.values())
  return {k: c / total for k, c in counts.items()} if total else {}


def l_infinity(p: Mapping[Any, float], q: Mapping[Any, float]) -> float:
  """The largest difference of two distributions' shares."""
  return max((abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q)),
             default=0.0)


def jensen_shannon(p: Mapping[Any, float], q: Mapping[Any, float]) -> float:
  """The Jensen-Shannon divergence, base 2 (0..1), of two distributions'
  shares (the same on every CPU: log2 below)."""
  js = 0.0
  for k in set(p) | set(q):
    x, y = p.get(k, 0.0), q.get(k, 0.0)
    m = (x + y) / 2
    js += (x * log2(x / m) if x else 0.0) / 2 + \
        (y * log2(y / m) if y else 0.0) / 2
  return min(1.0, max(0.0, js))  # rounding can pass the bounds


def log2(x: float) -> float:
  """log2 of a positive finite float with +, -, *, / only, so the same to
  the last bit on every CPU (the C library's log2 picks an implementation
  by CPU feature, FMA or not): x = m * 2**e with m in [sqrt(1/2), sqrt(2)),
  ln(m) = 2 atanh(z) = 2 (z + z^3/3 + z^5/5 + ...), z = (m-1)/(m+1),
  |z| < 0.172: 11 terms reach below 2**-53."""
  m, e = math.frexp(x)  # exact: x = m * 2**e, m in [0.5, 1)
  if m < _SQRT_HALF:
    m, e = m * 2, e - 1
  z = (m - 1) / (m + 1)
  z2, term, total = z * z, z, 0.0
  for k in range(1, 24, 2):
    total += term / k
    term *= z2
  return e + 2 * total / _LN2


_SQRT_HALF = float.fromhex("0x1.6a09e667f3bcdp-1")
_LN2 = float.fromhex("0x1.62e42fefa39efp-1")

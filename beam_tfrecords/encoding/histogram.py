"""Exact, mergeable histograms of numbers, fine enough for any range.

A value x != 0 falls in a bucket of its power of two, [2**(e-1), 2**e)
(e: np.frexp's exponent of |x|), cut into 2**level equal widths: bucket
(e, j) holds [2**(e-1) * (1 + j / 2**level),
2**(e-1) * (1 + (j + 1) / 2**level)). Its key is (e + _BIAS) * 2**level +
j (negated for negative x); zero has the key 0.
Computing a key takes np.frexp and integer steps only, so it is the same
on every CPU, and a key at a finer level becomes its coarser key by a
right shift.

The level is chosen from the values: the finest (at most FINEST, 2**40
buckets per power of two) at which the keys of the positive
values and those of the negative values together span at most SPAN
buckets. It depends only on the smallest and largest key of each sign
at level FINEST, which a merge combines by min and max; so a batch's
histogram, a merge of batches' histograms in any order and one of all the
values at once are the same. A feature of values within a narrow range
(epoch seconds of one day, latitudes) gets SPAN / 2 buckets or more
between its smallest and largest value; a feature over many powers of
two gets the same number of buckets in each.

`bars` re-bins a histogram into about BARS buckets of a round width
(1, 2, 2.5 or 5 times a power of ten) for the report and statistics.pb's
standard histogram; `quantile_bars` into ten of about equal counts.
Every fine bucket goes whole into one bar, so their counts stay exact and
their edges are bucket edges. `comparable` puts two histograms on common
buckets (drift, a split beside another).
"""

import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["Histogram", "of_values", "of_ints", "of_value_counts", "merge",
           "bounds", "buckets", "bars", "quantile_bars", "comparable",
           "to_json", "from_json", "FINEST", "SPAN", "BARS", "DRIFT_KEYS", "BY_VALUE"]

FINEST = 40
SPAN = 1024
BARS = 20
# Drift and the comparison of two histograms: at most this many common
# non-empty buckets (fewer would blur a shift, more would count noise).
DRIFT_KEYS = 64
# np.frexp's exponents of finite float64 lie in [-1073, 1024]: + _BIAS
# makes them positive.
_BIAS = 1075
_NO_KEYS = np.zeros(0, dtype=np.int64)
# (smallest, largest) key at level FINEST of the positive, then of the
# negative values' magnitudes; None for a sign without values.
Ranges = Tuple[Optional[Tuple[int, int]], Optional[Tuple[int, int]]]


class Histogram:
  """Counts per key at one level (see the module docstring).

  Attributes:
    level: buckets per power of two: 2**level.
    keys: sorted int64 keys of the non-empty buckets.
    counts: int64 counts, one per key.
    ranges: what chose the level (merged by min / max).
  """
  __slots__ = ("level", "keys", "counts", "ranges")

  def __init__(self, level: int, keys: np.ndarray, counts: np.ndarray,
               ranges: Ranges):
    self.level, self.keys, self.counts, self.ranges = (level, keys, counts,
                                                       ranges)

  def __reduce__(self):
    # The arrays as bytes: a batch's statistics (a histogram per number
    # feature) are pickled into each kept unit (core.unit_cache), and an
    # ndarray's own pickling took most of that (bytes pickle 4x faster).
    return (_unpickled, (self.level, self.keys.tobytes(), self.keys.dtype.str,
                         self.counts.tobytes(), self.counts.dtype.str,
                         self.ranges))

  def __eq__(self, other):
    return isinstance(other, Histogram) and self.level == other.level and \
        self.ranges == other.ranges and \
        np.array_equal(self.keys, other.keys) and \
        np.array_equal(self.counts, other.counts)

  def __repr__(self):
    return (f"Histogram(level={self.level}, "
            f"{dict(zip(self.keys.tolist(), self.counts.tolist()))})")

  @property
  def total(self) -> int:
    return int(self.counts.sum())


def _unpickled(level: int, keys: bytes, keys_type: str, counts: bytes,
               counts_type: str, ranges: Ranges) -> Histogram:
  return Histogram(level, np.frombuffer(keys, dtype=keys_type),
                   np.frombuffer(counts, dtype=counts_type), ranges)


def _span(ranges: Ranges, shift: int) -> int:
  return sum((hi >> shift) - (lo >> shift) + 1
             for lo, hi in (r for r in ranges if r is not None))


def _level(ranges: Ranges) -> int:
  """The finest level at which the ranges span at most SPAN keys: the
  smallest shift of at most FINEST at which they do, found by halving
  (a coarser level never spans more keys)."""
  low, high = 0, FINEST
  while low < high:
    shift = (low + high) // 2
    if _span(ranges, shift) > SPAN:
      low = shift + 1
    else:
      high = shift
  return FINEST - low


def _either(x: Optional[Tuple[int, int]], y: Optional[Tuple[int, int]]
            ) -> Optional[Tuple[int, int]]:
  if x is None or y is None:
    return x if y is None else y
  return min(x[0], y[0]), max(x[1], y[1])


def _combined(a: Ranges, b: Ranges) -> Ranges:
  return _either(a[0], b[0]), _either(a[1], b[1])


def _range(keys: np.ndarray) -> Optional[Tuple[int, int]]:
  return (int(keys.min()), int(keys.max())) if len(keys) else None


def _finest_keys(magnitudes: np.ndarray) -> np.ndarray:
  """Keys at level FINEST of positive finite float64 values."""
  mantissa, exponent = np.frexp(magnitudes)  # m in [0.5, 1)
  # (2m - 1) * 2**FINEST is exact (2m - 1 has at most 52 fraction bits);
  # its floor is the bucket within the power of two.
  sub = ((2 * mantissa - 1) * float(1 << FINEST)).astype(np.int64)
  return ((exponent.astype(np.int64) + _BIAS) << FINEST) + sub


def _count(keys: np.ndarray, shift: int, weights: Optional[np.ndarray]
           ) -> Tuple[np.ndarray, np.ndarray]:
  """(sorted keys >> shift, counts) of non-negative keys spanning at
  most about SPAN after the shift (each counted `weights` times)."""
  if not len(keys):
    return _NO_KEYS, _NO_KEYS
  keys = keys >> shift
  low = int(keys.min())
  # Counts below 2**53 add exactly in float64.
  counts = np.bincount(keys - low, weights=weights)
  found = np.flatnonzero(counts)
  return found.astype(np.int64) + low, counts[found].astype(np.int64)


def of_values(x: np.ndarray, weights: Optional[np.ndarray] = None
              ) -> Histogram:
  """The histogram of finite float64 values (each counted `weights`
  times: int64, when given)."""
  up, down = x > 0, x < 0
  positive, negative = x[up], -x[down]
  w_pos = w_neg = None
  if weights is None:
    zeros = len(x) - len(positive) - len(negative)
  else:
    w_pos, w_neg = weights[up], weights[down]
    zeros = int(weights.sum()) - int(w_pos.sum()) - int(w_neg.sum())
  pos = _finest_keys(positive)
  neg = _finest_keys(negative)
  ranges = (_range(pos), _range(neg))
  level = _level(ranges)
  pk, pc = _count(pos, FINEST - level, w_pos)
  nk, nc = _count(neg, FINEST - level, w_neg)
  keys = [-nk[::-1], np.zeros(1 if zeros else 0, np.int64), pk]
  counts = [nc[::-1], np.full(1 if zeros else 0, zeros, np.int64), pc]
  return Histogram(level, np.concatenate(keys), np.concatenate(counts),
                   ranges)


# int64 values within this range are counted by value first (one
# np.bincount), then the distinct values are put in their buckets.
BY_VALUE = 1 << 16


def of_ints(v: np.ndarray, low: int, high: int) -> Histogram:
  """The histogram of int64 values `v` (smallest `low`, largest `high`)
  as float64 values: of_values(v.astype(np.float64)), faster for
  values within a small range (most int64 features)."""
  if high - low >= BY_VALUE:
    return of_values(v.astype(np.float64))
  return of_value_counts(low, np.bincount(v - low))


def of_value_counts(low: int, counts: np.ndarray) -> Histogram:
  """The histogram of int64 values given as the count of each of low,
  low + 1, ... (np.bincount(v - low), or the native core's: of_ints'
  second step)."""
  found = np.flatnonzero(counts)
  return of_values((found + low).astype(np.float64),
                   counts[found].astype(np.int64))


def _coarser(keys: np.ndarray, shift: int) -> np.ndarray:
  """Keys `shift` levels coarser (the sign kept, 0 stays 0)."""
  if not shift:
    return keys
  return np.sign(keys) * (np.abs(keys) >> shift)


def _summed(keys: np.ndarray, counts: np.ndarray
            ) -> Tuple[np.ndarray, np.ndarray]:
  unique, where = np.unique(keys, return_inverse=True)
  # Counts below 2**53 add exactly in float64.
  return unique, np.bincount(where, weights=counts,
                             minlength=len(unique)).astype(np.int64)


def merge(a: Optional[Histogram], b: Optional[Histogram]
          ) -> Optional[Histogram]:
  """The histogram of both histograms' values (exact; any order)."""
  return merge_all([a, b])


def merge_all(histograms: Sequence[Optional[Histogram]]
              ) -> Optional[Histogram]:
  """The histogram of all their values, at the level their ranges
  together allow (None counts as no histogram; one is returned as it
  is). Exact and in any order: the same as merging them two at a time,
  since each step's level is no coarser than the last one's."""
  got = [h for h in histograms if h is not None]
  if len(got) <= 1:
    return got[0] if got else None
  ranges = got[0].ranges
  for h in got[1:]:
    ranges = _combined(ranges, h.ranges)
  level = _level(ranges)
  keys, counts = _summed(
      np.concatenate([_coarser(h.keys, h.level - level) for h in got]),
      np.concatenate([h.counts for h in got]))
  return Histogram(level, keys, counts, ranges)


def bounds(key: int, level: int) -> Tuple[float, float]:
  """The [low, high) range of a key (for a negative key, (low, high]:
  the mirror of the positive bucket); (0, 0) for zero."""
  if key == 0:
    return 0.0, 0.0
  magnitude = abs(key)
  power = (magnitude >> level) - _BIAS - 1 - level
  j = (1 << level) + (magnitude & ((1 << level) - 1))
  low, high = _ldexp(j, power), _ldexp(j + 1, power)
  return (low, high) if key > 0 else (-high, -low)


def _ldexp(m: int, e: int) -> float:
  try:
    return math.ldexp(float(m), e)
  except OverflowError:  # the top bucket of float64
    return math.inf


def buckets(h: Histogram) -> List[Tuple[float, float, int]]:
  """[(low, high, count)] of the non-empty buckets, lowest first."""
  return [bounds(k, h.level) + (c,)
          for k, c in zip(h.keys.tolist(), h.counts.tolist())]


def round_width(span: float, pieces: int) -> float:
  """The smallest of 1, 2, 2.5, 5 times a power of ten that cuts `span`
  into at most `pieces` pieces (from the decimal text of the floats, so
  the same on every CPU)."""
  wanted = span / pieces
  if not wanted > 0 or math.isinf(wanted):
    return 1.0 if not wanted > 0 else wanted
  power = int(f"{wanted:.17e}".split("e")[1])
  for digits in ("1", "2", "2.5", "5", "10"):
    width = float(f"{digits}e{power}")
    if width >= wanted:
      return width
  return float(f"1e{power + 1}")


def _grouped(fine: Sequence[Tuple[float, float, int]], group: Sequence[int]
             ) -> List[Tuple[float, float, int]]:
  out: List[List] = []
  last = None
  for (low, high, count), g in zip(fine, group):
    if out and g == last:
      out[-1][1] = high
      out[-1][2] += count
    else:
      out.append([low, high, count])
    last = g
  return [tuple(b) for b in out]


def bars(h: Histogram, bar_count: int = BARS
         ) -> Tuple[List[Tuple[float, float, int]], float]:
  """(bars, width): the buckets re-binned into bars of a round width, at
  most about `bar_count` over the values' range; each bar (low, high, count)
  is the union of the fine buckets whose low edge lies in its
  [i * width, (i + 1) * width)."""
  fine = buckets(h)
  if not fine:
    return [], 1.0
  low, high = fine[0][0], fine[-1][1]
  width = round_width(high - low, bar_count)
  if math.isinf(width):
    return fine, width
  return _grouped(fine, [math.floor(b[0] / width) for b in fine]), width


def quantile_bars(h: Histogram, bar_count: int = 10
                  ) -> List[Tuple[float, float, int]]:
  """The buckets re-binned into `bar_count` bars of about equal counts: a bar
  ends with the first bucket whose running count reaches its share
  (exact counts; bar edges are bucket edges)."""
  fine = buckets(h)
  total = sum(c for _, _, c in fine)
  running, group, bar = 0, [], 0
  for _, _, count in fine:
    group.append(bar)
    running += count
    while bar < bar_count - 1 and running * bar_count >= (bar + 1) * total:
      bar += 1
  return _grouped(fine, group)


def comparable(a: Histogram, b: Histogram, most: int = DRIFT_KEYS
               ) -> Tuple[int, Dict[int, float], Dict[int, float]]:
  """(level, shares of a, shares of b) on common keys: both at the
  finest level at which they have at most `most` non-empty keys together
  (a function of the two histograms alone: the same in any order)."""
  level = min(a.level, b.level)
  keys = [_coarser(h.keys, h.level - level) for h in (a, b)]
  while level > 0 and len(np.union1d(*keys)) > most:
    level -= 1
    keys = [_coarser(k, 1) for k in keys]
  shares = []
  for k, h in zip(keys, (a, b)):
    unique, total = _summed(k, h.counts)
    whole = h.total or 1
    shares.append({int(key): c / whole
                   for key, c in zip(unique.tolist(), total.tolist())})
  return level, shares[0], shares[1]


def to_json(h: Histogram) -> dict:
  """{"level", "counts": [[key, count], ...]} (dataset.json)."""
  return {"level": h.level, "counts": [[k, c] for k, c in zip(
      h.keys.tolist(), h.counts.tolist())]}


def from_json(data: dict) -> Histogram:
  """A histogram from to_json's form (for comparisons: no ranges)."""
  pairs = data.get("counts") or []
  return Histogram(int(data["level"]),
                   np.array([k for k, _ in pairs], dtype=np.int64),
                   np.array([c for _, c in pairs], dtype=np.int64),
                   (None, None))


def from_buckets(level: int, fine: Sequence[Tuple[float, float, int]]
                 ) -> Histogram:
  """A histogram from its buckets' (low, high, count) (statistics.pb's
  fine histogram; for comparisons: no ranges)."""
  low = np.array([b[0] for b in fine], dtype=np.float64)
  high = np.array([b[1] for b in fine], dtype=np.float64)
  # A bucket's magnitudes start at its low edge (its mirror's, below 0).
  magnitude = np.where(low > 0, low, -high)
  keys = np.zeros(len(fine), dtype=np.int64)
  nonzero = magnitude > 0
  keys[nonzero] = _finest_keys(magnitude[nonzero]) >> (FINEST - level)
  keys = np.where(low > 0, keys, -keys)
  return Histogram(level, keys.astype(np.int64),
                   np.array([c for _, _, c in fine], dtype=np.int64),
                   (None, None))

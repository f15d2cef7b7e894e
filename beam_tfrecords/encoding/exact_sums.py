"""Exact sums and sums of squares of float64 and int64 values: the same
integers on every CPU, for any batching and any merge order.

The statistics' mean and standard deviation come from these sums. A float
sum in the usual way is rounded after every addition, so its last bits
depend on the order of the additions: on the batch sizes, on the order in
which the workers' sums are merged, and on the CPU (BLAS's dot product
and SIMD reductions add in an order of their own per instruction set).
Here nothing is rounded until the end:

* a finite float64 is exactly an integer times a power of two,
  x = M * 2**E with |M| < 2**53 (np.frexp), so a sum of floats is an
  integer multiple of 2**SUM_SCALE, the smallest such power, and a sum of
  their squares one of 2**SQUARES_SCALE;
* a batch's sum is made with integer-valued steps only: the integers are
  cut into 27-bit (floats) or 21-bit (int64) pieces, and the pieces are
  added per exponent by np.bincount or np.sum. Every partial sum is an
  integer below 2**53, which float64 and int64 hold exactly, so the order
  in which NumPy adds them (SIMD lanes, pairwise summation) changes
  nothing;
* the pieces are put together as Python integers. Merging two sums is
  integer addition: exact, associative, commutative.

`mean` and `std_dev` then round once: Python's int / int is correctly
rounded, and the variance is computed exactly as
(n * sum(x^2) - sum(x)^2) / n^2, so there is no cancellation however large
the values are against their spread.
"""

import math
from typing import Tuple

import numpy as np

__all__ = ["SUM_SCALE", "SQUARES_SCALE", "sums", "mean", "std_dev"]

# x = M * 2**E with E >= -1126 for every finite float64 (the smallest
# subnormal, 2**-1074, is 2**52 * 2**-1126 in np.frexp's terms).
SUM_SCALE = -1126
SQUARES_SCALE = 2 * SUM_SCALE

_MANTISSA_BITS = 53
# Float mantissas are cut in 27-bit pieces, int64 values in 21-bit ones;
# values are summed in slices small enough that no partial sum of pieces
# reaches 2**53 (floats) or overflows int64 (int64 squares).
_FLOAT_PIECE = 27
_FLOAT_SLICE = 1 << 25
_INT_PIECE = 21
_INT_SLICE = 1 << 17
# The standard deviation's square root is taken this many bits finer.
_STD_EXTRA_BITS = 64


def sums(values: np.ndarray) -> Tuple[int, int]:
  """(sum of values, sum of their squares) of finite float64 or int64
  values, exactly: integers in units of 2**SUM_SCALE and
  2**SQUARES_SCALE."""
  total = squares = 0
  if values.dtype.kind == "u":  # uint64 past 2**63 would wrap in int64
    raise TypeError(f"exact sums of {values.dtype} are not supported")
  if values.dtype.kind == "i":
    values = values.astype(np.int64, copy=False)
    if _small(values):
      # Every square and both sums fit int64: NumPy's own sums are exact
      # (integer addition; no order can change them).
      return (int(np.sum(values)) << -SUM_SCALE,
              int(np.sum(values * values)) << -SQUARES_SCALE)
    for start in range(0, len(values), _INT_SLICE):
      t, q = _int_sums(values[start:start + _INT_SLICE])
      total, squares = total + t, squares + q
    return total << -SUM_SCALE, squares << -SQUARES_SCALE
  values = values.astype(np.float64, copy=False)
  for start in range(0, len(values), _FLOAT_SLICE):
    t, q = _float_sums(values[start:start + _FLOAT_SLICE])
    total, squares = total + t, squares + q
  return total, squares


def _small(values: np.ndarray) -> bool:
  """Whether n * max|v|**2 < 2**63: then no int64 sum of the values or
  of their squares overflows."""
  if not len(values):
    return True
  top = max(-int(values.min()), int(values.max()))
  return top < 1 << 31 and len(values) * top * top < 1 << 63


def mean(total: int, count: int) -> float:
  """The mean, correctly rounded, of `count` values summing to
  total * 2**SUM_SCALE."""
  return total / (count << -SUM_SCALE)


def std_dev(total: int, squares: int, count: int) -> float:
  """The population standard deviation of `count` values with these exact
  sums: sqrt(n * sum(x^2) - sum(x)^2) / n, the difference exact, its
  square root to 64 bits more than a float64 holds (math.isqrt), then
  rounded once (so the same on every machine; correctly rounded but for
  odds of about 2**-64). No overflow for values near the float64 limit."""
  # n^2 * variance, in units of 2**SQUARES_SCALE; never < 0 (exact).
  spread = count * squares - total * total
  root = math.isqrt(spread << 2 * _STD_EXTRA_BITS)
  try:
    return root / (count << (-SUM_SCALE + _STD_EXTRA_BITS))
  except OverflowError:  # rounds past the largest float64
    return math.inf


def _pieces_by_exponent(ints: np.ndarray, index: np.ndarray, bins: int,
                        piece: int) -> Tuple[np.ndarray, np.ndarray]:
  """Per exponent bin, the exact sums of the high and low pieces of
  `ints` (|ints| < 2**(2 * piece)): float64 counts of integers < 2**53."""
  high = np.bincount(index, weights=(ints >> piece).astype(np.float64),
                     minlength=bins)
  low = np.bincount(index, weights=(ints & ((1 << piece) - 1)).astype(
      np.float64), minlength=bins)
  return high, low


def _float_sums(x: np.ndarray) -> Tuple[int, int]:
  mantissa, exponent = np.frexp(x)
  # x = ints * 2**(exponent - 53), exactly; ints = 0 for x = 0.
  ints = (mantissa * float(1 << _MANTISSA_BITS)).astype(np.int64)
  low_exp = int(exponent.min())
  index = exponent.astype(np.intp) - low_exp
  bins = int(index.max()) + 1
  shift = low_exp - _MANTISSA_BITS - SUM_SCALE  # bin 0's unit, 2**shift
  p = _FLOAT_PIECE
  high, low = _pieces_by_exponent(ints, index, bins, p)
  total = 0
  for b in np.flatnonzero((high != 0) | (low != 0)):
    total += ((int(high[b]) << p) + int(low[b])) << (shift + int(b))
  # ints**2 = a*a * 2**54 + 2*a*b * 2**27 + b*b, with |ints| = a * 2**27 + b;
  # each term < 2**54, summed per exponent in 27-bit pieces.
  magnitude = np.abs(ints)
  a, b_ = magnitude >> p, magnitude & ((1 << p) - 1)
  squares = 0
  sq_shift = 2 * (low_exp - _MANTISSA_BITS) - SQUARES_SCALE
  for term, weight in ((a * a, 2 * p), (2 * a * b_, p), (b_ * b_, 0)):
    high, low = _pieces_by_exponent(term, index, bins, p)
    for b in np.flatnonzero((high != 0) | (low != 0)):
      squares += ((int(high[b]) << p) + int(low[b])) << (
          sq_shift + 2 * int(b) + weight)
  return total, squares


def _int_sums(v: np.ndarray) -> Tuple[int, int]:
  """Exact (sum, sum of squares) of int64 values, in units of 1."""
  p, mask = _INT_PIECE, (1 << _INT_PIECE) - 1
  # v = p2 * 2**42 + p1 * 2**21 + p0 with p0, p1 in [0, 2**21) and p2 in
  # [-2**21, 2**21): int64 sums of fewer than 2**41 pieces are exact.
  total = (int(np.sum(v >> 2 * p)) << 2 * p) + \
      (int(np.sum((v >> p) & mask)) << p) + int(np.sum(v & mask))
  # |v| (2**63 for the smallest int64, as uint64) in pieces of 21, 21 and
  # 22 bits (the top one unmasked: it is 2**21 for 2**63); each product
  # below is < 2**45, so a slice of 2**17 sums in int64.
  u = np.abs(v).view(np.uint64)
  q = [((u >> np.uint64(k * p)) & np.uint64(mask)).astype(np.int64)
       for k in range(2)] + [(u >> np.uint64(2 * p)).astype(np.int64)]
  squares = 0
  for weight, term in ((0, q[0] * q[0]), (1, 2 * q[0] * q[1]),
                       (2, 2 * q[0] * q[2] + q[1] * q[1]),
                       (3, 2 * q[1] * q[2]), (4, q[2] * q[2])):
    squares += int(np.sum(term)) << (weight * p)
  return total, squares

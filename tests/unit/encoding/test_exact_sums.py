"""beam_tfrecords/encoding/exact_sums.py, on values: Exact sums and sums of
squares of float64 and int64 values: the same integers on every CPU, for any
batching and any merge order."""

import decimal
from fractions import Fraction
import math

import numpy as np
import pytest

from beam_tfrecords.encoding import exact_sums


def _exact(values):
  total = sum(Fraction(v) for v in values)
  return total, sum(Fraction(v) ** 2 for v in values)


@pytest.mark.parametrize("values", [
    [0.1, 0.2, -0.3],
    [5e-324, -5e-324, 1.7976931348623157e308, -1.7976931348623157e308,
     0.0, 1.0],
    [1e-300 * (i % 7 - 3) for i in range(1000)],
    [1e9 + 0.001 * i for i in range(1000)],  # large mean, small spread
], ids=["tenths", "extremes", "tiny", "offset"])
def test_float_sums_are_exact_and_round_once(values):
  x = np.array(values, np.float64)
  total, squares = exact_sums.sums(x)
  s, q = _exact(values)
  assert Fraction(total) * Fraction(2) ** exact_sums.SUM_SCALE == s
  assert Fraction(squares) * Fraction(2) ** exact_sums.SQUARES_SCALE == q
  n = len(values)
  assert exact_sums.mean(total, n) == float(s / n)  # correctly rounded
  variance = q / n - (s / n) ** 2
  with decimal.localcontext(decimal.Context(prec=60)):
    want = float((decimal.Decimal(variance.numerator) /
                  decimal.Decimal(variance.denominator)).sqrt())
  assert exact_sums.std_dev(total, squares, n) == want


def test_a_large_offset_does_not_cancel_the_spread():
  # sum(x^2)/n - mean^2 in floats loses every digit here; exact does not.
  x = np.array([1e9 + 0.001 * i for i in range(1000)])
  total, squares = exact_sums.sums(x)
  got = exact_sums.std_dev(total, squares, len(x))
  assert got == pytest.approx(0.001 * math.sqrt((1000 ** 2 - 1) / 12),
                              rel=1e-6)
  naive = math.sqrt(abs(float(np.dot(x, x)) / len(x) - x.mean() ** 2))
  assert abs(naive - got) > 0.01 * got


def test_int64_sums_are_exact_at_the_extremes():
  v = np.array([2**63 - 1, -2**63, -2**63, 5, -7, 2**53 + 1], np.int64)
  total, squares = exact_sums.sums(v)
  ints = [int(i) for i in v]
  assert total == sum(ints) << -exact_sums.SUM_SCALE
  assert squares == sum(i * i for i in ints) << -exact_sums.SQUARES_SCALE
  assert exact_sums.mean(total, len(v)) == float(Fraction(sum(ints),
                                                          len(v)))
  # More values than one chunk of the int64 path, all at the top.
  big = np.full(300_000, 2**63 - 1, np.int64)
  total, squares = exact_sums.sums(big)
  assert total == (300_000 * (2**63 - 1)) << -exact_sums.SUM_SCALE
  assert exact_sums.std_dev(total, squares, len(big)) == 0.0

"""What tests/e2e/test_histogram.py shares with the tests split from it
(tests/unit, tests/cluster)."""


def _inside(values, low, high):
  if low == high:
    return int((values == low).sum())
  above = values >= low if low >= 0 else values > low
  below = values <= high if high <= 0 else values < high
  return int((above & below).sum())

"""What tests/e2e/test_columns.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import numpy as np


def _same(got, want):
  """Columns equal: dicts, arrays (floats bit for bit: NaN, -0.0)."""
  if isinstance(want, dict):
    assert set(got) == set(want)
    for k in want:
      _same(got[k], want[k])
    return
  assert isinstance(got, np.ndarray) and got.dtype == want.dtype, (
      got, want)
  assert got.shape == want.shape
  if got.dtype == np.float32:
    assert got.tobytes() == want.tobytes()
  else:
    assert got.tolist() == want.tolist()

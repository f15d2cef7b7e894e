"""beam_tfrecords/read/torch.py, on values: PyTorch reads a dataset (or a
window of them) without TensorFlow."""

import os

import pytest


# Skipped without the torch extra (make setup-extras), but for CI, which
# installs it and sets BTR_REQUIRE_EXTRAS.
if os.environ.get("BTR_REQUIRE_EXTRAS"):
  import torch
else:
  torch = pytest.importorskip("torch")


def test_read_ahead_passes_errors_and_stops_when_closed():
  from beam_tfrecords.read.torch import _ahead

  def items():
    yield 1
    yield 2
    raise ValueError("bad shard")
  it = _ahead(items())
  assert [next(it), next(it)] == [1, 2]
  with pytest.raises(ValueError, match="bad shard"):
    next(it)
  endless = _ahead(iter(range(10**9)))
  assert [next(endless) for _ in range(3)] == [0, 1, 2]
  endless.close()  # the thread sees the stop and ends
  import threading
  import time
  for _ in range(50):
    if not any(t.name == "btr-decode" for t in threading.enumerate()):
      break
    time.sleep(0.1)
  assert not any(t.name == "btr-decode" for t in threading.enumerate())

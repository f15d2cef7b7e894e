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


@pytest.mark.parametrize("options, frozen", [
    ({"num_workers": 2, "multiprocessing_context": "fork"}, True),
    ({"num_workers": 0, "multiprocessing_context": "fork"}, False),
    ({"num_workers": 2, "multiprocessing_context": "forkserver"}, False),
    ({"num_workers": 2, "multiprocessing_context": "spawn"}, False),
])
def test_workers_fork_with_the_process_s_objects_frozen(options, frozen):
  """Loader's workers start inside _frozen_for_fork: frozen where they
  fork (and thawed after), left alone where none fork."""
  import gc
  from beam_tfrecords.read import torch as reader
  assert gc.get_freeze_count() == 0
  with reader._frozen_for_fork(options):  # pylint: disable=protected-access
    inside = gc.get_freeze_count()
  assert bool(inside) is frozen
  assert gc.get_freeze_count() == 0


def test_objects_the_program_froze_stay_frozen(monkeypatch):
  """A program that froze objects of its own keeps them frozen: the
  garbage is collected before the fork instead."""
  import gc
  from beam_tfrecords.read import torch as reader
  collected = []
  real_collect = gc.collect
  monkeypatch.setattr(gc, "collect", lambda *a: collected.append(1) or
                      real_collect(*a))
  gc.freeze()
  try:
    before = gc.get_freeze_count()
    with reader._frozen_for_fork({"num_workers": 1,  # pylint: disable=protected-access
                                  "multiprocessing_context": "fork"}):
      assert gc.get_freeze_count() == before
    assert gc.get_freeze_count() == before and collected == [1]
  finally:
    gc.unfreeze()

"""A fixture for tests whose DataLoaders fork workers."""

import gc

import pytest


@pytest.fixture(autouse=True)
def no_garbage_to_fork():
  """DataLoader workers fork this process: the garbage of earlier tests
  (TensorFlow resources among it) is collected here first, not in a
  worker of a DataLoader made in the test (a worker hung so; Loader
  freezes it: tests/e2e/test_torch.py,
  test_forked_workers_never_collect_the_parent_s_garbage)."""
  gc.collect()

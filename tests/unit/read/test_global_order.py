"""beam_tfrecords/read/global_order.py, on values: a permutation of any
size from (seed, epoch), computed for any positions, and the ranks' and
workers' positions of it, resumable from what a rank consumed."""

import numpy as np
import pytest

from beam_tfrecords.read.global_order import GlobalOrder, Positions


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 17, 1000, 65_537])
def test_the_order_is_a_permutation(n):
  order = GlobalOrder(n, seed=7, epoch=0)
  got = order(np.arange(n))
  assert sorted(got.tolist()) == list(range(n))
  # Any positions, in any order, give the same records as the whole.
  picks = np.arange(n)[::-3]
  assert order(picks).tolist() == got[picks].tolist()


def test_the_order_depends_on_seed_and_epoch_only():
  a = GlobalOrder(10, 7, 0)(np.arange(10)).tolist()
  assert a == [9, 7, 4, 2, 6, 0, 3, 5, 1, 8]  # pinned: resumes need it
  assert GlobalOrder(10, 7, 0)(np.arange(10)).tolist() == a
  assert GlobalOrder(10, 7, 1)(np.arange(10)).tolist() != a
  assert GlobalOrder(10, 8, 0)(np.arange(10)).tolist() != a
  with pytest.raises(IndexError, match="position 10 of an order of 10"):
    GlobalOrder(10, 7)([10])


@pytest.mark.parametrize("n", [0, 1, 10, 1001])
@pytest.mark.parametrize("ranks", [1, 3])
@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("block", [1, 4, 7])
def test_workers_take_blocks_in_turn(n, ranks, workers, block):
  everything = []
  for rank in range(ranks):
    mine = [Positions(n, (rank, ranks), (w, workers), block)
            for w in range(workers)]
    got = [p.take(0, n + 1).tolist() for p in mine]
    assert [len(g) for g in got] == [len(p) for p in mine]
    # Block by block, worker after worker: the rank's share in order.
    ordered, at, w = [], [0] * workers, 0
    while any(at[i] < len(got[i]) for i in range(workers)):
      ordered += got[w][at[w]:at[w] + block]
      at[w] += block
      w = (w + 1) % workers
    assert ordered == list(range(rank * n // ranks,
                                 (rank + 1) * n // ranks))
    everything += ordered
    # Any piece of a worker's positions, from anywhere.
    for p, g in zip(mine, got):
      assert p.take(3, 5).tolist() == g[3:8]
  assert everything == list(range(n))


def test_drop_remainder_gives_equal_shares():
  sizes = [Positions(10, (r, 3), drop_remainder=True).share
           for r in range(3)]
  assert sizes == [3, 3, 3]
  assert [Positions(10, (r, 3)).share for r in range(3)] == [3, 3, 4]


@pytest.mark.parametrize("consumed", [0, 8, 9 * 8, 9 * 8 + 3, 101])
def test_a_resume_deals_the_rest_from_worker_0(consumed):
  """A resumed DataLoader asks worker 0 first: the rest of the share,
  block by block from worker 0, is the share after what was consumed."""
  n, block, workers = 101, 8, 2
  mine = [Positions(n, worker=(w, workers), block=block, origin=consumed)
          for w in range(workers)]
  got = [p.take(0, n).tolist() for p in mine]
  ordered, at, w = [], [0] * workers, 0
  while any(at[i] < len(got[i]) for i in range(workers)):
    ordered += got[w][at[w]:at[w] + block]
    at[w] += block
    w = (w + 1) % workers
  assert ordered == list(range(consumed, n))

"""A global shuffle's order: a permutation of a split's N records drawn
from (seed, epoch), its ranks' shares and their workers' portions, and the
records read in that order a window at a time.

    order = GlobalOrder(n, seed=7, epoch=3)
    order(np.arange(10))        # the record numbers of positions 0..9
    mine = Positions(n, shard=(rank, world), worker=(w, workers), block=256)
    for records in read_in_order(record_index, order, mine): ...

The permutation is a Feistel network of four rounds over [0, 2^k)
(k the bits N needs, made even), walked in cycles into [0, N): a
bijection computed for any positions in numpy, without holding N
numbers (100M records would be 800 MB per process).

A rank's share is positions [⌊rN/W⌋, ⌊(r+1)N/W⌋) of the order (with
`drop_remainder`, ⌊N/W⌋ each), as core.shares cuts files. Within it,
blocks of `block` positions go to the workers in turn, block b to worker
b mod workers: a DataLoader asks its workers for a batch in turn, so with
`block` its batch size it hands the rank its share in the order's order,
and the records consumed say exactly where to resume: a resumed
DataLoader asks worker 0 first again, so the blocks are dealt anew from
there (`origin`: the positions of the share already consumed).

Reading: the next `lookahead` positions are mapped to records, and every
gzip member they touch is inflated once (read.random_access.RecordIndex):
with 131,072 positions over a 1,568-member shard, each member gives about
80 records per inflate instead of one.
"""

from typing import Iterator, List, Optional, Tuple

import numpy as np

from beam_tfrecords.core.shares import check_share, stable_seed

__all__ = ["GlobalOrder", "Positions", "read_in_order", "LOOKAHEAD"]

# Positions read at a time (memory: this many records, about 54 MB of
# flights). An epoch inflates the split once per lookahead of the share
# (less what the member cache holds).
LOOKAHEAD = 131_072
_ROUNDS = 4
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
  """splitmix64's finalizer (uint64 in, uint64 out, wrapping)."""
  x = (x ^ (x >> np.uint64(30))) * _M1
  x = (x ^ (x >> np.uint64(27))) * _M2
  return x ^ (x >> np.uint64(31))


class GlobalOrder:
  """The permutation of [0, n) for (seed, epoch): `order(positions)` are
  the record numbers at those positions."""

  def __init__(self, n: int, seed: int, epoch: int = 0):
    # (ints: numpy's would give other keys through repr())
    self.n, self.seed, self.epoch = int(n), int(seed), int(epoch)
    bits = max(2, (max(n, 1) - 1).bit_length())
    bits += bits % 2
    self._half = np.uint64(bits // 2)
    self._mask = np.uint64((1 << (bits // 2)) - 1)
    self._keys = [np.uint64(stable_seed("global order", self.seed,
                                        self.epoch, r))
                  for r in range(_ROUNDS)]

  def _permute(self, x: np.ndarray) -> np.ndarray:
    left, right = x >> self._half, x & self._mask
    with np.errstate(over="ignore"):
      for key in self._keys:
        left, right = right, left ^ (_mix(right ^ key) & self._mask)
    return (left << self._half) | right

  def __call__(self, positions) -> np.ndarray:
    x = np.asarray(positions, dtype=np.uint64)
    if x.size and int(x.max()) >= self.n:
      raise IndexError(f"position {int(x.max())} of an order of "
                       f"{self.n:,}")
    y = self._permute(x)
    out = y >= np.uint64(self.n)
    while out.any():  # cycle-walking: back into [0, n)
      y[out] = self._permute(y[out])
      out = y >= np.uint64(self.n)
    return y.astype(np.int64)


class Positions:
  """The positions of the order one reader reads, in its order: its
  rank's share, cut in blocks dealt to the workers in turn.

  Args:
    n: the split's records.
    shard: (rank, ranks); None: (0, 1).
    worker: (worker, workers); None: (0, 1).
    block: positions dealt to a worker at a time.
    drop_remainder: every rank ⌊n/ranks⌋ positions.
    origin: the share's first positions left out (consumed before a
      resume); the blocks are dealt from there.
  """

  def __init__(self, n: int, shard: Optional[Tuple[int, int]] = None,
               worker: Optional[Tuple[int, int]] = None, block: int = 1,
               drop_remainder: bool = False, origin: int = 0):
    if block < 1:
      raise ValueError(f"block must be at least 1; got {block}")
    rank, ranks = check_share(shard)
    self.worker, self.workers = check_share(worker)
    if drop_remainder:
      each = n // ranks
      self.start, self.stop = rank * each, (rank + 1) * each
    else:
      self.start, self.stop = rank * n // ranks, (rank + 1) * n // ranks
    self.block = block
    self.share = self.stop - self.start
    self.origin = min(max(origin, 0), self.share)
    share = self.share - self.origin
    blocks = -(-share // block)
    # This worker's blocks: worker, worker + workers, ...
    self._blocks = max(0, -(-(blocks - self.worker) // self.workers))
    last = self.worker + (self._blocks - 1) * self.workers
    self._len = 0 if not self._blocks else (
        (self._blocks - 1) * block + min(block, share - last * block))

  def __len__(self) -> int:
    return self._len

  def take(self, skip: int, count: int) -> np.ndarray:
    """This reader's positions [skip, skip + count) (fewer at its end)."""
    stop = min(skip + count, self._len)
    if skip >= stop:
      return np.zeros(0, dtype=np.int64)
    mine = np.arange(skip, stop, dtype=np.int64)
    b, within = mine // self.block, mine % self.block
    return self.start + self.origin + (
        self.worker + b * self.workers) * self.block + within


def read_in_order(records, order: GlobalOrder, positions: Positions,
                  skip: int = 0, lookahead: int = LOOKAHEAD
                  ) -> Iterator[List[bytes]]:
  """The records at `positions` (after the first `skip`), in order,
  `lookahead` at a time (a list each); `records` a RecordIndex of the
  order's records."""
  if lookahead < 1:
    raise ValueError(f"lookahead must be at least 1; got {lookahead}")
  at = skip
  while at < len(positions):
    mine = positions.take(at, lookahead)
    yield records.get(order(mine))
    at += len(mine)

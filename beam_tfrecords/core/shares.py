"""Exact shares of a split's records for training ranks and their workers.

A split's records are numbered across its shard files in order (over a
window of datasets: dataset after dataset). Rank r of W gets records
[⌊rN/W⌋, ⌊(r+1)N/W⌋): disjoint shares whose union is the split, sizes
differing by at most one; with `drop_remainder`, every rank gets ⌊N/W⌋
([r⌊N/W⌋, (r+1)⌊N/W⌋)) and the last N mod W records are read by none. The
build's per-shard record counts say which files a share touches, so a rank
reads its share and at most two partial files, not the whole split. A
rank's share is split again the same way among its reading workers
(DataLoader workers, tf.data's parallel reads): no record twice.

With a `seed`, the files are put in an order drawn from (seed, epoch)
before the shares are cut, so each epoch gives every rank other files.

    pieces = share(files, index=1, count=4)   # [Piece(file, skip, take)]
    pieces = share_of(pieces, index=0, count=2)   # its first worker's
"""

import hashlib
import random
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

__all__ = ["Piece", "share", "share_of", "file_order", "check_share",
           "stable_seed"]


class Piece(NamedTuple):
  """Records [skip, skip + take) of one file."""
  file: str
  skip: int
  take: int


def check_share(shard: Optional[Tuple[int, int]]) -> Tuple[int, int]:
  """(index, count) of a share, checked; None is (0, 1): everything.

  Raises:
    ValueError: count < 1, or index outside [0, count).
  """
  if shard is None:
    return 0, 1
  try:
    index, count = (int(v) for v in shard)
  except (TypeError, ValueError):
    raise ValueError(f"shard must be (index, count), e.g. (rank, "
                     f"world_size); got {shard!r}") from None
  if count < 1 or not 0 <= index < count:
    raise ValueError(f"shard=({index}, {count}): the index must be in "
                     f"[0, {count}) and the count at least 1")
  return index, count


def stable_seed(*values: Any) -> int:
  """A seed from values, the same in every process and Python version
  (hash() of a str is salted per process)."""
  text = "\0".join(repr(v) for v in values).encode("utf-8")
  return int.from_bytes(hashlib.sha256(text).digest()[:8], "little")


def file_order(files: Sequence[Tuple[str, int]], seed: Optional[int],
               epoch: int = 0) -> List[Tuple[str, int]]:
  """The files in their order (no seed), or in one drawn from (seed,
  epoch)."""
  out = list(files)
  if seed is not None:
    random.Random(stable_seed("files", seed, epoch)).shuffle(out)
  return out


def _bounds(n: int, index: int, count: int,
            drop_remainder: bool) -> Tuple[int, int]:
  if drop_remainder:
    q = n // count
    return index * q, (index + 1) * q
  return index * n // count, (index + 1) * n // count


def _cut(pieces: Sequence[Piece], start: int, end: int) -> List[Piece]:
  """The records [start, end) of pieces read back to back."""
  out, at = [], 0
  for p in pieces:
    lo, hi = max(start, at), min(end, at + p.take)
    if lo < hi:
      out.append(Piece(p.file, p.skip + lo - at, hi - lo))
    at += p.take
    if at >= end:
      break
  return out


def share(files: Sequence[Tuple[str, int]], index: int = 0, count: int = 1,
          drop_remainder: bool = False) -> List[Piece]:
  """Share `index` of `count` of the records of `files` ((path, records)
  in reading order)."""
  pieces = [Piece(f, 0, n) for f, n in files if n > 0]
  return share_of(pieces, index, count, drop_remainder)


def share_of(pieces: Sequence[Piece], index: int, count: int,
             drop_remainder: bool = False) -> List[Piece]:
  """Share `index` of `count` of the records the pieces hold."""
  index, count = check_share((index, count))
  start, end = _bounds(sum(p.take for p in pieces), index, count,
                       drop_remainder)
  return _cut(pieces, start, end)

"""Serialized records left where they were read: spans of the buffers
that hold them, a bytes object made only for a record that is asked for.

    records = Records.of(framed_data, spans)   # core.shard_reader makes them
    len(records); records[3]; records[10:20]; a + b; list(records)
    native.decode_examples(records.native(), ...)  # no bytes per record

A sequence of bytes as a list of them is (index, slice, iterate, `+`,
compare, pickle), so a reader's lists can be either. A decoder in the
native core takes `native()`: the buffers and their spans, never a
bytes object per record. Reading and decoding 1M flight records (397
bytes each) in groups of 8,192 took 1.44-1.57 CPU-s against 1.55-1.70
with a list (four rounds, one process): less than the bytes objects
cost alone, as the buffers now live until their group is decoded and
new ones take fresh pages.

The buffers are immutable (bytes, or a view of bytes): records hold
them alive, so a kept record keeps its whole buffer (a gzip member's
records: up to the build's --member-size, 256 KiB by default; another
writer's, up to core.shard_reader.HOLD); `list(records)` lets it go.
"""

import bisect
import collections.abc
import itertools
import operator
from typing import Any, Iterator, List, Sequence, Tuple, Union

import numpy as np

__all__ = ["Records"]


class Records(collections.abc.Sequence):
  """Records as (buffer, spans) pairs: spans an int64 array [k, 2] of
  each record's (start, end) in its buffer, in order."""

  __slots__ = ("_pairs", "_ends")

  def __init__(self, pairs: Sequence[Tuple[Any, np.ndarray]]):
    self._pairs = [(b, s) for b, s in pairs if len(s)]
    # Records before the end of each pair's spans.
    self._ends = list(itertools.accumulate(len(s) for _, s in self._pairs))

  @classmethod
  def of(cls, data: Any, spans: Any) -> "Records":
    """The records of `data` at `spans` (int64 (start, end) pairs, as an
    array or the native core's bytes)."""
    return cls([(data, np.frombuffer(spans, "<i8").reshape(-1, 2)
                 if not isinstance(spans, np.ndarray) else spans)])

  def __len__(self) -> int:
    return self._ends[-1] if self._ends else 0

  def __getitem__(self, i: Union[int, slice]) -> Any:
    if isinstance(i, slice):
      start, stop, step = i.indices(len(self))
      if step != 1:
        return list(self)[i]
      return self._cut(start, max(start, stop))
    i, n = operator.index(i), len(self)
    if not -n <= i < n:
      raise IndexError("records index out of range")
    i %= n
    which = bisect.bisect_right(self._ends, i)
    buffer, spans = self._pairs[which]
    a, b = spans[i - self._first(which)]
    return bytes(buffer[a:b])

  def _first(self, which: int) -> int:
    return self._ends[which - 1] if which else 0

  def _cut(self, start: int, stop: int) -> "Records":
    out = []
    for which, (buffer, spans) in enumerate(self._pairs):
      first = self._first(which)
      lo, hi = max(start - first, 0), min(stop - first, len(spans))
      if lo < hi:
        out.append((buffer, spans[lo:hi]))
    return Records(out)

  def __iter__(self) -> Iterator[bytes]:
    for buffer, spans in self._pairs:
      if isinstance(buffer, bytes):
        for a, b in spans.tolist():
          yield buffer[a:b]
      else:
        for a, b in spans.tolist():
          yield bytes(buffer[a:b])

  def __add__(self, other: Any) -> Any:
    if isinstance(other, Records):
      return Records(self._pairs + other._pairs)
    if isinstance(other, list):
      return list(self) + other
    return NotImplemented

  def __radd__(self, other: Any) -> Any:
    if isinstance(other, list):
      return other + list(self)
    return NotImplemented

  def __eq__(self, other: Any) -> bool:
    if isinstance(other, (Records, list)):  # (a list is never a tuple)
      return len(self) == len(other) and all(
          a == b for a, b in zip(self, other))
    return NotImplemented

  __hash__ = None  # type: ignore[assignment]  # (as a list's)

  def __repr__(self) -> str:
    return f"Records({len(self):,} records in {len(self._pairs)} buffers)"

  def __reduce__(self) -> Tuple[Any, Tuple[bytes, np.ndarray]]:
    # Only the records' bytes, in one buffer (not their whole buffers).
    lengths = np.concatenate([s[:, 1] - s[:, 0] for _, s in self._pairs]) \
        if self._pairs else np.zeros(0, np.int64)
    ends = np.cumsum(lengths, dtype=np.int64)
    return (Records.of, (b"".join(self), np.stack([ends - lengths, ends],
                                                  axis=1)))

  def native(self) -> List[Tuple[Any, np.ndarray]]:
    """The (buffer, spans) pairs, for the native core's decoders."""
    return list(self._pairs)

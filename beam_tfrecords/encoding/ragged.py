"""Many byte strings in one buffer (`Ragged`), and their Arrow view.

Records, Features and steps are encoded for a whole batch at once, so they
are held as one contiguous uint8 buffer plus n+1 offsets: the bytes of row
i are buf[offsets[i]:offsets[i+1]]. Arrow's large_binary arrays have the
same layout, so `to_arrow` / `from_arrow` convert without copying.
"""

from typing import Iterator, List, Optional

import numpy as np
import pyarrow as pa

__all__ = ["Ragged", "ranges", "offsets_of", "const", "masked", "to_arrow",
           "from_arrow"]


class Ragged:
  """n byte strings stored as one buffer and n+1 offsets (int64)."""

  __slots__ = ("buf", "offsets")

  def __init__(self, buf: np.ndarray, offsets: np.ndarray):
    self.buf = buf
    self.offsets = offsets

  def __len__(self) -> int:
    return len(self.offsets) - 1

  @property
  def lengths(self) -> np.ndarray:
    return np.diff(self.offsets)

  def regroup(self, offsets: np.ndarray) -> "Ragged":
    """Groups consecutive rows: row i becomes rows offsets[i]..offsets[i+1]."""
    return Ragged(self.buf, self.offsets[offsets])

  def take(self, index: np.ndarray) -> "Ragged":
    """The rows at `index`, in that order (copied into a new buffer, by
    Arrow's take: an index per row, not per byte)."""
    return from_arrow(to_arrow(self).take(pa.array(index, pa.int64())))

  def __iter__(self) -> Iterator[bytes]:
    """The rows as bytes (a Ragged stands where a list of records may)."""
    return iter(self.to_list())

  def __getitem__(self, i):
    """Row i as bytes; a slice as a Ragged (the rows copied, unless it is
    every row), as a list of records slices."""
    if isinstance(i, slice):
      rows = range(len(self))[i]
      if rows == range(len(self)):
        return self
      return self.take(np.arange(rows.start, rows.stop, rows.step))
    if not -len(self) <= i < len(self):
      raise IndexError(f"row {i} of {len(self)}")
    i %= len(self)
    return self.buf[int(self.offsets[i]):int(self.offsets[i + 1])].tobytes()

  def to_list(self) -> List[bytes]:
    data = self.buf.tobytes()
    o = self.offsets.tolist()
    return [data[o[i]:o[i + 1]] for i in range(len(o) - 1)]


def ranges(begins: np.ndarray, lengths: np.ndarray) -> np.ndarray:
  """Concatenated aranges: begins[i] .. begins[i] + lengths[i]."""
  total = int(lengths.sum())
  if total == 0:
    return np.empty(0, dtype=np.int64)
  starts = np.repeat(begins - np.cumsum(lengths) + lengths, lengths)
  return starts + np.arange(total, dtype=np.int64)


def offsets_of(lengths: np.ndarray) -> np.ndarray:
  """The n+1 int64 offsets of rows of these lengths (bools count 0/1)."""
  out = np.zeros(len(lengths) + 1, dtype=np.int64)
  np.cumsum(lengths, out=out[1:])
  return out


def const(data: bytes, present: np.ndarray) -> Ragged:
  """The same bytes in every row where `present` is True, nothing elsewhere."""
  present = np.asarray(present, dtype=bool)
  count = int(present.sum())
  buf = np.tile(np.frombuffer(data, dtype=np.uint8), count) if data else \
      np.empty(0, dtype=np.uint8)
  return Ragged(buf, offsets_of(present.astype(np.int64) * len(data)))


def masked(piece: Ragged, present: np.ndarray) -> Ragged:
  """`piece` with the rows where present is False emptied."""
  if present.all():
    return piece
  lengths = np.where(present, piece.lengths, 0)
  keep = np.repeat(present, piece.lengths)
  first, last = int(piece.offsets[0]), int(piece.offsets[-1])
  return Ragged(piece.buf[first:last][keep], offsets_of(lengths))


def to_arrow(piece: Ragged, present: Optional[np.ndarray] = None
             ) -> pa.LargeBinaryArray:
  """The rows as an Arrow array (null where `present` is False), no copy."""
  first, last = int(piece.offsets[0]), int(piece.offsets[-1])
  return pa.LargeBinaryArray.from_buffers(
      pa.large_binary(), len(piece),
      [None if present is None else pa.array(present).buffers()[1],
       pa.py_buffer(piece.offsets - first),
       pa.py_buffer(piece.buf[first:last])])


def from_arrow(array: pa.LargeBinaryArray) -> Ragged:
  """An Arrow large_binary array's bytes, no copy (a null row is empty)."""
  _, offsets, data = array.buffers()
  start = array.offset
  offsets = np.frombuffer(offsets, dtype=np.int64)[start:start + len(array) + 1]
  buf = (np.frombuffer(data, dtype=np.uint8) if data is not None
         else np.empty(0, dtype=np.uint8))
  return Ragged(buf, offsets)

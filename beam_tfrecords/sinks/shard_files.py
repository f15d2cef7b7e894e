"""One shard's bytes written as files of bounded size (ShardFiles): parts
arrive in key order as framed items, gzip members or part files; gzip
data is cut only between members, small parts are compressed together,
and each file is hashed and indexed (core.shard_index, or DALI's index of
an uncompressed file) as it is written.
"""

import hashlib
import struct
from typing import Any, BinaryIO, Iterator, List, Optional, Tuple

from apache_beam.io.filesystem import CompressionTypes
import numpy as np

from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.members import Hopper, MEMBER_CAP, inflate
from beam_tfrecords.core.layout import INDEX_DIR
from beam_tfrecords.core.shard_index import (DALI_INDEX_SUFFIX, INDEX_SUFFIX,
                                             ShardIndex)
from beam_tfrecords.core.shard_names import rolled_name
from beam_tfrecords.core.tfrecord_files import frame_records, unframe_records
from beam_tfrecords.sinks.codec import Codec
from beam_tfrecords.sinks.deflate import gzip_members
from beam_tfrecords.sinks.part_files import INLINE, MEMBER, read_part
from beam_tfrecords.sinks.parts import ShardWritten


__all__ = ["ShardFiles", "write_window", "INLINE_MEMBER_BYTES"]


_COPY_BYTES = 8 * 1024 * 1024


# Small parts next to each other are compressed together, as gzip members
# of about this many framed bytes.
INLINE_MEMBER_BYTES = 1024 * 1024


class ShardFiles:
  """One shard's bytes as files of at most `limit` bytes each.

  Gzip data arrives as whole members (concatenated members are one valid
  gzip file), so every file boundary falls between members and each file's
  size is known before it is written. A member larger than the limit is
  cut into smaller ones by records; a single record too large for the
  limit is an error. `limit` None: one file, however large.
  """

  def __init__(self, directory: str, split: str, shard: int, n: int,
               codec: Codec, level: Optional[int], limit: Optional[int],
               expected: int = 0, member_cap: int = MEMBER_CAP):
    self._directory, self._split, self._shard, self._n = (directory, split,
                                                          shard, n)
    self._codec, self._level, self._limit = codec, level, limit
    self._cap = member_cap
    self._hopper: Optional[Hopper] = None
    # A shard expected to outgrow the limit is cut into files of about
    # equal size (not full files and a small last one).
    self._files = 1 if not limit else max(1, -(-expected // limit))
    self._target = expected / self._files if limit else None
    self._file: Optional[BinaryIO] = None
    self._sha256: Any = None
    self._size = self._records = 0
    self._pending: List[bytes] = []
    self._pending_bytes = self._pending_count = 0
    self.files: List[ShardWritten] = []

  def _open(self):
    name = rolled_name(self._split, self._shard, self._n, len(self.files),
                       self._codec.suffix)
    self._file = FileSystems.create(
        FileSystems.join(self._directory, name),
        compression_type=CompressionTypes.UNCOMPRESSED)
    self.files.append(ShardWritten(self._split, name, 0, 0, self._shard,
                                   len(self.files)))
    self._size = self._records = 0
    self._sha256 = hashlib.sha256()
    self._hopper = None
    if self._codec.framed:
      self._hopper = Hopper() if self._codec.gzip else Hopper(
          8, _framed_record_size)

  def _close(self):
    if self._file is not None:
      self._file.close()
      self.files[-1] = self.files[-1]._replace(
          records=self._records, bytes=self._size,
          sha256=self._sha256.hexdigest())
      self._file = None
      if self._hopper is not None:
        self.files[-1] = self._write_index(self.files[-1], self._hopper)

  def _write_index(self, written: ShardWritten, hopper: Hopper
                   ) -> ShardWritten:
    if not hopper.done() or sum(u.records for u in hopper.units) != (
        written.records):
      raise RuntimeError(  # a defect here: the data is not what was counted
          f"{written.file}: the units written do not add up to the "
          f"{written.records:,} records counted")
    if self._codec.gzip:
      assert hopper.first is not None and hopper.last is not None
      data = ShardIndex.from_members(
          hopper.units, hashlib.sha256(hopper.first).digest(),
          hashlib.sha256(hopper.last).digest()).to_bytes()
      name = f"{INDEX_DIR}/{written.file}{INDEX_SUFFIX}"
    else:
      data = "".join(f"{u.offset} {u.size}\n" for u in hopper.units
                     ).encode("ascii")
      name = f"{INDEX_DIR}/{written.file}{DALI_INDEX_SUFFIX}"
    with FileSystems.create(FileSystems.join(self._directory, name),
                            compression_type=CompressionTypes.UNCOMPRESSED
                            ) as f:
      f.write(data)
    return written._replace(index_file=name, index_bytes=len(data),
                            index_sha256=hashlib.sha256(data).hexdigest())

  def _room(self, size: int) -> None:
    """Opens a file, or the next one if `size` more bytes would not fit,
    or would take this file well past its share of the shard."""
    if self._file is None:
      self._open()
    elif self._limit is not None and self._size and (
        self._size + size > self._limit or (
            len(self.files) < self._files and self._target is not None
            and self._size + size / 2 > self._target)):
      self._close()
      self._open()

  def _put(self, data: bytes, count: int) -> None:
    self._room(len(data))
    assert self._file is not None  # _room() opened it
    self._file.write(data)
    self._sha256.update(data)
    if self._hopper is not None:
      self._hopper.feed(data)
    self._size += len(data)
    self._records += count

  def _copy(self, path: str, size: int, count: int) -> None:
    self._room(size)
    assert self._file is not None  # _room() opened it
    with FileSystems.open(path, compression_type=(
        CompressionTypes.UNCOMPRESSED)) as part_file:
      while True:
        data = part_file.read(_COPY_BYTES)
        if not data:
          break
        self._file.write(data)
        self._sha256.update(data)
        if self._hopper is not None:
          self._hopper.feed(data)
    self._size += size
    self._records += count

  def _members(self, records: list) -> Iterator[Tuple[bytes, int]]:
    """Gzip members of the records, each within the limit."""
    data = gzip_members(frame_records(records), self._level, self._cap)
    if self._limit is None or len(data) <= self._limit:
      yield data, len(records)
      return
    if len(records) == 1:
      raise InputError(
          f"a record of {len(records[0]):,} bytes ({len(data):,} compressed) "
          f"does not fit in a shard file of at most {self._limit:,} bytes "
          f"(split {self._split!r}); raise --max-shard-size")
    pieces = min(len(records), -(-len(data) * 10 // (self._limit * 9)))
    step = -(-len(records) // pieces)
    for i in range(0, len(records), step):
      yield from self._members(records[i:i + step])

  def member(self, data: bytes, count: int) -> None:
    """A finished gzip member (or raw bytes of a codec without gzip)."""
    self.flush()
    if self._limit is not None and len(data) > self._limit:
      for piece, n in self._members(
          unframe_records(inflate(data))):
        self._put(piece, n)
    else:
      self._put(data, count)

  def part_file(self, path: str, size: int, count: int) -> None:
    self.flush()
    if self._limit is not None and size > self._limit:
      self.member(read_part(path), count)
    else:
      self._copy(path, size, count)

  def inline(self, data: bytes, count: int) -> None:
    """Framed items, compressed together with the ones next to them."""
    if not self._codec.gzip:
      self._put(data, count)
      return
    self._pending.append(data)
    self._pending_bytes += len(data)
    self._pending_count += count
    if self._pending_bytes >= INLINE_MEMBER_BYTES:
      self.flush()

  def inline_many(self, data: bytes, sizes: np.ndarray,
                  counts: np.ndarray) -> None:
    """inline() of consecutive parts, `data` their bytes back to back:
    the same members, found with a search per member, not a step per
    part."""
    ends = np.cumsum(sizes)
    first = start = 0
    while first < len(sizes):
      base = int(ends[first - 1]) if first else 0
      last = int(np.searchsorted(
          ends, base + INLINE_MEMBER_BYTES - self._pending_bytes))
      if last >= len(sizes):
        self._pending.append(data[start:])
        self._pending_bytes += int(ends[-1]) - base
        self._pending_count += int(counts[first:].sum())
        return
      stop = int(ends[last])
      self._pending.append(data[start:stop])
      self._pending_bytes += stop - base
      self._pending_count += int(counts[first:last + 1].sum())
      self.flush()
      first, start = last + 1, stop

  def flush(self) -> None:
    if not self._pending:
      return
    data = b"".join(self._pending)
    count = self._pending_count
    self._pending, self._pending_bytes, self._pending_count = [], 0, 0
    member = gzip_members(data, self._level, self._cap)
    if self._limit is not None and len(member) > self._limit:
      for piece, n in self._members(unframe_records(data)):
        self._put(piece, n)
    else:
      self._put(member, count)

  def close(self) -> List[ShardWritten]:
    """Ends the last file; every gzip shard has at least one (an empty
    gzip member is a valid empty file). A codec without gzip writes no
    file for an empty shard, unless it says `empty_files` (uncompressed
    TFRecords for TFDS): an empty object cannot be uploaded to S3 in Beam
    2.77 (a multipart upload without parts), and an empty JSON lines file
    says nothing. Returns the files' descriptions."""
    self.flush()
    if self._file is None and not self.files:
      if not (self._codec.gzip or self._codec.empty_files):
        return []
      self._open()
      if self._codec.gzip:
        self._put(gzip_members(b"", self._level), 0)
    self._close()
    return self.files


def write_window(out: "ShardFiles", window) -> None:
  """A window of parts in key order; the INLINE parts between two others
  go to the writer at once."""
  at = start = 0
  for i in np.flatnonzero(window.how != INLINE).tolist() + [len(window.how)]:
    if i > start:
      size = window.size[start:i]
      total = int(size.sum())
      out.inline_many(window.inline[at:at + total], size,
                      window.counts[start:i])
      at += total
    if i < len(window.how):
      count = int(window.counts[i])
      if window.how[i] == MEMBER:
        out.member(window.other[i], count)
      else:
        out.part_file(window.other[i], int(window.size[i]), count)
    start = i + 1


def _framed_record_size(head: bytes, at: int) -> Tuple[int, int]:
  """(framed size, 1) of the record whose length field is `head`."""
  return struct.unpack("<Q", head)[0] + 16, 1

"""One shard's bytes: gzip members in files of bounded size.

The shard's writer (`sinks.shards`) hands `ShardFiles` its parts in key
order: framed items to compress together with their neighbours
(`inline`, or `inline_many` for a run of them), finished gzip members
(`member`), or part files holding one (`part_file`). Concatenated gzip
members are one valid gzip file (read by tf.data and by Beam's
ReadFromTFRecord), so every file boundary falls between members and each
file's size is known before it is written.
"""

import zlib
from typing import (Any, BinaryIO, Callable, Dict, Iterator, List, NamedTuple,
                    Optional, Tuple)

import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from isal import isal_zlib

from beam_tfrecords.sinks.parts import ShardWritten
from beam_tfrecords.errors import InputError
from beam_tfrecords.records import frame_records, unframe_records

__all__ = ["Codec", "TFRECORD_GZIP", "JSON_LINES", "SHARD_SUFFIX",
           "ShardFiles", "write_window", "shard_name", "rolled_name",
           "compressor", "gzip_member", "open_part", "read_part",
           "INLINE", "MEMBER", "PART_FILE"]

SHARD_SUFFIX = ".tfrecord.gz"
_COPY_BYTES = 8 * 1024 * 1024
# Small parts next to each other are compressed together, as gzip members
# of about this many framed bytes.
INLINE_MEMBER_BYTES = 1024 * 1024
# The default deflate: ISA-L (python-isal) at level 2 writes standard gzip.
# Measured on 57 MB of framed Examples (2 cores): ISA-L 2 at 588 MB/s,
# ratio 3.72; zlib 1 at 130 MB/s, ratio 3.69; zlib 6 at 55 MB/s, ratio
# 4.17. A `gzip_level` of 1-9 uses zlib at that level.
ISAL_LEVEL = 2

# How a part travels to its shard's writer.
INLINE, MEMBER, PART_FILE = 0, 1, 2


class Codec(NamedTuple):
  """How items become file bytes: `frame` turns a list of items into the
  bytes they take in the file."""
  suffix: str
  frame: Callable[[Any], bytes]
  gzip: bool


TFRECORD_GZIP = Codec(SHARD_SUFFIX, frame_records, True)
JSON_LINES = Codec(".jsonl", lambda lines: "".join(
    line + "\n" for line in lines).encode("utf-8"), False)


def shard_name(prefix: str, shard: int, num_shards: int, suffix: str) -> str:
  return f"{prefix}-{shard:05d}-of-{num_shards:05d}{suffix}"


def compressor(level: Optional[int] = None):
  """A gzip-member compressor: ISA-L (default) or zlib at `level` 1-9.

  wbits 31 makes a gzip member; both write mtime 0, so the bytes depend
  only on the data and the level.
  """
  if level is None:
    return isal_zlib.compressobj(ISAL_LEVEL, isal_zlib.DEFLATED, 31)
  return zlib.compressobj(level, zlib.DEFLATED, 31)


def gzip_member(data: bytes, level: Optional[int]) -> bytes:
  comp = compressor(level)
  return comp.compress(data) + comp.flush()


def open_part(path: str):
  return FileSystems.open(path, compression_type=(
      CompressionTypes.UNCOMPRESSED))


def read_part(path: str) -> bytes:
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED
                        ) as f:
    return f.read()


def rolled_name(split: str, shard: int, num_shards: int, roll: int,
                suffix: str) -> str:
  """The staged name of a shard's file number `roll`: the shard's own name
  for the first, a marked one for the files after it (Commit renames them
  all to final names)."""
  name = shard_name(split, shard, num_shards, suffix)
  if roll == 0:
    return name
  return f"{name[:-len(suffix)]}-roll{roll:04d}{suffix}"


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
               expected: int = 0):
    self._directory, self._split, self._shard, self._n = (directory, split,
                                                          shard, n)
    self._codec, self._level, self._limit = codec, level, limit
    # A shard expected to outgrow the limit is cut into files of about
    # equal size (not full files and a small last one).
    self._files = 1 if not limit else max(1, -(-expected // limit))
    self._target = expected / self._files if limit else None
    self._file: Optional[BinaryIO] = None
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

  def _close(self):
    if self._file is not None:
      self._file.close()
      self.files[-1] = self.files[-1]._replace(records=self._records,
                                               bytes=self._size)
      self._file = None

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
    self._size += len(data)
    self._records += count

  def _copy(self, path: str, size: int, count: int) -> None:
    self._room(size)
    assert self._file is not None  # _room() opened it
    with FileSystems.open(path, compression_type=(
        CompressionTypes.UNCOMPRESSED)) as part_file:
      while True:
        block = part_file.read(_COPY_BYTES)
        if not block:
          break
        self._file.write(block)
    self._size += size
    self._records += count

  def _members(self, records: list) -> Iterator[Tuple[bytes, int]]:
    """Gzip members of the records, each within the limit."""
    data = gzip_member(frame_records(records), self._level)
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
          list(unframe_records(isal_zlib.decompress(data, wbits=31)))):
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
    member = gzip_member(data, self._level)
    if self._limit is not None and len(member) > self._limit:
      for piece, n in self._members(list(unframe_records(data))):
        self._put(piece, n)
    else:
      self._put(member, count)

  def close(self) -> List[ShardWritten]:
    """Ends the last file; every gzip shard has at least one (an empty
    gzip member is a valid empty file). A codec without gzip writes no
    file for an empty shard: an empty object cannot be uploaded to S3 in
    Beam 2.77 (a multipart upload without parts), and an empty JSON lines
    file says nothing. Returns the files' descriptions."""
    self.flush()
    if self._file is None and not self.files:
      if not self._codec.gzip:
        return []
      self._open()
      self._put(gzip_member(b"", self._level), 0)
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



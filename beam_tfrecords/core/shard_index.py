"""The index beside a gzip TFRecord shard: where each gzip member starts
and the number of its first record, so that record i is read by inflating
the one member that holds it.

The sink writes the shard as members that say their own size and record
count (core.members), and the index as `index/<shard>.index` (in a
folder of its own, so that globs such as `train-*` and `*.tfrecord*`
still name the shards only):

    magic "BTRIDX01" | members m (uint64) | SHA-256 of the first member |
    SHA-256 of the last member | offsets (uint64, m + 1) |
    first records (uint64, m + 1)

all little-endian. offsets[m] is the shard's size and first_records[m]
its record count. The digests and the size tie the index to its shard: a
stale index (from another build) or a foreign one fails `check` with both
file names, never reads wrong records.

    index = ShardIndex.from_members(member_table(data), first, last)
    ShardIndex.from_bytes(index.to_bytes(), "x.index") == index
"""

import dataclasses
import hashlib
import struct
from typing import Callable, List, NoReturn

import numpy as np

from beam_tfrecords.core.errors import ShardIndexError
from beam_tfrecords.core.members import HEADER_BYTES, Member

__all__ = ["ShardIndex", "INDEX_SUFFIX", "DALI_INDEX_SUFFIX", "MAGIC"]

INDEX_SUFFIX = ".index"
# DALI's tfrecord2idx index beside an uncompressed shard: a line
# "offset framed_size" per record.
DALI_INDEX_SUFFIX = ".idx"
MAGIC = b"BTRIDX01"
_HEAD = struct.Struct("<8sQ32s32s")


@dataclasses.dataclass(frozen=True, eq=False)
class ShardIndex:
  """One shard's members: `offsets` and `first_records` (uint64, one more
  than members: the shard's size and record count last), and the SHA-256
  of its first and last member."""
  offsets: np.ndarray
  first_records: np.ndarray
  first_digest: bytes
  last_digest: bytes

  @classmethod
  def from_members(cls, members: List[Member], first_digest: bytes,
                   last_digest: bytes) -> "ShardIndex":
    """The index of a shard made of `members` (at least one, from its
    start to its end)."""
    if not members or members[0].offset != 0:
      raise ValueError("an index needs the members from the shard's start")
    offsets = np.array([m.offset for m in members]
                       + [members[-1].offset + members[-1].size],
                       dtype=np.uint64)
    first = np.zeros(len(members) + 1, dtype=np.uint64)
    np.cumsum([m.records for m in members], out=first[1:])
    return cls(offsets, first, first_digest, last_digest)

  @property
  def members(self) -> int:
    return len(self.offsets) - 1

  @property
  def shard_bytes(self) -> int:
    return int(self.offsets[-1])

  @property
  def records(self) -> int:
    return int(self.first_records[-1])

  def __eq__(self, other: object) -> bool:
    return isinstance(other, ShardIndex) and self.to_bytes() == \
        other.to_bytes()

  def to_bytes(self) -> bytes:
    return b"".join((
        _HEAD.pack(MAGIC, self.members, self.first_digest, self.last_digest),
        self.offsets.astype("<u8").tobytes(),
        self.first_records.astype("<u8").tobytes()))

  @classmethod
  def from_bytes(cls, data: bytes, name: str) -> "ShardIndex":
    """The index in `data`, read from the file `name` (for messages)."""
    if len(data) < _HEAD.size or data[:len(MAGIC)] != MAGIC:
      raise ShardIndexError(f"{name} is not a shard index written by "
                            "beam_tfrecords (no BTRIDX01 header)")
    _, m, first, last = _HEAD.unpack_from(data)
    if len(data) != _HEAD.size + 16 * (m + 1):
      raise ShardIndexError(f"{name}: an index of {m:,} members takes "
                            f"{_HEAD.size + 16 * (m + 1):,} bytes, the file "
                            f"has {len(data):,} (cut or damaged)")
    arrays = np.frombuffer(data, dtype="<u8", offset=_HEAD.size).astype(
        np.uint64)
    offsets, firsts = arrays[:m + 1], arrays[m + 1:]
    # Members follow each other from byte 0, each of at least a member's
    # header and trailer; record numbers start at 0 and never go back.
    if m < 1 or offsets[0] != 0 or firsts[0] != 0 or (
        np.diff(offsets) < HEADER_BYTES + 8).any() or (
            firsts[1:] < firsts[:-1]).any() or offsets[-1] >= 2**62:
      raise ShardIndexError(f"{name}: its member offsets or record numbers "
                            "are not in order from 0 (a damaged index)")
    return cls(offsets, firsts, first, last)

  def member_of(self, records: np.ndarray) -> np.ndarray:
    """The member holding each record number."""
    return np.searchsorted(self.first_records, np.asarray(
        records, dtype=np.uint64), side="right").astype(np.int64) - 1

  def check(self, shard_bytes: int, read: Callable[[int, int], bytes],
            index_name: str, shard_name: str) -> None:
    """Raises ShardIndexError unless this is the index of the shard of
    `shard_bytes` bytes whose bytes `read(offset, length)` returns."""
    def fail(what: str) -> NoReturn:
      raise ShardIndexError(
          f"the index {index_name} does not belong to the shard "
          f"{shard_name}: {what}. The index is stale (from another build) "
          "or foreign; rebuild the dataset, or read the shard as a stream")
    if shard_bytes != self.shard_bytes:
      fail(f"the index is of a shard of {self.shard_bytes:,} bytes, the "
           f"shard has {shard_bytes:,}")
    for i, digest, which in ((0, self.first_digest, "first"),
                             (self.members - 1, self.last_digest, "last")):
      start, stop = int(self.offsets[i]), int(self.offsets[i + 1])
      if hashlib.sha256(read(start, stop - start)).digest() != digest:
        fail(f"the shard's {which} member (bytes {start:,}-{stop:,}) is not "
             "the one indexed")

"""Deterministic sharded files: every byte is decided by the data.

Beam's `WriteToTFRecord` lets the runner decide which record lands in which
file and in what order (with a fixed `num_shards` it assigns records to
shards at random), so two runs of the same job give different files. Here:

* Elements are batches `(key, [item])`: all records of one input batch (key:
  file, byte offset, batch number) or of one group (key: the group key).
  Keys are unique and compare the same on every run. One element may hold
  many batches in key order (the groups of a bucket): see `sinks.runs`.
* A batch's items are dealt round-robin over the shards, starting at a
  shard picked by a stable hash of the key, so shards fill evenly.
* Each shard's parts are sorted by key and written in that order: gzip
  TFRecord files whose bytes depend only on the input. Large parts are
  compressed where they are made, as finished gzip members (concatenated
  gzip members are one valid gzip file, read by tf.data and by Beam's
  ReadFromTFRecord); small ones (one sequence, one error line) are
  compressed together by the shard's writer.
* With a staging directory (every build's), a batch's parts are written
  back to back into one part file under it, and the shuffle carries each
  part's Slice of it (path, offset, length): no runner holds the data in
  memory. The Slices of GATHER_BATCHES successive batches go to each shard
  as one element (a Gathered), so the elements crossing the shuffle do
  not grow with batches x shards (both grow with the data).
* Part files have unique names; a retried bundle writes new ones and the
  runner passes on only the names of the attempt that succeeded. They are
  removed with the staging directory when the dataset is published.
* Every TFRecord shard file exists, even an empty one (an empty gzip
  member), and a retried write writes the same bytes again. Empty errors/
  shards are not written.

    batches | WriteShards(directory, {"train": 4, "eval": 1}, TFRECORD_GZIP)
    # -> a ShardWritten (split, file, records, bytes, ...) per file
"""

import hashlib
import itertools
import random
import re
import struct
import uuid
import zlib
from typing import (Any, BinaryIO, Callable, Dict, Iterator, List, NamedTuple,
                    Optional, Tuple)

import apache_beam as beam
import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
import numpy as np

from isal import isal_zlib

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.fs import sha256_of
from beam_tfrecords.core.members import MEMBER_CAP, Hopper, from_gzip, inflate
from beam_tfrecords.core.shard_index import (DALI_INDEX_SUFFIX, INDEX_DIR,
                                             INDEX_SUFFIX, ShardIndex)
from beam_tfrecords.core.shard_reader import count_tfrecords
from beam_tfrecords.core.tfrecord_files import (framed_ends, frame_records,
                                                unframe_records)
from beam_tfrecords.encoding.ragged import Ragged
from beam_tfrecords.runners.gaps import separates_outputs
from beam_tfrecords.sinks import runs
from beam_tfrecords.sinks.parts import ShardWritten

__all__ = ["WriteShards", "WriteWithBeamSink", "Codec", "Shuffle",
           "finish_shard_names", "rolled_name", "TFRECORD_GZIP", "JSON_LINES",
           "stable_hash", "shard_name", "SHARD_SUFFIX", "ShardFiles",
           "write_window", "compressor", "gzip_member", "gzip_members",
           "MEMBER_CAP", "DALI_INDEX_SUFFIX", "open_part",
           "read_part", "INLINE", "MEMBER", "PART_FILE", "Slice", "read_slice",
           "resolved"]


# One shard's bytes: gzip members in files of bounded size.

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
# Parts at least this large are compressed before the shuffle.
MEMBER_BYTES = 64 * 1024
# Compressed parts (and uncompressed ones of codecs without gzip) at least
# this large go to part files (see Gathered and WriteShards).
SPILL_BYTES = 256 * 1024
PARTS_DIR = ".parts"
# Batches whose parts go to each shard as one element (see Gathered): at
# 100M rows (4,600 batches x 22 shards) one element per part was 100k
# elements, and the build peaked 160 MB higher (774 MB against 612 MB).
GATHER_BATCHES = 64

# How a part travels to its shard's writer.
INLINE, MEMBER, PART_FILE = 0, 1, 2


class Codec(NamedTuple):
  """How items become file bytes: `frame` turns a list of items into the
  bytes they take in the file; `empty_files`: a codec without gzip writes
  an empty file for an empty shard too. TFRecord codecs (frame_records)
  write an index beside each file: ours (core.shard_index) for gzip, DALI's
  for uncompressed files. `files`: the shard's writer, called with
  ShardFiles' arguments (None: ShardFiles); another one writes the framed
  parts of a codec without gzip into another container
  (sinks.array_records)."""
  suffix: str
  frame: Callable[[Any], bytes]
  gzip: bool
  empty_files: bool = False
  files: Optional[Callable[..., Any]] = None

  @property
  def framed(self) -> bool:
    """Whether items are framed as TFRecords (the ArrayRecord codec's
    too: its writer unframes them). ShardFiles indexes the files of such
    codecs."""
    return self.frame is frame_records


TFRECORD_GZIP = Codec(SHARD_SUFFIX, frame_records, True)
JSON_LINES = Codec(".jsonl", lambda lines: "".join(
    line + "\n" for line in lines).encode("utf-8"), False)


def shard_name(prefix: str, shard: int, num_shards: int, suffix: str) -> str:
  return f"{prefix}-{shard:05d}-of-{num_shards:05d}{suffix}"


# ISA-L's deflate at levels 1 and 2 reads one byte position's hash from
# the compressor's memory address instead of from the data.
# isal_deflate_icf_body_hash_hist_01/02/04 (igzip_icf_body_h1_gr_bt.asm;
# so since ISA-L 2.21 of 2017, in 2.32.1 as python-isal 1.9.1 bundles it,
# and on master) handles a stream's first byte in .write_first_byte. There
# it computes the hash of position 2 as crc32(rcx >> 16), but rcx still
# holds the address of the isal_zstream. So position 2 goes into the hash slot
#   crc32c(((address of the stream) >> 16) & 0xffffffff) & hash_mask
# and not into its own. Most of the time that slot is unused and the bytes
# are the same at every address. When it is the slot of the member's
# position 0, 1 or 2, a later match is lost or gained and the member comes
# out a few bytes different. So the bytes depended on where the allocator
# put the compressor object (about 1 member in 10,000). flights150k's
# member 7 lost its 34-byte match to position 0 at 4,523 and came out
# 20,273 bytes instead of 20,269. Placing the compressor at an address of
# that slot reproduces those bytes exactly. With the compressor placed at
# an address of each of the 32,768 slots in turn, only the member's own
# three slots changed its bytes. tests/unit/sinks/test_shards.py crafts
# members for the slot of a compressor's address.
# The fix: a compressor whose address gives one of the member's three slots
# is not used. Another one is made while the first is kept alive, so the
# new one lies elsewhere.
_ISAL_HASH_MASKS = {1: 0x1FFF, 2: 0x7FFF}  # LVL1/LVL2_HASH_MASK
_CRC32C_OF_ZEROS = google_crc32c.value(b"\0\0\0\0")
# The isal_zstream starts at most this far into python-isal's compressor
# object (64 bytes in 1.9.1); its address is id() plus that offset.
_STREAM_OFFSET_MAX = 4096
_ISAL_TRIES = 64


def _isal_slot(four: bytes, mask: int) -> int:
  """ISA-L's hash slot of four bytes: the crc32 instruction (CRC-32C from
  0, without the standard's inversions) of them, little-endian."""
  return (google_crc32c.value(four) ^ _CRC32C_OF_ZEROS) & mask


def isal_address_slots(comp, mask: int = _ISAL_HASH_MASKS[ISAL_LEVEL]
                       ) -> set:
  """The slots an ISA-L compressor object may put position 2 in. This is
  one slot, or two if the stream could lie past a 64 KiB boundary."""
  start = id(comp)  # CPython: the object's address
  return {_isal_slot(((a >> 16) & 0xFFFFFFFF).to_bytes(4, "little"), mask)
          for a in (start, start + _STREAM_OFFSET_MAX)}


def isal_member_slots(data, mask: int = _ISAL_HASH_MASKS[ISAL_LEVEL]
                      ) -> set:
  """The hash slots of a member's positions 0, 1 and 2."""
  head = bytes(data[:6]).ljust(6, b"\0")
  return {_isal_slot(head[i:i + 4], mask) for i in range(3)}


def compressor(level: Optional[int] = None, data: bytes = b""):
  """A gzip-member compressor: ISA-L (default) or zlib at `level` 1-9.

  wbits 31 makes a gzip member; both write mtime 0. For ISA-L, `data` is
  the member (at least its first 6 bytes). The compressor returned is one
  whose address cannot change that member's bytes (see above), so the
  bytes depend only on the data and the level.
  """
  if level is not None:
    return zlib.compressobj(level, zlib.DEFLATED, 31)
  avoid = isal_member_slots(data)
  held = []
  for _ in range(_ISAL_TRIES):
    comp = isal_zlib.compressobj(ISAL_LEVEL, isal_zlib.DEFLATED, 31)
    if not isal_address_slots(comp) & avoid:
      return comp
    held.append(comp)  # alive, so the next one is allocated elsewhere
  raise RuntimeError(  # (chance about 1e-4 ** 64)
      f"no ISA-L compressor at an address safe for this member in "
      f"{_ISAL_TRIES} tries")


def gzip_member(data: bytes, level: Optional[int]) -> bytes:
  """`data` as one gzip member, compressed in one call by a new
  compressor."""
  comp = compressor(level, data)
  return comp.compress(data) + comp.flush()


def gzip_members(framed, level: Optional[int], cap: int = MEMBER_CAP
                 ) -> bytes:
  """Framed records as gzip members of at most `cap` framed bytes each (a
  larger record: a member of its own), each saying its size and record
  count (core.members), back to back. Cut greedily, so the bytes depend
  only on the records, the level and the cap."""
  if not len(framed):
    return from_gzip(gzip_member(b"", level), 0)
  ends = framed_ends(framed)
  view = memoryview(framed)
  out = []
  start = 0
  while start < len(ends):
    base = int(ends[start - 1]) if start else 0
    stop = max(int(np.searchsorted(ends, base + cap, side="right")),
               start + 1)
    out.append(from_gzip(gzip_member(view[base:int(ends[stop - 1])], level),
                         stop - start))
    start = stop
  return b"".join(out)


def open_part(path: str):
  return FileSystems.open(path, compression_type=(
      CompressionTypes.UNCOMPRESSED))


def read_part(path: str) -> bytes:
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED
                        ) as f:
    return f.read()


class Slice(NamedTuple):
  """Where a part's bytes are: `length` bytes at `offset` of a part file
  (what the shuffle carries instead of the bytes)."""
  path: str
  offset: int
  length: int


def read_slice(where: Slice) -> bytes:
  with open_part(where.path) as f:
    f.seek(where.offset)
    return f.read(where.length)


def resolved(part: tuple) -> tuple:
  """A part tuple with its bytes in place of their Slice."""
  if isinstance(part[2], Slice):
    return (part[0], part[1], read_slice(part[2]), part[3], part[4])
  return part


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
        block = part_file.read(_COPY_BYTES)
        if not block:
          break
        self._file.write(block)
        self._sha256.update(block)
        if self._hopper is not None:
          self._hopper.feed(block)
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


class Gathered(NamedTuple):
  """Parts of successive batches bound for one shard, sent as one element."""
  parts: list


def stable_hash(key) -> int:
  """A hash of a key (tuple of str/bytes/int/float) that never changes."""
  digest = hashlib.blake2b(repr(key).encode("utf-8"), digest_size=8).digest()
  return int.from_bytes(digest, "little")


class Shuffle(NamedTuple):
  """A seeded shuffle: each record goes to a random shard and to one of
  `buckets[split]` buckets in it; a shard is written bucket by bucket, each
  bucket's records in a random order. Memory: one bucket at a time."""
  seed: int
  buckets: Dict[str, int]


def _write_part(directory: str, shard: int, data: bytes) -> str:
  path = FileSystems.join(directory, f"{shard:05d}-{uuid.uuid4().hex}.part")
  with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED
                          ) as f:
    f.write(data)
  return path


class _DealFn(beam.DoFn):
  """(split, key, [item]) -> ((split, shard), (key, how, data, count, size))
  per shard of the split.

  `how` is INLINE (data: framed items), MEMBER (data: a gzip member) or
  PART_FILE (data: the path of a file holding a gzip member, or for a
  codec without gzip the framed items); `size` is the bytes it takes.
  With `parts_dir`, data is a Slice of the batch's part file, and the
  parts of `gather` successive batches go to a shard as one Gathered.
  """

  def __init__(self, num_shards: Dict[str, int], codec: Codec,
               level: Optional[int], parts_dir: Optional[str] = None,
               shuffle: Optional["Shuffle"] = None,
               gather: int = GATHER_BATCHES, member_cap: int = MEMBER_CAP):
    self._n = dict(num_shards)
    self._cap = member_cap
    self._codec = codec
    self._level = level
    self._parts_dir = parts_dir
    self._shuffle = shuffle
    # 1 where the runner drops what finish_bundle emits (runners.gaps).
    self._gather = gather

  def _deal(self, split, key, items):
    """{(shard, sort key): [item]}: round-robin from a hashed start; when
    shuffling, each item to a random (seeded) shard and bucket."""
    n = self._n[split]
    parts: Dict[Tuple[int, Any], list] = {}
    if self._shuffle is None:
      # Round-robin from the hashed first shard: shard first + j (mod n)
      # takes items j, j + n, j + 2n, ...
      first = stable_hash(key) % n
      if not isinstance(items, Ragged):  # (a Ragged is dealt as buffers)
        items = list(items)
      return {((first + j) % n, key): items[j::n]
              for j in range(min(n, len(items)))}
    rng = random.Random(stable_hash((self._shuffle.seed, split, key)))
    m = self._shuffle.buckets[split]
    for item in items:
      shard, bucket = rng.randrange(n), rng.randrange(m)
      parts.setdefault((shard, (bucket, key)), []).append(item)
    return parts

  def _part(self, split, shard, key, part, spill: bool = True) -> tuple:
    data = self._codec.frame(part)
    how = INLINE
    if self._codec.gzip and len(data) >= MEMBER_BYTES:
      data, how = gzip_members(data, self._level, self._cap), MEMBER
    size = len(data)
    if spill and self._parts_dir is not None and size >= SPILL_BYTES and (
        how == MEMBER or not self._codec.gzip):
      path = _write_part(FileSystems.join(self._parts_dir, split), shard, data)
      return (key, PART_FILE, path, len(part), size)
    return (key, how, data, len(part), size)

  def start_bundle(self):
    self._gathered: Dict[Tuple[str, int], list] = {}
    self._batches_dealt = 0

  def process(self, batch):
    split, key, items = batch
    if hasattr(items, "batches"):
      yield from self._deal_many(split, items)
      return
    if not items:
      return
    dealt = [(shard, self._part(split, shard, key, part,
                                spill=self._parts_dir is None))
             for (shard, key), part in self._deal(split, key, items).items()]
    if self._parts_dir is None:
      for shard, part in dealt:
        yield (split, shard), part
      return
    for shard, part in self._spilled(split, dealt):
      self._gathered.setdefault((split, shard), []).append(part)
    self._batches_dealt += 1
    if self._batches_dealt >= self._gather:
      yield from self._flush()

  def finish_bundle(self):
    for element in self._flush():
      yield beam.transforms.window.GlobalWindows.windowed_value(element)

  def _flush(self):
    gathered, self._gathered, self._batches_dealt = self._gathered, {}, 0
    for where in sorted(gathered):
      yield where, Gathered(gathered[where])

  def _spilled(self, split, dealt):
    """The batch's parts written back to back into one part file; each
    part's bytes become their Slice of it. So the shuffle carries names
    and sizes, never records: the runner may hold all it carries in
    memory (the FnApiRunner does, between stages)."""
    assert self._parts_dir is not None  # (process() calls it only then)
    path = FileSystems.join(self._parts_dir, split,
                            f"batch-{uuid.uuid4().hex}.part")
    out, at = [], 0
    with FileSystems.create(
        path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
      for shard, (key, how, data, count, size) in dealt:
        f.write(data)
        out.append((shard, (key, how, Slice(path, at, len(data)), count,
                            size)))
        at += len(data)
    return out

  def _deal_many(self, split, items):
    """Many batches (sinks.runs): one run per shard."""
    if self._shuffle is not None or not self._codec.gzip or (
        self._codec.frame is not frame_records):
      by_shard: Dict[int, list] = {}
      for key, records in items.batches():
        for (shard, sort_key), part in self._deal(split, key,
                                                  records).items():
          by_shard.setdefault(shard, []).append(
              self._part(split, shard, sort_key, part))
      shards = {shard: runs.Parts.of(sorted(parts, key=lambda p: p[0]))
                for shard, parts in by_shard.items()}
    else:
      hashes = getattr(items, "hashes", None)
      if hashes is None:
        hashes = np.fromiter(map(stable_hash, items.keys), dtype=np.uint64,
                             count=len(items.keys))
      shards = runs.deal_records(
          items, hashes, self._n[split], MEMBER_BYTES,
          lambda shard, data: self._part_of_framed(split, shard, data))
    for shard in sorted(shards):
      parts = shards[shard]
      spill = None
      if self._parts_dir is not None:
        directory = FileSystems.join(self._parts_dir, split)
        spill = lambda data, s=shard: _write_part(directory, s, data)
      # Always to a part file (spill_bytes 0): never records in the
      # shuffle, however small the run.
      yield (split, shard), runs.pack(parts, _expected(parts.how, parts.size),
                                      spill, 0)

  def _part_of_framed(self, split, shard, data: bytes) -> tuple:
    """(how, data, size) of framed bytes of at least MEMBER_BYTES, as
    `_part` makes them."""
    member = gzip_members(data, self._level, self._cap)
    size = len(member)
    if self._parts_dir is not None and size >= SPILL_BYTES:
      return PART_FILE, _write_part(FileSystems.join(self._parts_dir, split),
                                    shard, member), size
    return MEMBER, member, size


def _expected(how, size) -> int:
  """About the bytes parts of these kinds and sizes take in the file: gzip
  members and part files, their size; framed records, a third of it
  compressed (the shuffle recompresses the same data); runs, what their
  parts add up to."""
  size = np.asarray(size, dtype=np.int64)
  return int(np.where(np.asarray(how) == INLINE, size // 3, size).sum())


class _WriteShardFn(beam.DoFn):
  """(shard, [part]) -> the shard's file(s), parts in key order; their
  descriptions.

  (Applied with an output type: Beam's type inference would otherwise walk
  the bytecode of everything `process` calls, ~0.3 s per pipeline.)"""

  def __init__(self, directory: str, num_shards: Dict[str, int],
               codec: Codec, level: Optional[int],
               shuffle: Optional["Shuffle"] = None,
               max_bytes: Optional[Dict[str, Optional[int]]] = None,
               member_cap: int = MEMBER_CAP):
    self._directory = directory
    self._n = dict(num_shards)
    self._cap = member_cap
    self._codec = codec
    self._level = level
    self._shuffle = shuffle
    self._max = dict(max_bytes or {})

  def _shuffled(self, seed, split, shard, parts):
    """One part per bucket: the bucket's records (from every batch) in a
    seeded random order, as one gzip member (framed records for a codec
    without gzip). Memory: one bucket."""
    for bucket, group in itertools.groupby(parts, key=lambda p: p[0][0]):
      records = []
      for _, how, data, _, _ in group:
        if how == PART_FILE:
          data = read_part(data)
        if how != INLINE and self._codec.gzip:
          data = inflate(data)
        records.extend(unframe_records(data))
      random.Random(stable_hash((seed, split, shard, bucket))
                    ).shuffle(records)
      data = frame_records(records)
      if not self._codec.gzip:
        yield ((bucket,), INLINE, data, len(records), len(data))
        continue
      data = gzip_members(data, self._level, self._cap)
      yield ((bucket,), MEMBER, data, len(records), len(data))

  def process(self, element):
    (split, shard), parts = element
    parts = [q for p in parts if p is not None
             for q in (p.parts if isinstance(p, Gathered) else (p,))]
    limit = self._max.get(split) if self._codec.gzip else None
    expected = _expected([p[1] for p in parts],
                         [p[4] for p in parts]) if limit else 0
    out = (self._codec.files or ShardFiles)(
        self._directory, split, shard, self._n[split], self._codec,
        self._level, limit, expected, self._cap)
    if self._shuffle is None and self._codec.gzip:
      for window in runs.windows(parts, open_part, resolved):
        write_window(out, window)
      yield from out.close()
      return
    parts = map(resolved, runs.in_key_order(parts, open_part))
    if self._shuffle is not None and self._codec.framed:
      parts = self._shuffled(self._shuffle.seed, split, shard, parts)
    for _, how, data, count, size in parts:
      if how == INLINE:
        out.inline(data, count)
      elif how == MEMBER:
        out.member(data, count)
      else:
        out.part_file(data, size, count)
    yield from out.close()


class WriteShards(beam.PTransform):
  """Writes batches (split, key, [item]) as deterministic files, for each
  split `num_shards[split]` shards (every one is written, even empty).

  A split with a `max_bytes` limit gets files of at most that many bytes:
  a shard that outgrows it continues in further files, staged as
  `<shard name>-roll0001<suffix>`, ...; `finish_shard_names` (run by
  Commit) renames them all to `<split>-i-of-total`.

  Args:
    directory: where the files go: DIR/<split>-00000-of-00004<suffix>.
    num_shards: split name -> number of shards.
    codec: TFRECORD_GZIP, JSON_LINES, tfds_files.TFRECORD_PLAIN or
      array_records.array_record_codec(options).
    gzip_level: None for ISA-L's fast level, or a zlib level 1-9.
    shuffle: a seeded Shuffle, or None for key order.
    max_bytes: split name -> the largest file size, or None for no limit
      (gzip codecs only).
    member_cap: framed bytes per gzip member at most (MEMBER_CAP): where
      random access can enter a shard.

  Outputs a sinks.parts.ShardWritten per file.
  """

  def __init__(self, directory: str, num_shards: Dict[str, int],
               codec: Codec = TFRECORD_GZIP,
               gzip_level: Optional[int] = None,
               shuffle: Optional["Shuffle"] = None,
               max_bytes: Optional[Dict[str, Optional[int]]] = None,
               member_cap: int = MEMBER_CAP):
    super().__init__()
    if member_cap < 1:
      raise ValueError(f"member_cap must be at least 1, got {member_cap}")
    self._cap = member_cap
    self._shuffle = shuffle
    self._max = dict(max_bytes or {})
    if self._max and any(self._max.values()) and not codec.gzip:
      raise ValueError("max_bytes needs a gzip codec")
    for split, n in num_shards.items():
      if n < 1:
        raise ValueError(f"num_shards must be at least 1, got {n} for "
                         f"{split!r}")
    self._directory = directory
    self._n = dict(num_shards)
    self._codec = codec
    self._level = gzip_level

  def expand(self, batches):
    parts_dir = FileSystems.join(self._directory, PARTS_DIR)
    dealt = (batches
             # (split, key, [item])
             | "Deal" >> beam.ParDo(_DealFn(
                 self._n, self._codec, self._level, parts_dir, self._shuffle,
                 GATHER_BATCHES if separates_outputs(batches.pipeline) else 1,
                 self._cap)).with_output_types(Any))
             # ((split, shard), (key, how, data, count, size) or Gathered)
    every = (batches.pipeline
             | "AllShards" >> beam.Create(sorted(
                 ((split, s), None) for split, n in self._n.items()
                 for s in range(n))))
             # ((split, shard), None): so that empty shards are written too
    return ((dealt, every)
            | "Parts" >> beam.Flatten()
            | "GroupShards" >> beam.GroupByKey()
            # ((split, shard), [part or None])
            | "WriteShard" >> beam.ParDo(_WriteShardFn(
                self._directory, self._n, self._codec, self._level,
                self._shuffle, self._max, self._cap)).with_output_types(Any))
            # ShardWritten


def finish_shard_names(directory: str, files: List[ShardWritten]
                       ) -> List[ShardWritten]:
  """Final names for the files of WriteShards: a split whose shards all
  stayed within one file keeps its names; a split where some continued in
  further files gets `<split>-i-of-total` in (shard, roll) order. The
  staged files (and their indexes) are renamed in one call per split,
  after one listing: on
  GCS and S3 a rename is a copy, which the file systems batch. A rename
  already done is skipped, so a retried commit works. Returns the
  descriptions with the final names."""
  out: List[ShardWritten] = []
  for split, grouped in itertools.groupby(
      sorted(files, key=lambda f: (f.split, f.writer, f.roll, f.file)),
      key=lambda f: f.split):
    group = list(grouped)
    if all(f.roll == 0 for f in group):
      out.extend(group)
      continue
    total = len(group)
    first = re.match(r".*-of-[0-9]+(.*)$", group[0].file, re.S)
    assert first is not None  # shard_name(split, i, n, suffix)
    suffix = first.group(1)
    present = {m.path.rsplit("/", 1)[-1] for m in FileSystems.match(
        [FileSystems.join(directory, f"{split}-*")])[0].metadata_list}
    present |= {f"{INDEX_DIR}/" + m.path.rsplit("/", 1)[-1]
                for m in FileSystems.match([FileSystems.join(
                    directory, INDEX_DIR, f"{split}-*")])[0].metadata_list}
    olds, news = [], []
    for i, f in enumerate(group):
      final = shard_name(split, i, total, suffix)
      renamed = f._replace(file=final)
      pairs = [(f.file, final)]
      if f.index_file:
        renamed = renamed._replace(index_file=(
            f"{INDEX_DIR}/{final}" + f.index_file[len(INDEX_DIR) + 1
                                                  + len(f.file):]))
        pairs.append((f.index_file, renamed.index_file))
      for old, new in pairs:
        if old != new and (old in present or new not in present):
          olds.append(FileSystems.join(directory, old))
          news.append(FileSystems.join(directory, new))
      out.append(renamed)
    if olds:
      FileSystems.rename(olds, news)
  return out


def _shard_info(path: str, split: str) -> ShardWritten:
  """A file Beam's sink wrote, read back: its records counted, its size
  and SHA-256 taken (Beam's sink says none of them)."""
  size, sha256 = sha256_of(path)
  return ShardWritten(split, path.rsplit("/", 1)[-1], count_tfrecords(path),
                      size, sha256=sha256)


def _records_of(batch, split):
  return batch[2] if batch[0] == split else ()


class WriteWithBeamSink(beam.PTransform):
  """The same batches written by Beam's own `WriteToTFRecord` (--sink beam).

  The files have the same format and names, but the runner decides which
  record goes to which shard and in what order: not byte-identical between
  runs, and one Beam element per record (slower). For users who want
  Beam's sink; the default is `WriteShards`.
  """

  def __init__(self, directory: str, num_shards: Dict[str, int]):
    super().__init__()
    self._directory = directory
    self._n = dict(num_shards)

  def expand(self, batches):
    splits = sorted(self._n)
    written = []
    for split in splits:
      written.append(
          batches
          # (split, key, [record]); not beam.Partition: a multi-output
          # ParDo (see runners.gaps)
          | f"Records[{split}]" >> beam.FlatMap(_records_of, split)
          # bytes
          | f"Write[{split}]" >> beam.io.WriteToTFRecord(
              FileSystems.join(self._directory, split),
              file_name_suffix=SHARD_SUFFIX, num_shards=self._n[split],
              shard_name_template="-SSSSS-of-NNNNN",
              compression_type=CompressionTypes.GZIP)
          # final shard path
          | f"CountShard[{split}]" >> beam.Map(
              lambda path, s: _shard_info(path, s), split
          ).with_output_types(Any))
    return written | "Shards" >> beam.Flatten()

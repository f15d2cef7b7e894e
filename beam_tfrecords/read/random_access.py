"""Records by number: a split's records (over a window of datasets)
read at any position, through the index beside each shard (gzip or
uncompressed TFRecords) or ArrayRecord's own.

    records = RecordIndex("out/flights", "train")
    len(records)                       # every record of the split
    records[123_456]                   # one serialized Example
    records.get([9, 4, 1_000_000])     # many: each member inflated once

A split's records are numbered across its shards in order (dataset after
dataset over a window), as core.shares numbers them. Record i is in the
gzip member the shard's index (core.shard_index) names; that member is
read (one ranged read) and inflated (ISA-L, its CRC-32 checked) and its
records cut out of it (their CRCs checked). `get` groups the positions
asked for by member, so a member is inflated once however many of its
records are wanted; inflated members' records stay in a cache of
`cache_bytes` (MemberCache: the first ones taken, and the last few
used). An uncompressed
shard's record is one ranged read (DALI's index gives its place); an
ArrayRecord shard's, array_record's reader.

Each shard's index is read when the shard is first used and checked
against dataset.json (its size and SHA-256) and the shard (size, first
and last member's SHA-256); an index that is not the shard's raises
ShardIndexError naming both files. With `check` (the default) the shard's
own SHA-256 is checked then too, once per process and build, and every
member read is checked (its header's size and record count against the
index, its CRC-32 and size as it inflates, each record's CRCs) before
any of its records is handed out: ShardDamagedError otherwise. A dataset
without indexes (built before them, or with --sink beam) raises an
InputError that says to read it as a stream or rebuild it. A shard is
checked against its dataset's generation whenever it is opened (local
shards stay open, at most _Descriptors.MAX_OPEN a process, and must be
the file first opened; others are read by name, and a failed read is
reported as the dataset's replacement when it was one), so a dataset
replaced meanwhile raises DatasetReplacedError.
"""

import collections
import hashlib
import logging
import os
import struct
import threading
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from isal import isal_zlib

from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import (InputError, ShardDamagedError,
                                        ShardIndexError, preview)
from beam_tfrecords.core.generations import Guard
from beam_tfrecords.core.members import HEADER_BYTES, MemberError, member_size
from beam_tfrecords.core.shard_formats import (ShardFormat, of_dataset,
                                               of_file)
from beam_tfrecords.core.shard_index import (DALI_INDEX_SUFFIX, INDEX_SUFFIX,
                                             ShardIndex)
from beam_tfrecords.core.shard_reader import unframe
from beam_tfrecords.core.tfrecord_files import masked_crc32c
from beam_tfrecords.read.window import Datasets, window

__all__ = ["RecordIndex", "IndexedShard", "PlainShard", "OwnShard",
           "MemberCache", "indexed_files", "CACHE_BYTES"]

# Bytes of inflated members kept, by default (per process: each DataLoader
# worker has its own): a 1M-flight split's members take about 420 MB.
CACHE_BYTES = 256 << 20


class _Descriptors:
  """The descriptors of the local shards a process reads, at most MAX_OPEN
  open (the least recently used closed, and opened again when read again):
  a split of thousands of shards must not run out of descriptors. Forked
  DataLoader workers inherit them (pread does not move a shared offset)."""

  MAX_OPEN = 64

  def __init__(self):
    # (path, generation) -> descriptor
    self._open: "collections.OrderedDict[Tuple[str, Optional[str]], int]" \
        = collections.OrderedDict()
    self._lock = threading.Lock()

  def get(self, shard: "_Shard") -> int:
    """The shard's descriptor: kept by (path, generation), so a reader of
    another build of the dataset (made after an overwrite) opens the file
    anew, and checked to be the file the shard first opened."""
    key = (shard.path, shard.generation)
    with self._lock:
      fd = self._open.get(key)
      if fd is not None:
        self._open.move_to_end(key)
        shard.same_file(fd)
        return fd
      fd = shard.opened()
      self._open[key] = fd
      while len(self._open) > self.MAX_OPEN:
        _, old = self._open.popitem(last=False)
        os.close(old)
      return fd

  def close(self, shard: "_Shard") -> None:
    with self._lock:
      fd = self._open.pop((shard.path, shard.generation), None)
      if fd is not None:
        os.close(fd)


_DESCRIPTORS = _Descriptors()


# Shards whose SHA-256 this process checked: (path, generation, SHA-256).
_HASHED: set = set()
# Bytes hashed per read.
_HASH_READ = 8 << 20


class _Shard:
  """One shard file, checked against its index on first use: local files
  read by descriptor (pread), others through Beam's FileSystems."""

  def __init__(self, path: str, index_path: Optional[str], records: int,
               guard: Optional[Guard] = None,
               index_sum: Optional[Tuple[int, str]] = None,
               check: bool = True, sha256: Optional[str] = None):
    self.path, self.index_path, self.records = path, index_path, records
    self.sha256 = sha256
    self._guard = guard
    # The generation of the dataset it was listed by (its _SUCCESS).
    self.generation = guard.generation_of(path) if guard else None
    # The index's (bytes, SHA-256) as dataset.json lists them.
    self.index_sum, self.check = index_sum, check
    self._checked = False
    # The local file first opened (device, inode): opened again, it must
    # be the same file.
    self._identity: Optional[Tuple[int, int]] = None
    self._lock = threading.Lock()

  def __getstate__(self) -> dict:  # (spawned DataLoader workers)
    state = dict(self.__dict__)
    del state["_lock"]
    return state

  def __setstate__(self, state: dict) -> None:
    self.__dict__.update(state)
    self._lock = threading.Lock()

  def _failed(self, error: Exception) -> BaseException:
    return self._guard.failed(self.path, error) if self._guard else error

  def opened(self) -> int:
    """A new descriptor of the local shard, checked: still the dataset's
    generation, and the file first opened."""
    try:
      fd = os.open(self.path, os.O_RDONLY)
    except OSError as e:
      raise self._failed(InputError(f"cannot read {self.path}: {e}")) from e
    try:
      if self._guard is not None:
        self._guard.check(self.path)
      self.same_file(fd)
    except BaseException:
      os.close(fd)
      raise
    return fd

  def same_file(self, fd: int) -> None:
    """Raises unless `fd` is the file this shard first opened (the first
    one opened is taken as it)."""
    st = os.fstat(fd)
    if self._identity is None:
      self._identity = (st.st_dev, st.st_ino)
    elif self._identity != (st.st_dev, st.st_ino):
      raise self._failed(InputError(
          f"{self.path} was replaced while it was read; read it again"))

  def close(self) -> None:
    """Closes its descriptor (opened again if read again)."""
    _DESCRIPTORS.close(self)

  def _read(self, offset: int, length: int) -> bytes:
    if fs.is_local(self.path):
      return os.pread(_DESCRIPTORS.get(self), length, offset)
    try:
      with fs.open_read(self.path, fs.UNCOMPRESSED) as f:
        f.seek(offset)
        return f.read(length)
    except Exception as e:  # pylint: disable=broad-except
      raise self._failed(e) from e

  def _ready(self) -> None:
    if not self._checked:
      with self._lock:
        if not self._checked:
          self._open()
          self._checked = True

  def _open(self) -> None:
    """Reads the index and checks it against the shard."""
    try:
      index = None
      if self.index_path is not None:
        index = self._index_bytes()
      if fs.is_local(self.path):
        size = os.fstat(_DESCRIPTORS.get(self)).st_size
      else:
        size = fs.match(self.path)[0].size
    except (OSError, IndexError) as e:
      raise self._failed(InputError(
          f"cannot read {self.path} or its index {self.index_path}: "
          f"{e}")) from e
    self._check(index, size)
    self._check_sum(size)

  def _check_sum(self, size: int) -> None:
    """With `check`, the shard's SHA-256 against dataset.json's, once per
    process and build (on first use): its index ties each member to its
    offset, size and record count, not to its bytes, so two members of
    one size and count swapped would read as each other."""
    if not self.check or self.sha256 is None:
      return
    fd = _DESCRIPTORS.get(self) if fs.is_local(self.path) else None
    st = os.fstat(fd) if fd is not None else None
    # The file itself too: a copy laid over the same path (with the same
    # _SUCCESS) is hashed again.
    key = (self.path, self.generation, self.sha256, size) + (
        (st.st_dev, st.st_ino, st.st_mtime_ns) if st else ())
    if key in _HASHED:
      return
    if fd is not None:
      digest, at = hashlib.sha256(), 0
      while at < size:
        data = os.pread(fd, min(_HASH_READ, size - at), at)
        if not data:
          break
        digest.update(data)
        at += len(data)
      found = digest.hexdigest() if at == size else None
    else:
      found = fs.sha256_of(self.path, limit=size + 1)[1]
    if found != self.sha256:
      raise self._failed(ShardDamagedError(
          f"{self.path}: its SHA-256 is not the one its dataset.json lists "
          "(its members are not the ones the build wrote, or not in their "
          "order). `beam-tfrecords verify` names every damaged file; "
          "restore it or build the dataset again", file=self.path,
          reason="its SHA-256 is not the one its dataset.json lists"))
    _HASHED.add(key)

  def _index_bytes(self) -> bytes:
    """The index file, checked against the size and SHA-256 dataset.json
    lists for it (once per open): a damaged index is refused before
    anything is read through it."""
    assert self.index_path is not None
    with fs.open_read(self.index_path, fs.UNCOMPRESSED) as f:
      if self.index_sum is None:
        return f.read()
      size, digest = self.index_sum
      data = f.read(size + 1)
    if len(data) != size or (
        self.check and hashlib.sha256(data).hexdigest() != digest):
      what = (f"it is {len(data):,} bytes" + (" or more" if len(data) > size
                                              else "")
              + f", dataset.json lists {size:,}") if len(data) != size \
          else "its SHA-256 is not the one dataset.json lists"
      raise ShardIndexError(
          f"the index {self.index_path} of the shard {self.path} is "
          f"damaged: {what}. `beam-tfrecords verify` names every damaged "
          "file; restore it or build the dataset again (or read the shard "
          "as a stream)")
    return data

  def _check(self, index: Optional[bytes], size: int) -> None:
    raise NotImplementedError

  def _mismatch(self, what: str) -> ShardIndexError:
    return ShardIndexError(
        f"the index {self.index_path} does not belong to the shard "
        f"{self.path}: {what}. The index is stale (from another build) or "
        "foreign; rebuild the dataset, or read the shard as a stream")

  def get(self, local: np.ndarray, cache: "MemberCache") -> List[bytes]:
    """The records at these positions of the shard, in their order."""
    raise NotImplementedError


class IndexedShard(_Shard):
  """A gzip shard and its index (core.shard_index): the records of its
  members, each member checked as it is inflated."""

  def __init__(self, path: str, index_path: str, records: int,
               guard: Optional[Guard] = None,
               index_sum: Optional[Tuple[int, str]] = None,
               check: bool = True, sha256: Optional[str] = None):
    super().__init__(path, index_path, records, guard, index_sum, check,
                     sha256)
    self._index: Optional[ShardIndex] = None

  @property
  def index(self) -> ShardIndex:
    self._ready()
    assert self._index is not None
    return self._index

  def _check(self, index: Optional[bytes], size: int) -> None:
    assert index is not None and self.index_path is not None
    parsed = ShardIndex.from_bytes(index, self.index_path)
    parsed.check(size, self._read, self.index_path, self.path)
    if parsed.records != self.records:
      raise ShardIndexError(
          f"the index {self.index_path} of the shard {self.path} counts "
          f"{parsed.records:,} records, its dataset.json {self.records:,}: "
          "the dataset's files are not of one build")
    self._index = parsed

  def _damaged(self, m: int, what: str) -> ShardDamagedError:
    start = int(self.index.offsets[m])
    return ShardDamagedError(
        f"{self.path}: gzip member {m} (byte {start:,}) {what}. The shard "
        "is not the one its build wrote: `beam-tfrecords verify` names "
        "every damaged file; restore it or build the dataset again",
        file=self.path, member=m, offset=start, reason=what)

  def _inflated(self, m: int) -> List[bytes]:
    """Member m's records, checked: the member's header says the size
    and record count its index does, it inflates with its CRC-32 and
    size, and (with `check`) every record's CRCs match."""
    index = self.index
    start, stop = int(index.offsets[m]), int(index.offsets[m + 1])
    want = int(index.first_records[m + 1] - index.first_records[m])
    data = self._read(start, stop - start)
    if len(data) != stop - start:
      raise self._damaged(m, f"is cut: {len(data):,} bytes of "
                          f"{stop - start:,} are there")
    try:
      said = member_size(data[:HEADER_BYTES], start)
    except MemberError as e:
      raise self._damaged(m, f"has no header of ours ({e})") from e
    if said != (stop - start, want):
      raise self._damaged(m, f"says {said[0]:,} bytes and {said[1]:,} "
                          f"records; its index {stop - start:,} and "
                          f"{want:,}")
    d = isal_zlib.decompressobj(wbits=31)
    try:
      framed = d.decompress(data)
    except Exception as e:  # pylint: disable=broad-except
      raise self._damaged(m, f"does not inflate ({e})") from e
    if not d.eof or d.unused_data:
      raise self._damaged(m, "does not end where its header says")
    records, used, wrong = unframe(framed, self.check)
    if wrong or used != len(framed) or len(records) != want:
      raise self._damaged(m, wrong or f"holds {len(records):,} whole "
                          f"records, its index says {want:,}")
    return records

  def get(self, local: np.ndarray, cache: "MemberCache") -> List[bytes]:
    """The records at these positions of the shard, in their order; each
    member they touch inflated once (or found in `cache`)."""
    index = self.index
    member = index.member_of(local)
    within = local - index.first_records[member].astype(np.int64)
    order = np.argsort(member, kind="stable")
    out: List[bytes] = [b""] * len(local)
    current, records = -1, []
    for g, m, w in zip(order.tolist(), member[order].tolist(),
                       within[order].tolist()):
      if m != current:  # the next member: inflated (or cached) once
        current, found = m, cache.get((self.path, self.generation, m))
        if found is None:
          found = self._inflated(m)
          cache.put((self.path, self.generation, m), found,
                    sum(map(len, found)) + 40 * len(found))
        records = found
      out[g] = records[w]
    return out


class PlainShard(_Shard):
  """An uncompressed TFRecord shard and DALI's index of it (a line
  "offset framed_size" per record): each record one ranged read, its
  length and CRC checked against the index."""

  def _check(self, index: Optional[bytes], size: int) -> None:
    assert index is not None
    try:
      pairs = np.array(index.split(), dtype=np.int64).reshape(-1, 2)
    except (ValueError, OverflowError) as e:
      raise self._mismatch(f"it is not lines of two whole numbers ({e})") \
          from e
    offsets, sizes = pairs[:, 0], pairs[:, 1]
    if len(offsets) != self.records:
      raise self._mismatch(f"the index lists {len(offsets):,} records, the "
                           f"dataset {self.records:,}")
    ends = offsets + sizes
    if len(offsets) and (offsets[0] != 0 or (offsets[1:] != ends[:-1]).any()
                         or ends[-1] != size) or (not len(offsets) and size):
      raise self._mismatch(f"its records do not tile the shard's {size:,} "
                           "bytes")
    self._offsets, self._sizes = offsets, sizes

  def get(self, local: np.ndarray, cache: "MemberCache") -> List[bytes]:
    self._ready()
    out = []
    for offset, size in zip(self._offsets[local].tolist(),
                            self._sizes[local].tolist()):
      framed = self._read(offset, size)
      if len(framed) != size or struct.unpack_from("<Q", framed)[0] != (
          size - 16) or masked_crc32c(framed[12:-4]) != struct.unpack_from(
              "<I", framed, size - 4)[0]:
        raise self._mismatch(f"no record of {size - 16:,} bytes with its "
                             f"CRC at byte {offset:,}")
      out.append(framed[12:-4])
    return out


class OwnShard(_Shard):
  """A shard of a format of its own (core.shard_formats: ArrayRecord's,
  whose footer indexes it), read at random by its format's reader (local
  files only)."""

  def __init__(self, path: str, records: int, guard: Optional[Guard],
               fmt: ShardFormat):
    super().__init__(path, None, records, guard)
    self.fmt = fmt

  def __getstate__(self) -> dict:
    state = super().__getstate__()
    state.pop("_reader", None)
    state["_checked"] = False
    return state

  def _open(self) -> None:
    if not fs.is_local(self.path):
      raise InputError(
          f"{self.path}: {self.fmt.label} files are read at random on local "
          "disk only; copy the dataset to a local disk for random access "
          "(or read it as a stream)")
    os.close(self.opened())  # (checks the generation)
    assert self.fmt.open_random is not None
    try:
      self._reader = self.fmt.open_random(self.path)
    except Exception as e:  # pylint: disable=broad-except
      raise self._failed(e) from e
    if self._reader.num_records() != self.records:
      raise ShardDamagedError(
          f"{self.path} holds {self._reader.num_records():,} records, its "
          f"dataset.json says {self.records:,}", file=self.path)

  def close(self) -> None:
    reader = self.__dict__.pop("_reader", None)
    if reader is not None:
      reader.close()
      self._checked = False

  def get(self, local: np.ndarray, cache: "MemberCache") -> List[bytes]:
    self._ready()
    return list(self._reader.read(local.tolist()))


class MemberCache:
  """Inflated members kept for the next reads, up to `limit` bytes (0:
  none): the last RECENT ones used (neighbours read one after another),
  and the first ones inflated until the limit is reached, kept for good.
  Random reads and a global shuffle's lookaheads go over the members
  again and again, in a cycle larger than the cache: a cache that drops
  the least recently used would drop every member before its next use,
  while one that keeps what it first took hits in the share of the split
  it holds."""

  RECENT = 8

  def __init__(self, limit: int):
    self.limit = limit
    self._kept: Dict[tuple, List[bytes]] = {}
    self._recent: "collections.OrderedDict[tuple, Tuple[List[bytes], int]]" \
        = collections.OrderedDict()
    self._bytes = 0
    self._recent_bytes = 0

  def get(self, key) -> Optional[List[bytes]]:
    """A member's records (checked when inflated), or None."""
    data = self._kept.get(key)
    if data is None:
      held = self._recent.get(key)
      if held is not None:
        self._recent.move_to_end(key)
        data = held[0]
    return data

  def put(self, key, data: List[bytes], size: int) -> None:
    """Keeps a member's records, which take `size` bytes."""
    if size > self.limit:
      return
    if self._bytes + size <= self.limit:
      self._kept[key] = data
      self._bytes += size
      return
    self._recent[key] = (data, size)
    self._recent_bytes += size
    while len(self._recent) > self.RECENT or (
        self._recent_bytes > self.limit):
      _, (_, old) = self._recent.popitem(last=False)
      self._recent_bytes -= old


def indexed_files(found, split: str, transformed: bool = False,
                  check: bool = True) -> List[_Shard]:
  """The shards of a split over a window, in reading order, each as the
  reader of its kind: gzip with our index, uncompressed with DALI's,
  ArrayRecord.

  Raises:
    InputError: a shard without an index (names the dataset).
  """
  out: List[_Shard] = []
  for path, info in found:
    _warn_random_access(path, info)
    guard = Guard({path: info.generation})
    splits = info.splits
    if transformed:
      if info.transform is None:
        raise InputError(f"{path} has no transformed records (its schema "
                         "has no `transform:` section)")
      splits = info.transform.splits
    if split not in splits:
      raise InputError(f"{path} has no split {split!r}; it has "
                       f"{sorted(splits)}")
    for s in splits[split].shards:
      file = fs.join(path, s.file)
      fmt = of_file(s.file)
      if fmt.open_random is not None:
        out.append(OwnShard(file, s.num_records, guard, fmt))
      elif s.index is not None and s.index.file.endswith(INDEX_SUFFIX):
        out.append(IndexedShard(file, fs.join(path, s.index.file),
                                s.num_records, guard, _sum(s.index), check,
                                s.sha256))
      elif s.index is not None and s.index.file.endswith(DALI_INDEX_SUFFIX):
        out.append(PlainShard(file, fs.join(path, s.index.file),
                              s.num_records, guard, _sum(s.index), check,
                              s.sha256))
      else:
        raise InputError(
            f"{path}: the shard {s.file} has no index, so its records "
            "cannot be read by number (a dataset built before indexes, or "
            "with --sink beam); read it as a stream (RecordStream, "
            "shuffle='buffer'), or build it again")
  return out


def _sum(index) -> Tuple[int, str]:
  """An IndexInfo's (bytes, SHA-256)."""
  return index.num_bytes, index.sha256


def _warn_random_access(path: str, info) -> None:
  """What a dataset's format says of reading its shards at random, given
  their writer options (ArrayRecord's: chunks of more than one record
  are decompressed whole for each record): said once."""
  fmt = of_dataset(info)
  options = info.options.array_record_options if info.options else None
  note = fmt.random_note(options) if fmt.random_note and options else None
  if note and path not in _WARNED:
    _WARNED.add(path)
    logging.warning("%s: %s", path, note)


_WARNED: set = set()


class RecordIndex:
  """The records of one split (of a dataset or a window of them) by
  number.

  Args:
    datasets: a dataset folder, a glob, a pin file, or a list of them.
    split: the split.
    transformed: the records of the schema's `transform:` section.
    cache_bytes: inflated members kept for the next reads (MemberCache):
      reads that come back to a member (batches of random records, a
      global shuffle's next lookahead) skip its inflating. 0: none.
    check: check every record's CRCs and each index's SHA-256 (members'
      CRC-32, sizes and counts are checked either way).
  """

  def __init__(self, datasets: Datasets, split: str = "train",
               transformed: bool = False, cache_bytes: int = CACHE_BYTES,
               check: bool = True):
    self.cache_bytes = cache_bytes
    self._setup(window(datasets), split, transformed, check)

  @classmethod
  def of_window(cls, found, split: str, transformed: bool = False,
                cache_bytes: int = CACHE_BYTES,
                check: bool = True) -> "RecordIndex":
    """Of a window already read (window.window's)."""
    out = cls.__new__(cls)
    out.cache_bytes = cache_bytes
    out._setup(found, split, transformed, check)
    return out

  def _setup(self, found, split: str, transformed: bool,
             check: bool) -> None:
    self.split = split
    self.guards = [Guard({path: info.generation}) for path, info in found]
    self.shards = indexed_files(found, split, transformed, check)
    self.starts = np.zeros(len(self.shards) + 1, dtype=np.int64)
    np.cumsum([s.records for s in self.shards], out=self.starts[1:])
    self._cache = MemberCache(self.cache_bytes)

  def __len__(self) -> int:
    return int(self.starts[-1])

  def __getstate__(self) -> dict:  # (spawned DataLoader workers)
    state = dict(self.__dict__)
    state["_cache"] = MemberCache(self.cache_bytes)  # not its contents
    return state

  def close(self) -> None:
    """Closes the shards' files (opened again if read again)."""
    for shard in self.shards:
      shard.close()

  def __getitem__(self, i: int) -> bytes:
    if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
      raise TypeError(f"a record position is a whole number; got "
                      f"{preview(i)}")
    return self.get([i])[0]

  def get(self, wanted: Sequence[int]) -> List[bytes]:
    """The records at these positions (whole numbers), in their order;
    each member they touch inflated once.

    Raises:
      TypeError: a position that is not a whole number (1.9, "7").
      IndexError: one outside the split.
      DatasetReplacedError: the dataset was replaced since this reader
        was made (read it again).
    """
    positions = np.asarray(wanted)
    if positions.size and (positions.dtype.kind not in "iu"
                           or positions.ndim != 1):
      raise TypeError(f"record positions are whole numbers; got "
                      f"{preview(wanted)}")
    positions = positions.astype(np.int64, copy=False)
    for guard in self.guards:
      guard.still()
    n = len(self)
    if positions.size and (positions.min() < 0 or positions.max() >= n):
      bad = positions[(positions < 0) | (positions >= n)][0]
      raise IndexError(f"record {int(bad)} of a split of {n:,} records")
    shard = np.searchsorted(self.starts, positions, side="right") - 1
    if len(self.shards) == 1:
      return self.shards[0].get(positions, self._cache)
    out: List[bytes] = [b""] * len(positions)
    for s in np.unique(shard).tolist():
      mine = np.flatnonzero(shard == s)
      for i, record in zip(mine.tolist(), self.shards[s].get(
          positions[mine] - self.starts[s], self._cache)):
        out[i] = record
    return out

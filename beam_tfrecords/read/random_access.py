"""Records by number: a split's records (over a window of datasets)
read at any position, through the index beside each gzip shard.

    records = RecordIndex("out/flights", "train")
    len(records)                       # every record of the split
    records[123_456]                   # one serialized Example
    records.get([9, 4, 1_000_000])     # many: each member inflated once

A split's records are numbered across its shards in order (dataset after
dataset over a window), as core.shares numbers them. Record i is in the
gzip member the shard's index (core.shard_index) names; that member is
read (one ranged read) and inflated (ISA-L, its CRC-32 checked) and the
record cut out of it. `get` groups the positions asked for by member, so
a member is inflated once however many of its records are wanted, and
the last few members stay in a small cache for neighbours asked next.

Each shard's index is read when the shard is first used and checked
against the shard (size, first and last member's SHA-256); an index that
is not the shard's raises ShardIndexError naming both files. A dataset
without indexes (built before them, or with --sink beam) raises an
InputError that says to read it as a stream or rebuild it. Every shard is
checked against its dataset's generation when first opened, so a
dataset replaced meanwhile raises DatasetReplacedError.
"""

import collections
import os
import threading
from typing import List, Optional, Sequence, Tuple

import numpy as np
from isal import isal_zlib

from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import InputError, ShardIndexError
from beam_tfrecords.core.generations import Guard
from beam_tfrecords.core.shard_index import ShardIndex
from beam_tfrecords.core.tfrecord_files import unframe_records
from beam_tfrecords.read.window import Datasets, window

__all__ = ["RecordIndex", "IndexedShard", "indexed_files"]

# Members kept inflated (each about MEMBER_CAP of framed records).
CACHED_MEMBERS = 8


class IndexedShard:
  """One gzip shard and its index: the records of its members. Opened on
  first use (in each process: DataLoader workers fork)."""

  def __init__(self, path: str, index_path: str, records: int,
               guard: Optional[Guard] = None):
    self.path, self.index_path, self.records = path, index_path, records
    self._guard = guard
    self._pid: Optional[int] = None
    self._fd: Optional[int] = None
    self._index: Optional[ShardIndex] = None
    self._lock = threading.Lock()

  def _read(self, offset: int, length: int) -> bytes:
    if self._fd is not None:
      return os.pread(self._fd, length, offset)
    with fs.open_read(self.path, fs.UNCOMPRESSED) as f:
      f.seek(offset)
      return f.read(length)

  @property
  def index(self) -> ShardIndex:
    if self._index is None or self._pid != os.getpid():
      with self._lock:
        self._open()
    assert self._index is not None
    return self._index

  def _open(self) -> None:
    self._pid = os.getpid()
    self._fd = None
    try:
      with fs.open_read(self.index_path, fs.UNCOMPRESSED) as f:
        index = ShardIndex.from_bytes(f.read(), self.index_path)
      if fs.is_local(self.path):
        self._fd = os.open(self.path, os.O_RDONLY)
        size = os.fstat(self._fd).st_size
      else:
        size = fs.match(self.path)[0].size
    except (OSError, IndexError) as e:
      error = InputError(f"cannot read {self.path} or its index "
                         f"{self.index_path}: {e}")
      raise (self._guard.failed(self.path, error) if self._guard
             else error) from e
    if self._guard is not None:
      self._guard.check(self.path)
    index.check(size, self._read, self.index_path, self.path)
    if index.records != self.records:
      raise ShardIndexError(
          f"the index {self.index_path} of the shard {self.path} counts "
          f"{index.records:,} records, its dataset.json {self.records:,}: "
          "the dataset's files are not of one build")
    self._index = index

  def member(self, m: int) -> List[bytes]:
    """The records of member m."""
    index = self.index
    start, stop = int(index.offsets[m]), int(index.offsets[m + 1])
    data = self._read(start, stop - start)
    if len(data) != stop - start:
      raise InputError(f"{self.path}: {len(data):,} bytes at {start:,}, "
                       f"{stop - start:,} expected (a cut file)")
    records = unframe_records(isal_zlib.decompress(data, wbits=31))
    want = int(index.first_records[m + 1] - index.first_records[m])
    if len(records) != want:
      raise InputError(f"{self.path}: member {m} at byte {start:,} holds "
                       f"{len(records):,} records, its index says {want:,}")
    return records


def indexed_files(found, split: str, transformed: bool = False
                  ) -> List[Tuple[str, str, int]]:
  """(shard path, index path, records) of a split over a window, in
  reading order.

  Raises:
    InputError: a shard without an index (names the dataset).
  """
  out = []
  for path, info in found:
    splits = (info.transform.splits if transformed and info.transform
              else info.splits)
    if split not in splits:
      raise InputError(f"{path} has no split {split!r}; it has "
                       f"{sorted(splits)}")
    for s in splits[split].shards:
      if s.index is None or not s.index.file.endswith(".index"):
        raise InputError(
            f"{path}: the shard {s.file} has no index, so its records "
            "cannot be read by number (a dataset built before indexes, or "
            "with --sink beam or --tfds); read it as a stream "
            "(RecordStream, shuffle='buffer'), or build it again")
      out.append((fs.join(path, s.file), fs.join(path, s.index.file),
                  s.num_records))
  return out


class RecordIndex:
  """The records of one split (of a dataset or a window of them) by
  number.

  Args:
    datasets: a dataset folder, a glob, a pin file, or a list of them.
    split: the split.
    transformed: the records of the schema's `transform:` section.
  """

  def __init__(self, datasets: Datasets, split: str = "train",
               transformed: bool = False):
    self._setup(window(datasets), split, transformed)

  @classmethod
  def of_window(cls, found, split: str, transformed: bool = False
                ) -> "RecordIndex":
    """Of a window already read (window.window's)."""
    out = cls.__new__(cls)
    out._setup(found, split, transformed)
    return out

  def _setup(self, found, split: str, transformed: bool) -> None:
    guard = Guard({path: info.generation for path, info in found})
    self.split = split
    self.shards = [IndexedShard(p, i, n, guard)
                   for p, i, n in indexed_files(found, split, transformed)]
    self.starts = np.zeros(len(self.shards) + 1, dtype=np.int64)
    np.cumsum([s.records for s in self.shards], out=self.starts[1:])
    self._cache: "collections.OrderedDict[Tuple[int, int], List[bytes]]" \
        = collections.OrderedDict()

  def __len__(self) -> int:
    return int(self.starts[-1])

  def __getitem__(self, i: int) -> bytes:
    return self.get([i])[0]

  def locate(self, positions) -> Tuple[np.ndarray, np.ndarray,
                                       np.ndarray]:
    """(shard, member, record within the member) of each position."""
    positions = np.asarray(positions, dtype=np.int64)
    n = len(self)
    if positions.size and (positions.min() < 0 or positions.max() >= n):
      bad = positions[(positions < 0) | (positions >= n)][0]
      raise IndexError(f"record {int(bad)} of a split of {n:,} records")
    shard = np.searchsorted(self.starts, positions, side="right") - 1
    local = positions - self.starts[shard]
    member = np.empty_like(positions)
    within = np.empty_like(positions)
    for s in np.unique(shard).tolist():
      mine = shard == s
      index = self.shards[s].index
      m = index.member_of(local[mine])
      member[mine] = m
      within[mine] = local[mine] - index.first_records[m].astype(np.int64)
    return shard, member, within

  def get(self, positions: Sequence[int]) -> List[bytes]:
    """The records at these positions, in their order; each member they
    touch inflated once."""
    shard, member, within = self.locate(positions)
    if not len(shard):
      return []
    key = shard * (1 << 32) + member
    order = np.argsort(key, kind="stable")
    out: List[Optional[bytes]] = [None] * len(key)
    sorted_keys = key[order]
    cuts = np.flatnonzero(np.diff(sorted_keys)) + 1
    for group in np.split(order, cuts):
      first = int(group[0])
      records = self._member(int(shard[first]), int(member[first]),
                             len(group))
      for g, w in zip(group.tolist(), within[group].tolist()):
        out[g] = records[w]
    return out  # type: ignore[return-value]

  def _member(self, shard: int, member: int, wanted: int) -> List[bytes]:
    key = (shard, member)
    records = self._cache.get(key)
    if records is not None:
      self._cache.move_to_end(key)
      return records
    records = self.shards[shard].member(member)
    if wanted < len(records):  # a few of its records: keep it for more
      self._cache[key] = records
      while len(self._cache) > CACHED_MEMBERS:
        self._cache.popitem(last=False)
    return records



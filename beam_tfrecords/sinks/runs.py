"""Runs: one shard's parts of many batches, sent as one part.

A batch `(split, key, items)` given to `WriteShards` may hold many batches:
`items` is then an object with `keys` (ascending), `records` (a
wire.Ragged of every record) and `offsets` (each batch's first record),
e.g. `encoding.groups.GroupedRecords`, every group of a bucket. The dealer
deals each of them exactly as it deals a batch of its own (vectorized), and
sends each shard one **run**: that shard's parts of all of them, in key
order, as columns (`Parts`) pickled in pages of about `PAGE_BYTES` (in
a part file when large, as other large parts are). The
shard's writer merges its runs with its other parts by key
(`in_key_order`), holding one page per run, so the file bytes are the
same as if every batch had been its own element, with a few elements per
shard instead of one per batch.
"""

import bisect
import heapq
import pickle
from typing import (Any, Callable, Dict, Iterable, Iterator, List, NamedTuple,
                    Optional, Tuple)

import numpy as np
import pyarrow as pa

from beam_tfrecords.core.tfrecord_files import frame_buffer

__all__ = ["RUN", "Parts", "pack", "in_key_order", "windows", "deal_records",
           "PAGE_BYTES"]

# How a run travels (sinks.part_files: INLINE, MEMBER, PART_FILE are 0, 1, 2).
RUN = 3
_INLINE = 0
# Bytes of parts per page of a run. A shard's writer holds a page per run
# (at most MAX_WINDOW_RUNS) and merges them a window at a time: a window
# ends where the first of them does, so larger pages make fewer windows
# (each costs a cut of every page and a merge). 256 KiB pages made a 1M-row
# grouped build's one shard take 295 windows, and its writer 0.44 CPU-s.
PAGE_BYTES = 1 << 20
# More runs per shard than this are merged by a heap, part by part.
MAX_WINDOW_RUNS = 64
_PAGES, _FILE = "pages", "file"


class Parts(NamedTuple):
  """One shard's parts (sinks.part_files part tuples) in key order, as columns.

  Attributes:
    keys: each part's sort key.
    how: INLINE, MEMBER or PART_FILE per part.
    counts: items per part.
    size: bytes per part.
    inline: the data of the INLINE parts, back to back in order.
    other: part index -> data of a MEMBER / PART_FILE part.
  """
  keys: List[Any]
  how: np.ndarray
  counts: np.ndarray
  size: np.ndarray
  inline: bytes
  other: Dict[int, Any]

  @classmethod
  def of(cls, parts: List[tuple]) -> "Parts":
    """From part tuples (key, how, data, count, size)."""
    how = np.array([p[1] for p in parts], dtype=np.int64)
    return cls(keys=[p[0] for p in parts], how=how,
               counts=np.array([p[3] for p in parts], dtype=np.int64),
               size=np.array([p[4] for p in parts], dtype=np.int64),
               inline=b"".join(p[2] for p in parts if p[1] == _INLINE),
               other={i: p[2] for i, p in enumerate(parts)
                      if p[1] != _INLINE})

  def tuples(self) -> Iterator[tuple]:
    at = 0
    for i, (key, how, count, size) in enumerate(zip(
        self.keys, self.how.tolist(), self.counts.tolist(),
        self.size.tolist())):
      if how == _INLINE:
        yield (key, how, self.inline[at:at + size], count, size)
        at += size
      else:
        yield (key, how, self.other[i], count, size)

  def inline_ends(self) -> np.ndarray:
    """Where each part's inline bytes end in `inline` (len + 1, from 0):
    what `cut` takes, computed once per page."""
    ends = np.zeros(len(self.keys) + 1, dtype=np.int64)
    np.cumsum(np.where(self.how == _INLINE, self.size, 0), out=ends[1:])
    return ends

  def cut(self, start: int, stop: int, ends: np.ndarray) -> "Parts":
    """Parts start..stop (`ends`: this page's inline_ends())."""
    return Parts(self.keys[start:stop], self.how[start:stop],
                 self.counts[start:stop], self.size[start:stop],
                 self.inline[int(ends[start]):int(ends[stop])],
                 {i - start: d for i, d in self.other.items()
                  if start <= i < stop} if self.other else {})


def _pages(parts: Parts) -> Iterator[Tuple[bytes, Any]]:
  """(pickled Parts, its last key) of about PAGE_BYTES each (not
  compressed: a run is written once and read once, on the same machine's
  disk for a local run; compressing it cost more than it saved)."""
  ends = np.cumsum(parts.size)
  inline = parts.inline_ends()
  start = 0
  while start < len(parts.keys):
    base = int(ends[start - 1]) if start else 0
    stop = int(np.searchsorted(ends, base + PAGE_BYTES, side="left")) + 1
    stop = min(max(stop, start + 1), len(parts.keys))
    yield (pickle.dumps(tuple(parts.cut(start, stop, inline)), protocol=5),
           parts.keys[stop - 1])
    start = stop


def pack(parts: Parts, expected: int,
         spill: Optional[Callable[[bytes], str]] = None, spill_bytes: int = 0
         ) -> tuple:
  """A run part `(first key, RUN, data, count, expected)` of `parts`.
  `expected` is what the parts add to the writer's size estimate. When the
  run is at least `spill_bytes` and `spill` is given, it is written by
  `spill(bytes)` (a part file; its path travels)."""
  pages, lasts = [], []
  for page, last in _pages(parts):
    pages.append(page)
    lasts.append(last)
  count = int(parts.counts.sum())
  if spill is not None and sum(map(len, pages)) >= spill_bytes:
    # The pages' places, so that each is read on its own: a shard's
    # writer may merge hundreds of runs, and keeps no file open.
    places = np.zeros(len(pages) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in pages], out=places[1:])
    return (parts.keys[0], RUN, (_FILE, (spill(b"".join(pages)),
                                         places.tolist()), lasts),
            count, expected)
  return (parts.keys[0], RUN, (_PAGES, pages, lasts), count, expected)


def _file_pages(where: tuple, open_file: Callable) -> Iterator[bytes]:
  path, places = where
  for start, stop in zip(places, places[1:]):
    with open_file(path) as f:
      f.seek(start)
      yield f.read(stop - start)


def _run_pages(run: tuple, open_file: Callable) -> Iterator[Parts]:
  kind, data, _ = run[2]
  pages = data if kind == _PAGES else _file_pages(data, open_file)
  for page in pages:
    yield Parts(*pickle.loads(page))


def _parts(run: tuple, open_file: Callable) -> Iterator[tuple]:
  for page in _run_pages(run, open_file):
    yield from page.tuples()


def in_key_order(parts: Iterable[tuple], open_file: Callable
                 ) -> Iterator[tuple]:
  """A shard's parts (runs among them) as plain parts, in key order.
  `open_file(path)` opens a run's part file for reading."""
  parts = list(parts)
  runs = [p for p in parts if p[1] == RUN]
  plain = sorted((p for p in parts if p[1] != RUN), key=lambda p: p[0])
  if not runs:
    return iter(plain)
  return heapq.merge(plain, *(_parts(r, open_file) for r in runs),
                     key=lambda p: p[0])


class _Source:
  """One sorted source of parts, a page at a time."""

  def __init__(self, pages: Iterator[Parts], lasts: list):
    self._pages = pages
    self._lasts = list(lasts)
    self.page: Optional[Parts] = None
    self.ends = np.zeros(1, dtype=np.int64)  # the page's inline_ends()
    self.at = 0

  def ready(self) -> bool:
    """Loads the next page when this one is used up; False at the end."""
    while self.page is None or self.at >= len(self.page.keys):
      if not self._lasts:
        return False
      self.page, self.at = next(self._pages), 0
      self.ends = self.page.inline_ends()
      self._lasts.pop(0)
    return True

  def bound(self):
    """The last key of the current page when more pages follow (None:
    this is the last one)."""
    assert self.page is not None  # called after ready()
    return self.page.keys[-1] if self._lasts else None


def windows(parts: Iterable[tuple], open_file: Callable,
            resolve: Callable[[tuple], tuple] = lambda p: p
            ) -> Iterator[Parts]:
  """A shard's parts (runs among them), as Parts in key order, a window
  at a time: each window holds the parts of every source up to the
  smallest last key of the pages in memory (one page per run, and one
  of the plain parts). `resolve(part)` gives a plain part's bytes (read
  when its page is)."""
  parts = list(parts)
  runs = [r for r in parts if r[1] == RUN]
  if len(runs) > MAX_WINDOW_RUNS:
    # A window costs a step per source: with many runs, a heap is cheaper.
    yield from _windows_of(map(resolve, in_key_order(parts, open_file)))
    return
  plain = sorted((p for p in parts if p[1] != RUN), key=lambda p: p[0])
  sources = [_Source(_run_pages(r, open_file), r[2][2]) for r in runs]
  if plain:
    groups = _sized_groups(plain)
    sources.append(_Source(
        (Parts.of([resolve(p) for p in group]) for group in groups),
        [group[-1][0] for group in groups]))
  while True:
    sources = [src for src in sources if src.ready()]
    if not sources:
      return
    bounds = [b for b in (src.bound() for src in sources) if b is not None]
    bound = min(bounds) if bounds else None
    pieces = []
    for src in sources:
      page = src.page
      assert page is not None  # src.ready()
      keys = page.keys
      stop = len(keys) if bound is None else bisect.bisect_right(
          keys, bound, src.at)
      if stop > src.at:
        pieces.append(page.cut(src.at, stop, src.ends))
        src.at = stop
    yield _merged(pieces)


def _sized_groups(parts: List[tuple]) -> List[List[tuple]]:
  """Part tuples in order, cut into groups of about PAGE_BYTES."""
  groups: List[List[tuple]] = [[]]
  size = 0
  for part in parts:
    if size >= PAGE_BYTES:
      groups.append([])
      size = 0
    groups[-1].append(part)
    size += part[4]
  return groups


def _windows_of(parts: Iterator[tuple]) -> Iterator[Parts]:
  """Part tuples in order as Parts of about PAGE_BYTES each."""
  window, size = [], 0
  for part in parts:
    window.append(part)
    size += part[4]
    if size >= PAGE_BYTES:
      yield Parts.of(window)
      window, size = [], 0
  if window:
    yield Parts.of(window)


def _merged(pieces: List[Parts]) -> Parts:
  """Sorted Parts merged into one, in key order."""
  if len(pieces) == 1:
    return pieces[0]
  keys = [k for piece in pieces for k in piece.keys]
  order = np.array(sorted(range(len(keys)), key=keys.__getitem__),
                   dtype=np.int64)
  how = np.concatenate([p.how for p in pieces])
  count = np.concatenate([p.counts for p in pieces])
  size = np.concatenate([p.size for p in pieces])
  other, at = {}, 0
  for piece in pieces:
    other.update({at + i: d for i, d in piece.other.items()})
    at += len(piece.keys)
  inline_size = np.where(how == _INLINE, size, 0)
  offsets = np.zeros(len(keys) + 1, dtype=np.int64)
  np.cumsum(inline_size, out=offsets[1:])
  taken = pa.LargeBinaryArray.from_buffers(
      pa.large_binary(), len(keys),
      [None, pa.py_buffer(offsets),
       pa.py_buffer(b"".join(p.inline for p in pieces))]).take(
           pa.array(order))
  total = int(offsets[-1])
  inline = taken.buffers()[2].to_pybytes()[:total] if total else b""
  index = order.tolist()
  return Parts([keys[i] for i in index], how[order], count[order],
               size[order], inline,
               {new: other[i] for new, i in enumerate(index) if i in other})


def deal_records(items, hashes: np.ndarray, n: int, member_bytes: int,
                 part_of_framed: Callable[[int, bytes], tuple]
                 ) -> Dict[int, Parts]:
  """What sinks.shards deals one batch at a time, for every batch of
  `items` at once (TFRecord framing, no shuffle): shard -> its Parts.

  A batch's first record goes to shard hashes[i] % n, the next ones
  round-robin; a batch's records in one shard are one part; a part of at
  least `member_bytes` framed bytes is made a gzip member (or part file)
  by `part_of_framed(shard, data)` -> (how, data, size)."""
  keys = items.keys
  offsets = np.asarray(items.offsets, dtype=np.int64)
  counts = np.diff(offsets)
  records = items.records  # a Ragged: framed without a bytes per record
  first = (hashes % np.uint64(n)).astype(np.int64)
  group = np.repeat(np.arange(len(keys)), counts)
  rank = np.arange(len(records)) - np.repeat(offsets[:-1], counts)
  shard = (first[group] + rank) % n
  framed = frame_buffer(records.buf, records.offsets)
  ends = np.zeros(len(records) + 1, dtype=np.int64)
  np.cumsum(records.lengths + 16, out=ends[1:])
  # Records by (shard, batch, rank): a part is a run of equal (shard,
  # batch), its bytes the framed records in rank order.
  order = np.lexsort((rank, group, shard))
  lengths = np.diff(ends)[order]
  buf = np.frombuffer(framed, dtype=np.uint8)
  if n > 1:
    buf = np.frombuffer(pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(records),
        [None, pa.py_buffer(ends), pa.py_buffer(framed)]).take(
            pa.array(order)).buffers()[2], dtype=np.uint8)
  s_o, g_o = shard[order], group[order]
  new = np.ones(len(order), dtype=bool)
  new[1:] = (s_o[1:] != s_o[:-1]) | (g_o[1:] != g_o[:-1])
  part_first = np.flatnonzero(new)
  part_records = np.diff(np.append(part_first, len(order)))
  part_bytes = np.add.reduceat(lengths, part_first) if len(order) else \
      np.zeros(0, np.int64)
  part_shard, part_group = s_o[part_first], g_o[part_first]
  byte_ends = np.cumsum(part_bytes)
  out = {}
  bounds = np.searchsorted(part_shard, np.arange(n + 1))
  for sh in range(n):
    lo, hi = int(bounds[sh]), int(bounds[sh + 1])
    if lo == hi:
      continue
    b0 = int(byte_ends[lo - 1]) if lo else 0
    data = buf[b0:int(byte_ends[hi - 1])].tobytes()
    size = part_bytes[lo:hi].astype(np.int64)
    how = np.full(hi - lo, _INLINE, dtype=np.int64)
    other = {}
    big = np.flatnonzero(size >= member_bytes)
    if len(big):  # rare: sequences of 64 KiB or more
      local = np.concatenate([[0], np.cumsum(size)])
      keep = np.ones(len(data), dtype=bool)
      for i in big.tolist():
        how[i], other[i], size[i] = part_of_framed(
            sh, data[local[i]:local[i + 1]])
        keep[local[i]:local[i + 1]] = False
      data = np.frombuffer(data, np.uint8)[keep].tobytes()
    out[sh] = Parts(keys=[keys[g] for g in part_group[lo:hi].tolist()],
                    how=how, counts=part_records[lo:hi].astype(np.int64),
                    size=size, inline=data, other=other)
  return out

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
import uuid
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from isal import isal_zlib
import numpy as np

from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.fs import sha256_of
from beam_tfrecords.core.members import MEMBER_CAP, inflate
from beam_tfrecords.core.layout import INDEX_DIR, PARTS_DIR
from beam_tfrecords.core.shard_names import SHARDS, shard_name
from beam_tfrecords.core.shard_reader import count_tfrecords
from beam_tfrecords.core.unit_cache import (KeepParts, KeptParts, UnitRead,
                                            UnitStore)
from beam_tfrecords.core.tfrecord_files import frame_records, unframe_records
from beam_tfrecords.encoding.ragged import Ragged
from beam_tfrecords.runners.gaps import separates_outputs
from beam_tfrecords.sinks import runs
from beam_tfrecords.sinks.codec import SHARD_SUFFIX, TFRECORD_GZIP, Codec
from beam_tfrecords.sinks.deflate import gzip_members
from beam_tfrecords.sinks.part_files import (INLINE, MEMBER, PART_FILE,
                                             SPILL_BYTES, Slice, open_part,
                                             read_part, resolved, write_part)
from beam_tfrecords.sinks.parts import ShardWritten
from beam_tfrecords.sinks.shard_files import ShardFiles, write_window

__all__ = ["WriteShards", "WriteWithBeamSink", "Shuffle", "Gathered",
           "finish_shard_names", "stable_hash", "deal_digest", "undealt",
           "MEMBER_BYTES", "GATHER_BATCHES"]


# Parts at least this large are compressed before the shuffle.
MEMBER_BYTES = 64 * 1024


# Batches whose parts go to each shard as one element (see Gathered): at
# 100M rows (4,600 batches x 22 shards) one element per part was 100k
# elements, and the build peaked 160 MB higher (774 MB against 612 MB).
GATHER_BATCHES = 64


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


class _DealFn(beam.DoFn):
  """(split, key, [item]) -> ((split, shard), (key, how, data, count, size))
  per shard of the split.

  `how` is INLINE (data: framed items), MEMBER (data: a gzip member) or
  PART_FILE (data: the path of a file holding a gzip member, or for a
  codec without gzip the framed items); `size` is the bytes it takes.
  With `parts_dir`, data is a Slice of the batch's part file, and the
  parts of `gather` successive batches go to a shard as one Gathered.
  Batches of units kept for reuse (core.unit_cache) come as KeepParts,
  KeptParts and UnitRead elements: see `_unit`.
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
      path = write_part(FileSystems.join(self._parts_dir, split), shard, data)
      return (key, PART_FILE, path, len(part), size)
    return (key, how, data, len(part), size)

  def start_bundle(self):
    self._gathered: Dict[Tuple[str, int], list] = {}
    self._batches_dealt = 0

  def process(self, batch):
    if isinstance(batch, (KeepParts, KeptParts, UnitRead)):
      yield from self._unit(batch)
      return
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
    yield from self._gather_parts(split, self._spilled(split, dealt)[2])

  def _gather_parts(self, split, parts):
    for shard, part in parts:
      self._gathered.setdefault((split, shard), []).append(part)
    self._batches_dealt += 1
    if self._batches_dealt >= self._gather:
      yield from self._flush()

  def _unit(self, element):
    """A batch whose dealt parts are kept (KeepParts: dealt as any, its
    part file and parts then kept in the unit store), a reused batch's
    kept parts (KeptParts: passed on as they are, their Slices naming
    the part file they are in now), or the end of a kept unit (UnitRead:
    its batches were all kept by now, so it is marked complete)."""
    if isinstance(element, UnitRead):
      UnitStore(element.root).complete(element.key, element.batches,
                                       element.about)
      return
    split = element.split
    if isinstance(element, KeptParts):
      path = element.path
      yield from self._gather_parts(split, [
          (shard, (key, how, where._replace(path=path), count, size))
          for shard, (key, how, where, count, size) in element.parts])
      return
    assert self._parts_dir is not None, "kept parts need a staging folder"
    if not element.records:
      return
    dealt = [(shard, self._part(split, shard, key, part, spill=False))
             for (shard, key), part in self._deal(
                 split, element.order, element.records).items()]
    path, crc32, parts = self._spilled(split, dealt)
    entry = element.entry
    shuffle = self._shuffle
    UnitStore(entry.root).keep_parts(
        entry.key, entry.number, split, entry.deal, path, crc32, parts,
        {"shards": self._n[split], "gzip": self._codec.gzip,
         "framed": self._codec.framed,
         "shuffle": None if shuffle is None else [
             shuffle.seed, shuffle.buckets[split]]})
    yield from self._gather_parts(split, parts)

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
    memory (the FnApiRunner does, between stages). Returns (the part
    file, its CRC-32, [(shard, part)])."""
    assert self._parts_dir is not None  # (process() calls it only then)
    path = FileSystems.join(self._parts_dir, split,
                            f"batch-{uuid.uuid4().hex}.part")
    out, at = [], 0
    crc = 0
    with FileSystems.create(
        path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
      for shard, (key, how, data, count, size) in dealt:
        f.write(data)
        crc = isal_zlib.crc32(data, crc)
        out.append((shard, (key, how, Slice(path, at, len(data)), count,
                            size)))
        at += len(data)
    return path, crc, out

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
        spill = lambda data, s=shard: write_part(directory, s, data)
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
      return PART_FILE, write_part(FileSystems.join(self._parts_dir, split),
                                    shard, member), size
    return MEMBER, member, size


def deal_digest(num_shards: Dict[str, int], codec: Codec,
                level: Optional[int], shuffle: Optional[Shuffle],
                member_cap: int) -> str:
  """A digest of how WriteShards deals records into parts: the parts a
  unit store keeps are named by it (core.unit_cache)."""
  text = repr((sorted(num_shards.items()), codec.suffix, codec.gzip,
               codec.framed, level, shuffle, member_cap, MEMBER_BYTES,
               SPILL_BYTES))
  return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def kept_records(element: KeptParts) -> list:
  """The records of a reused batch's split (core.unit_cache.KeptParts)
  in their order, inflated and unframed from its kept parts."""
  assert element.how is not None, "kept parts without their deal"
  return undealt(element.split, element.order, [
      (shard, resolved((key, how, where._replace(path=element.path), count,
                        size)))
      for shard, (key, how, where, count, size) in element.parts],
                 element.how)


def undealt(split: str, order: tuple, parts: list,
            how: Dict[str, Any]) -> list:
  """The records of a batch's split in their order, got back from the
  parts another deal made of them ([(shard, part)], their bytes read:
  `resolved`; `how`: what _DealFn kept of that deal), for this build's
  deal to deal again (a unit kept before the shard count changed)."""
  lists: Dict[Tuple[int, Any], list] = {}
  for shard, (sort_key, kind, data, _, _) in parts:
    if kind != INLINE and how["gzip"]:
      data = inflate(data)
    lists[(shard, sort_key)] = unframe_records(data)
  n = how["shards"]
  total = sum(len(records) for records in lists.values())
  if how["shuffle"] is None:
    first = stable_hash(order) % n
    out: list = [None] * total
    for (shard, _), records in lists.items():
      out[(shard - first) % n::n] = records
    return out
  seed, buckets = how["shuffle"]
  rng = random.Random(stable_hash((seed, split, order)))
  taken = {k: iter(records) for k, records in lists.items()}
  return [next(taken[(rng.randrange(n), (rng.randrange(buckets), order))])
          for _ in range(total)]


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
    codec: TFRECORD_GZIP, TFRECORD_PLAIN, JSON_LINES (sinks.codec), or a
      format of its own's (sinks.format_files.codec_of).
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
    suffix = SHARDS.suffix_of(group[0].file)
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
              shard_name_template=SHARDS.beam,
              compression_type=CompressionTypes.GZIP)
          # final shard path
          | f"CountShard[{split}]" >> beam.Map(
              lambda path, s: _shard_info(path, s), split
          ).with_output_types(Any))
    return written | "Shards" >> beam.Flatten()

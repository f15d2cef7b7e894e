"""Deterministic sharded files: every byte is decided by the data.

Beam's `WriteToTFRecord` lets the runner decide which record lands in which
file and in what order (with a fixed `num_shards` it assigns records to
shards at random), so two runs of the same job give different files. Here:

* Elements are chunks `(key, [item])`: all records of one input batch (key:
  file, byte offset, batch number) or of one group (key: the group key).
  Keys are unique and compare the same on every run. One element may hold
  many chunks in key order (the groups of a bucket): see `sinks.runs`.
* A chunk's items are dealt round-robin over the shards, starting at a
  shard picked by a stable hash of the key, so shards fill evenly.
* Each shard's parts are sorted by key and written in that order: gzip
  TFRecord files whose bytes depend only on the input. Large parts are
  compressed where they are made, as finished gzip members (concatenated
  gzip members are one valid gzip file, read by tf.data and by Beam's
  ReadFromTFRecord), and written to a part file under the staging
  directory: the shuffle carries only its name, so no runner holds the data
  in memory and the shard's writer copies the part files in key order.
  Small parts (one sequence, one error line) travel inline and are
  compressed together by the shard's writer.
* Part files have unique names; a retried bundle writes new ones and the
  runner passes on only the names of the attempt that succeeded. They are
  removed with the staging directory when the dataset is published.
* Every TFRecord shard file exists, even an empty one (an empty gzip
  member), and a retried write writes the same bytes again. Empty errors/
  shards are not written.

    chunks | WriteShards(directory, {"train": 4, "eval": 1}, TFRECORD_GZIP)
    # -> a ShardWritten (split, file, records, bytes, ...) per file
"""

import hashlib
import itertools
import random
import re
import uuid
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import apache_beam as beam
import numpy as np
from isal import isal_zlib
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecords.sinks.parts import ShardWritten
from beam_tfrecords.sinks import runs
from beam_tfrecords.sinks.shard_files import (INLINE, JSON_LINES, MEMBER,
                                              PART_FILE, SHARD_SUFFIX,
                                              TFRECORD_GZIP, Codec,
                                              ShardFiles, gzip_member,
                                              open_part, read_part,
                                              rolled_name, shard_name,
                                              write_window)
from beam_tfrecords.records import (count_tfrecords, frame_records,
                                    unframe_records)

__all__ = ["WriteShards", "WriteWithBeamSink", "Codec", "Shuffle",
           "finish_shard_names", "rolled_name",
           "TFRECORD_GZIP",
           "JSON_LINES", "stable_hash", "shard_name", "SHARD_SUFFIX"]

# Parts at least this large are compressed before the shuffle.
MEMBER_BYTES = 64 * 1024
# Compressed parts (and uncompressed ones of codecs without gzip) at least
# this large go to part files (see above).
SPILL_BYTES = 256 * 1024
PARTS_DIR = ".parts"


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
  """

  def __init__(self, num_shards: Dict[str, int], codec: Codec,
               level: Optional[int], parts_dir: Optional[str] = None,
               shuffle: Optional["Shuffle"] = None):
    self._n = dict(num_shards)
    self._codec = codec
    self._level = level
    self._parts_dir = parts_dir
    self._shuffle = shuffle

  def _deal(self, split, key, items):
    """{(shard, sort key): [item]}: round-robin from a hashed start; when
    shuffling, each item to a random (seeded) shard and bucket."""
    n = self._n[split]
    parts: Dict[Tuple[int, Any], list] = {}
    if self._shuffle is None:
      first = stable_hash(key) % n
      for j, item in enumerate(items):
        parts.setdefault(((first + j) % n, key), []).append(item)
      return parts
    rng = random.Random(stable_hash((self._shuffle.seed, split, key)))
    m = self._shuffle.buckets[split]
    for item in items:
      shard, bucket = rng.randrange(n), rng.randrange(m)
      parts.setdefault((shard, (bucket, key)), []).append(item)
    return parts

  def _part(self, split, shard, key, part) -> tuple:
    data = self._codec.frame(part)
    how = INLINE
    if self._codec.gzip and len(data) >= MEMBER_BYTES:
      data, how = gzip_member(data, self._level), MEMBER
    size = len(data)
    if self._parts_dir is not None and size >= SPILL_BYTES and (
        how == MEMBER or not self._codec.gzip):
      path = _write_part(FileSystems.join(self._parts_dir, split), shard, data)
      return (key, PART_FILE, path, len(part), size)
    return (key, how, data, len(part), size)

  def process(self, chunk):
    split, key, items = chunk
    if hasattr(items, "chunks"):
      yield from self._deal_many(split, items)
      return
    if not items:
      return
    for (shard, key), part in self._deal(split, key, items).items():
      yield (split, shard), self._part(split, shard, key, part)

  def _deal_many(self, split, items):
    """Many chunks (sinks.runs): one run per shard."""
    if self._shuffle is not None or not self._codec.gzip or (
        self._codec.frame is not frame_records):
      by_shard: Dict[int, list] = {}
      for key, records in items.chunks():
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
      yield (split, shard), runs.pack(parts, _expected(parts.how, parts.size),
                                      spill, SPILL_BYTES)

  def _part_of_framed(self, split, shard, data: bytes) -> tuple:
    """(how, data, size) of framed bytes of at least MEMBER_BYTES, as
    `_part` makes them."""
    member = gzip_member(data, self._level)
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
               max_bytes: Optional[Dict[str, Optional[int]]] = None):
    self._directory = directory
    self._n = dict(num_shards)
    self._codec = codec
    self._level = level
    self._shuffle = shuffle
    self._max = dict(max_bytes or {})

  def _shuffled(self, seed, split, shard, parts):
    """One part per bucket: the bucket's records (from every chunk) in a
    seeded random order, as one gzip member. Memory: one bucket."""
    for bucket, group in itertools.groupby(parts, key=lambda p: p[0][0]):
      records = []
      for _, how, data, _, _ in group:
        if how == PART_FILE:
          data = read_part(data)
        if how != INLINE:
          data = isal_zlib.decompress(data, wbits=31)
        records.extend(unframe_records(data))
      random.Random(stable_hash((seed, split, shard, bucket))
                    ).shuffle(records)
      data = gzip_member(frame_records(records), self._level)
      yield ((bucket,), MEMBER, data, len(records), len(data))

  def process(self, element):
    (split, shard), parts = element
    parts = [p for p in parts if p is not None]
    limit = self._max.get(split) if self._codec.gzip else None
    expected = _expected([p[1] for p in parts],
                         [p[4] for p in parts]) if limit else 0
    out = ShardFiles(self._directory, split, shard, self._n[split],
                      self._codec, self._level, limit, expected)
    if self._shuffle is None and self._codec.gzip:
      for window in runs.windows(parts, open_part):
        write_window(out, window)
      yield from out.close()
      return
    parts = runs.in_key_order(parts, open_part)
    if self._shuffle is not None and self._codec.gzip:
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
  """Writes chunks (split, key, [item]) as deterministic files, for each
  split `num_shards[split]` shards (every one is written, even empty).

  A split with a `max_bytes` limit gets files of at most that many bytes:
  a shard that outgrows it continues in further files, staged as
  `<shard name>-roll0001<suffix>`, ...; `finish_shard_names` (run by
  Commit) renames them all to `<split>-i-of-total`.

  Args:
    directory: where the files go: DIR/<split>-00000-of-00004<suffix>.
    num_shards: split name -> number of shards.
    codec: TFRECORD_GZIP or JSON_LINES.
    gzip_level: None for ISA-L's fast level, or a zlib level 1-9.
    shuffle: a seeded Shuffle, or None for key order.
    max_bytes: split name -> the largest file size, or None for no limit
      (gzip codecs only).

  Outputs a sinks.parts.ShardWritten per file.
  """

  def __init__(self, directory: str, num_shards: Dict[str, int],
               codec: Codec = TFRECORD_GZIP,
               gzip_level: Optional[int] = None,
               shuffle: Optional["Shuffle"] = None,
               max_bytes: Optional[Dict[str, Optional[int]]] = None):
    super().__init__()
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

  def expand(self, chunks):
    parts_dir = FileSystems.join(self._directory, PARTS_DIR)
    dealt = (chunks
             # (split, key, [item])
             | "Deal" >> beam.ParDo(_DealFn(self._n, self._codec, self._level,
                                            parts_dir, self._shuffle)
                                    ).with_output_types(Any))
             # ((split, shard), (key, how, data, count, size))
    every = (chunks.pipeline
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
                self._shuffle, self._max)).with_output_types(Any))
            # ShardWritten


def finish_shard_names(directory: str, files: List[ShardWritten]
                       ) -> List[ShardWritten]:
  """Final names for the files of WriteShards: a split whose shards all
  stayed within one file keeps its names; a split where some continued in
  further files gets `<split>-i-of-total` in (shard, roll) order. The
  staged files are renamed in one call per split, after one listing: on
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
    olds, news = [], []
    for i, f in enumerate(group):
      final = shard_name(split, i, total, suffix)
      if f.file != final and (f.file in present or final not in present):
        olds.append(FileSystems.join(directory, f.file))
        news.append(FileSystems.join(directory, final))
      out.append(f._replace(file=final))
    if olds:
      FileSystems.rename(olds, news)
  return out


def _shard_info(path: str, split: str) -> ShardWritten:
  size = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
  return ShardWritten(split, path.rsplit("/", 1)[-1], count_tfrecords(path),
                      size)


def _records_of(chunk, split):
  return chunk[2] if chunk[0] == split else ()


class WriteWithBeamSink(beam.PTransform):
  """The same chunks written by Beam's own `WriteToTFRecord` (--sink beam).

  The files have the same format and names, but the runner decides which
  record goes to which shard and in what order: not byte-identical between
  runs, and one Beam element per record (slower). For users who want
  Beam's sink; the default is `WriteShards`.
  """

  def __init__(self, directory: str, num_shards: Dict[str, int]):
    super().__init__()
    self._directory = directory
    self._n = dict(num_shards)

  def expand(self, chunks):
    splits = sorted(self._n)
    written = []
    for split in splits:
      written.append(
          chunks
          # (split, key, [record]); not beam.Partition: a multi-output
          # ParDo (see runner_gaps)
          | f"Records[{split}]" >> beam.FlatMap(_records_of, split)
          # bytes
          | f"Write[{split}]" >> beam.io.WriteToTFRecord(
              FileSystems.join(self._directory, split),
              file_name_suffix=SHARD_SUFFIX, num_shards=self._n[split],
              shard_name_template="-SSSSS-of-NNNNN",
              compression_type=CompressionTypes.GZIP)
          # final shard path
          | f"CountShard[{split}]" >> beam.Map(_shard_info, split))
    return written | "Shards" >> beam.Flatten()

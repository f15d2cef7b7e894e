"""Grouped SequenceExamples in Beam: batches -> steps by bucket -> records.

    batches | EncodeGroupedSequences(schema)

1. **EncodeSteps**, per input batch, vectorized: every row becomes a step
   (`encoding.steps.StepEncoder.encode_table`), and every step goes to one
   of `buckets` buckets by a hash of its group key. Successive batches of
   one source file are gathered up to FLUSH_BYTES of steps; then one
   element per (split, bucket) of them: the bucket's steps as compressed
   Arrow IPC bytes (or, for a local output, where they are in a file
   written under the staging folder), plus, under `on_bad_step:
   reject_group`, the rows of the bucket's keys that went to errors/.
2. **GroupSteps**: GroupByKey on (split, bucket). Elements are gatherings
   x buckets (at most MAX_BUCKETS each), not one per row, per group or
   per batch: each parcel (one gathering's steps of one bucket) costs
   about a millisecond (its IPC stream, its element, its read), and one
   per batch x bucket made a 40M-row build spend 190k of them (1.7x the
   time per row of a 10M-row one).
3. **Assemble**, per bucket: `encoding.groups.GroupAssembler` orders the
   bucket's steps with one Arrow sort and writes every group's records at
   once; one element `(split, ("bucket", b, pass), GroupedRecords)`. The
   deterministic sink deals its groups to shards at once and merges the
   buckets back into key order (`sinks.runs`), so the files are the same
   bytes as when each group was its own element.

Resume and reuse (core.unit_cache): where units are kept, a gathering
holds one read unit's batches, and a kept unit keeps the parcels its
steps became (with its dead letters, counts and statistics partials;
parcels spilled to a file are kept as a link to that file and their
places in it, not copied into the store); a
reused unit's parcels go to the GroupByKey as they were made (made for
another bucket count, their steps are put in buckets again). A bucket
whose steps all came from kept units keeps its assembly under a key of
those units' keys and the bucket count: a build reuses it when no new or
changed unit has steps in it.

Memory: up to FLUSH_BYTES of steps per split while gathering, a
bucket's steps (compressed) while the runner groups them, and one bucket
at a time per worker thread while assembling. The number of
buckets grows with the input (`buckets_for`), so a bucket stays about
`BUCKET_BYTES` of input; a bucket that skewed keys make larger than
`ASSEMBLY_BYTES` is assembled in passes, and a single group larger than
that is refused with its size (`encoding.passes`).
"""

import uuid
from typing import Any, Dict, List, NamedTuple, Optional

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.transforms.window import GlobalWindows
from isal import isal_zlib

from beam_tfrecords.core import fs
from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.unit_cache import UnitRead, UnitStore, unit_key
from beam_tfrecords.encoding.groups import GroupAssembler
from beam_tfrecords.encoding.passes import plan_passes, step_bytes
from beam_tfrecords.encoding.steps import StepEncoder, key_hash, keys_hash
from beam_tfrecords.schema import Schema, schema_from_dict
from beam_tfrecords.schema.model import OnBadStep
from beam_tfrecords.sinks.part_files import SPILL_BYTES
from beam_tfrecords.sinks.shards import stable_hash
from beam_tfrecords.sources import SourceBatch
from beam_tfrecords.transforms.batch_fn import (ERRORS, FEATURE_STATS, STATS,
                                                UNITS, Output, SchemaFn,
                                                by_split, stats, take,
                                                unit_counted)
from beam_tfrecords.transforms.dead_letters import remapped, row_errors
from beam_tfrecords.transforms.inputs import KeptBatch
from beam_tfrecords.runners.gaps import par_do, separates_outputs, threads_for

__all__ = ["EncodeGroupedSequences", "buckets_for", "BUCKET_BYTES",
           "DEFAULT_BUCKETS", "ASSEMBLY_BYTES"]

# Input bytes per bucket that buckets_for aims at, and its bounds. Buckets
# are what the assembly is spread over (workers x threads) and what one
# assembly holds in memory.
BUCKET_BYTES = 8 << 20
# At most MAX_BUCKETS: every batch writes one parcel per bucket, so parcels
# grow with batches x buckets; past that, larger buckets are assembled in
# passes.
MIN_BUCKETS, MAX_BUCKETS = 16, 256
# When the input's size is not known (a PCollection).
DEFAULT_BUCKETS = 64
# Bytes of steps (encoding.passes.table_bytes) one assembly sorts at once
# (its peak memory is about 3 times that); a bucket with more is
# assembled in passes, and a group with more is refused.
ASSEMBLY_BYTES = 256 << 20
# Steps (encoding.passes.table_bytes) of successive batches of a source
# file that EncodeSteps gathers before it sends them to their buckets.
FLUSH_BYTES = 32 << 20
# Arrow IPC compression of the steps on their way to the GroupByKey:
# measured on the events benchmark, LZ4 halves them at ~1 GB/s. In the
# calling thread, not on Arrow's pool: the encoding and assembly threads
# are already one per core, and handing each buffer to the pool cost
# 0.3-0.6 s of system time on 1M flight rows (futex waits; the same
# bytes).
_IPC = pa.ipc.IpcWriteOptions(compression="lz4", use_threads=False)
_IPC_READ = pa.ipc.IpcReadOptions(use_threads=False)


def buckets_for(input_bytes: Optional[int]) -> int:
  """How many buckets for an input of this many bytes (a power of 2)."""
  if not input_bytes:
    return DEFAULT_BUCKETS
  want = max(1, -(-input_bytes // BUCKET_BYTES))
  return int(min(MAX_BUCKETS, max(MIN_BUCKETS, 1 << (want - 1).bit_length())))


def _ipc_bytes(table: pa.Table) -> bytes:
  sink = pa.BufferOutputStream()
  with pa.ipc.new_stream(sink, table.schema, options=_IPC) as writer:
    writer.write_table(table)
  return sink.getvalue().to_pybytes()


def _ipc_table(data: bytes) -> pa.Table:
  return pa.ipc.open_stream(data, options=_IPC_READ).read_all()


class _Steps(NamedTuple):
  """A batch's steps of one split, ordered by bucket: bucket b's are rows
  bounds[b]:bounds[b + 1] of `table`."""
  split: str
  path: str
  table: pa.Table
  bounds: np.ndarray
  sizes: np.ndarray  # table_bytes of each bucket's steps
  bad: Dict[int, List[tuple]]
  unit: Optional[str] = None  # the key of its read unit, where kept


class _Gathered:
  """The _Steps of successive batches of one source file (and read unit,
  where units are kept) and split."""

  def __init__(self, split: str, path: str, unit: Optional[str]):
    self.split, self.path, self.unit = split, path, unit
    self.steps: List[_Steps] = []
    self.bytes = 0

  def add(self, steps: _Steps) -> None:
    self.steps.append(steps)
    self.bytes += int(steps.sizes.sum())


class _Seen(NamedTuple):
  """A batch of the kept read unit `key` was encoded (and its results
  besides steps kept)."""
  key: str


class _KeptParcels(NamedTuple):
  """What a kept read unit's steps became: the bucket count, and
  [(split, source path, bucket, steps, bad, bytes)]; steps: IPC bytes, or
  (n, offset, length): their place in the unit's n-th kept file (the
  spill files they were written to, kept with the unit, not copied into
  it)."""
  buckets: int
  parcels: list


@beam.typehints.with_input_types(SourceBatch)
class _EncodeStepsFn(SchemaFn):
  """Batches -> ((split, bucket), (source path, steps as IPC bytes or
  their place in a file, bad, bytes, read units)) per bucket with steps
  or bad rows in a gathering: successive batches of one source file (and
  read unit, where units are kept), up to FLUSH_BYTES of steps (bytes:
  encoding.passes.table_bytes of the steps); read units: the keys of the
  kept read units the steps came from (None: not kept).

  `bad` lists, under on_bad_step: reject_group, (key, first row number,
  its reason, rows) of the bucket's keys with rows in errors/ (a group's
  rows all go to one split: the split rule reads only group_by columns).
  Outputs: main: the buckets' steps; ERRORS; STATS; FEATURE_STATS;
  UNITS (when units are kept).
  Counters: as EncodeRows'.

  A batch of a kept read unit (core.unit_cache) keeps what it gave
  besides steps; when the unit's end (UnitRead) comes, after its
  batches, the parcels its steps became are kept as the unit's last
  entry, and the unit is marked complete. (Only when every batch of the
  unit was seen in this bundle, and none of its parcels left before:
  else it is not marked, and is read again next time.) A reused unit
  gives its parcels back as they were made, or, made for another bucket
  count, put in buckets again.
  """

  _encoder: StepEncoder

  def __init__(self, schema_dict: Dict[str, Any], buckets: int,
               spill_dir: Optional[str] = None,
               threads: Optional[int] = None, statistics: bool = True,
               gather: bool = True):
    super().__init__(schema_dict, threads=threads, statistics=statistics,
                     bundle_stats=gather)
    self._buckets = buckets
    self._spill_dir = spill_dir
    # False where the runner drops what finish_bundle emits (runners.gaps):
    # each batch's steps go on at once.
    self._gather = gather

  def _build(self, schema):
    return StepEncoder(schema)

  def start_bundle(self):
    super().start_bundle()
    self._gathered: Dict[str, _Gathered] = {}
    # Kept read units of this bundle: batches seen, parcels made.
    self._seen: Dict[str, int] = {}
    self._kept: Dict[str, list] = {}
    self._kept_files: Dict[str, List[tuple]] = {}  # [(spill file, CRC-32)]

  def _emit(self, result, window, timestamp):
    """The outputs of a batch, with its steps gathered; those of a
    gathering they end (a new source file or unit, or FLUSH_BYTES
    reached)."""
    outputs = []
    for out in super()._emit(result, window, timestamp):
      if isinstance(out, _Seen):
        self._seen[out.key] = self._seen.get(out.key, 0) + 1
      elif isinstance(out, UnitRead):  # (in order: after its batches)
        outputs += self._unit_read(out)
      elif not isinstance(out, _Steps):
        outputs.append(out)
      else:
        held = self._gathered.get(out.split)
        if held is not None and (held.path, held.unit) != (out.path,
                                                           out.unit):
          outputs += self._flush(self._gathered.pop(out.split))
          held = None
        if held is None:
          held = self._gathered[out.split] = _Gathered(out.split, out.path,
                                                       out.unit)
        held.add(out)
        if held.bytes >= FLUSH_BYTES or not self._gather:
          outputs += self._flush(self._gathered.pop(out.split))
    return outputs

  def _unit_read(self, end: UnitRead) -> list:
    """The last parcels of a kept unit; the unit's parcels kept and the
    unit marked complete."""
    outputs = []
    for split in sorted(self._gathered):
      if self._gathered[split].unit == end.key:
        outputs += self._flush(self._gathered.pop(split))
    parcels = self._kept.pop(end.key, [])
    files = self._kept_files.pop(end.key, [])
    if self._seen.pop(end.key, 0) == end.batches:
      store = UnitStore(end.root)
      if files and not fs.is_local(end.root):  # (its bytes go in the store)
        parcels = [p[:3] + (_read(p[3]),) + p[4:] for p in parcels]
        files = []
      number = {path: n for n, (path, _) in enumerate(files)}
      parcels = _refiled(parcels, number.__getitem__)
      if store.put(end.key, end.batches, _KeptParcels(self._buckets,
                                                      parcels), files=files):
        store.complete(end.key, end.batches + 1, end.about)
    return outputs

  def finish_bundle(self):
    yield from super().finish_bundle()
    for split in sorted(self._gathered):
      for out in self._flush(self._gathered.pop(split)):
        yield GlobalWindows.windowed_value(out)
    # (Units whose end did not come in this bundle are not marked.)
    self._seen.clear()
    self._kept.clear()
    self._kept_files.clear()

  def _flush(self, held: _Gathered) -> list:
    """One parcel per bucket with steps or bad rows in the gathering."""
    parcels, sizes, bad = [], {}, {}
    for b in range(self._buckets):
      pieces = [s.table.slice(int(s.bounds[b]),
                              int(s.bounds[b + 1] - s.bounds[b]))
                for s in held.steps]
      marks = [m for s in held.steps for m in s.bad.get(b, ())]
      rows = sum(len(p) for p in pieces)
      if rows or marks:
        parcels.append((b, _ipc_bytes(pa.concat_tables(pieces))))
        sizes[b] = int(sum(s.sizes[b] for s in held.steps))
        if marks:
          bad[b] = marks
    parcels, spill = self._spill(parcels)
    if held.unit is not None:
      self._kept.setdefault(held.unit, []).extend(
          (held.split, held.path, b, data, bad.get(b, []), sizes[b])
          for b, data in parcels)
      if spill is not None:  # (kept with the unit: linked, not copied)
        self._kept_files.setdefault(held.unit, []).append(spill)
    return self._parcels(held.split, held.path, parcels, bad, sizes,
                         held.unit)

  def _spill(self, parcels: List[tuple]) -> tuple:
    """[(bucket, IPC bytes)] written to a spill file where they are large:
    ([(bucket, IPC bytes or their place)], (the file, its CRC-32) or
    None)."""
    size = sum(len(data) for _, data in parcels if isinstance(data, bytes))
    if self._spill_dir is None or not size or size < SPILL_BYTES:
      return parcels, None
    return _spilled(self._spill_dir, parcels)

  def _parcels(self, split, path, parcels, bad, sizes, unit) -> list:
    """The GroupByKey's elements of [(bucket, IPC bytes or their place)]
    of a split."""
    units = None if unit is None else (unit,)
    return [((split, b), (path, data, bad.get(b, []), sizes[b], units))
            for b, data in parcels]

  def _work(self, batch):
    if isinstance(batch, UnitRead):
      return [batch], stats(), []
    if isinstance(batch, KeptBatch):
      return self._reused(batch)
    entry = batch.unit_entry
    outputs, counts, errors = self._encoded(
        batch, None if entry is None else entry.key)
    if entry is not None:
      tagged = [o for o in outputs if isinstance(o, beam.pvalue.TaggedOutput)]
      UnitStore(entry.root).put(entry.key, entry.number,
                                (tagged, counts, errors))
      outputs += [_Seen(entry.key)] + unit_counted(entry.first, False)
    return outputs, counts, errors

  def _reused(self, batch: KeptBatch):
    """A reused unit's batch: what it gave besides steps; its last entry,
    its parcels (put in buckets again if made for another count)."""
    kept, key = batch.kept.result, batch.entry.key
    if not isinstance(kept, _KeptParcels):
      tagged, counts, errors = kept
      return (list(tagged) + unit_counted(batch.entry.first, True), counts,
              errors)
    placed = _refiled(kept.parcels, batch.kept.files.__getitem__)
    if kept.buckets != self._buckets:
      return self._rebucketed(placed, key), stats(), []
    outputs = []
    by: Dict[tuple, list] = {}
    for split, path, b, data, bad, size in placed:
      by.setdefault((split, path), []).append((b, data, bad, size))
    for (split, path), parcels in by.items():
      outputs += self._parcels(
          split, path, self._spill([(b, data)
                                    for b, data, _, _ in parcels])[0],
          {b: bad for b, _, bad, _ in parcels if bad},
          {b: size for b, _, _, size in parcels}, key)
    return outputs, stats(), []

  def _rebucketed(self, parcels: list, key: str) -> List[_Steps]:
    """Kept parcels of another bucket count, as steps in this count's
    buckets (their bad keys too)."""
    by: Dict[tuple, tuple] = {}
    for split, path, _, data, bad, _ in parcels:
      tables, marks = by.setdefault((split, path), ([], []))
      tables.append(_ipc_table(_read(data)))
      marks.extend(bad)
    out = []
    for (split, path), (tables, marks) in by.items():
      steps = self._by_bucket(split, path, pa.concat_tables(tables), {}, key,
                              None)
      if marks:
        hashes = keys_hash([m[0] for m in marks], steps.table) % np.uint64(
            self._buckets)
        for mark, h in zip(marks, hashes.tolist()):
          steps.bad.setdefault(int(h), []).append(mark)
      out.append(steps)
    return out

  def _encoded(self, batch: SourceBatch, unit: Optional[str]):
    """(outputs, counts, dead letters) of a batch; its steps tagged with
    their read unit's `unit` key where it is kept."""
    splits, found = by_split(self._splits, batch)
    marks = self._encoder.schema.on_bad_step is OnBadStep.REJECT_GROUP
    known = None
    outputs: List[Output] = []
    described = {}
    for split, index in splits:
      known = batch.known_row_numbers() if known is None else known
      if index is None:
        steps = self._encoder.encode_table(
            batch.columns, batch.num_rows, known, stats=self._statistics,
            drop=False)
      else:
        steps = self._encoder.encode_table(
            take(batch.columns, index), len(index),
            [known[i] for i in index.tolist()], stats=self._statistics,
            drop=False)
      bad = _bad_rows(batch, steps, index) if marks else {}
      outputs.append(self._by_bucket(split, batch.path, steps.table, bad,
                                     unit, steps.good))
      found += remapped(steps.errors, index)
      if steps.stats is not None:
        described[split] = steps.stats
    errors = row_errors(batch, found)
    if errors:
      outputs.append(beam.pvalue.TaggedOutput(ERRORS, (batch.order, errors)))
    if described:
      outputs.append(beam.pvalue.TaggedOutput(FEATURE_STATS, described))
    counts = stats(rows_read=batch.num_rows + len(batch.errors),
                   rows_rejected=len(errors))
    outputs.append(beam.pvalue.TaggedOutput(STATS, counts))
    return outputs, counts, errors

  def _by_bucket(self, split, path, table: pa.Table, bad_rows,
                 unit: Optional[str], good: Optional[np.ndarray]) -> _Steps:
    """The batch's steps ordered by bucket (in the worker's threads), and
    its bad rows' keys (`_bad_rows`) by bucket. `good`: which rows of
    `table` are steps (None: all); the others are left out in the same
    copy (one take, not a filter and a take)."""
    bucket = (key_hash(table) % np.uint64(self._buckets)).astype(np.int64)
    if good is not None:
      bucket[~good] = self._buckets  # after every bucket: cut off below
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(self._buckets + 1))
    ordered = table.take(pa.array(order[:bounds[-1]]))
    total = np.concatenate([[0], np.cumsum(step_bytes(ordered))])
    sizes = total[bounds[1:]] - total[bounds[:-1]]
    bad = _bad_by_bucket(bad_rows, table, self._buckets) if bad_rows else {}
    return _Steps(split, path, ordered, bounds, sizes, bad, unit)


def _spilled(directory: str, parcels: List[tuple]) -> tuple:
  """The parcels' bytes written to one file; each parcel's data becomes
  its place (path, offset, length) (data already placed stays so). Returns
  (the parcels, (the file, its CRC-32))."""
  path = FileSystems.join(directory, f"{uuid.uuid4().hex}.steps")
  out, offset, crc = [], 0, 0
  with FileSystems.create(path, compression_type=(
      CompressionTypes.UNCOMPRESSED)) as f:
    for b, data in parcels:
      if not isinstance(data, bytes):
        out.append((b, data))
        continue
      f.write(data)
      crc = isal_zlib.crc32(data, crc)
      out.append((b, (path, offset, len(data))))
      offset += len(data)
  return out, (path, crc)


def _refiled(parcels: list, file_of) -> list:
  """Kept parcels [(split, path, bucket, steps, bad, bytes)] with the file
  of each place (steps not bytes: (file, offset, length)) replaced by
  file_of(it): a spill file's path <-> its number among the unit's kept
  files."""
  return [p[:3] + (p[3] if isinstance(p[3], bytes) else (
      file_of(p[3][0]),) + tuple(p[3][1:]),) + p[4:] for p in parcels]


def _read(data) -> bytes:
  """A parcel's bytes, from where _spilled put it."""
  if isinstance(data, bytes):
    return data
  path, offset, length = data
  with FileSystems.open(path, compression_type=(
      CompressionTypes.UNCOMPRESSED)) as f:
    f.seek(offset)
    return f.read(length)


def _tables(parcels):
  """(path, steps table) of a bucket's parcels, read one at a time."""
  return ((path, _ipc_table(_read(data)))
          for path, data, _, _, _ in parcels)


def _bad_rows(batch: SourceBatch, steps, index) -> Dict[tuple, list]:
  """key -> [(row number, reason)] of a batch's rows that could not
  become steps of their (known) group."""
  rows: Dict[tuple, list] = {}
  for key, row, reason in steps.bad:
    number = batch.row_number(row if index is None else int(index[row]))
    rows.setdefault(key, []).append((number, reason))
  return rows


def _bad_by_bucket(rows: Dict[tuple, list], table: pa.Table, buckets: int
                   ) -> Dict[int, List[tuple]]:
  """bucket -> [(key, first row number, its reason, rows)] of `_bad_rows`
  (`table`: the steps, for the key columns' types)."""
  keys = list(rows)
  hashes = keys_hash(keys, table) % np.uint64(buckets)
  out: Dict[int, List[tuple]] = {}
  for key, h in zip(keys, hashes.tolist()):
    found = rows[key]
    first = min(found, key=lambda r: (r[0] is None, r[0] or 0, r[1]))
    out.setdefault(int(h), []).append((key,) + first + (len(found),))
  return out


class _Assembled(NamedTuple):
  """After a kept bucket's last pass: the bucket is complete in the unit
  store (core.unit_cache) under `key`, with this many passes."""
  key: str
  passes: int
  about: Dict[str, Any]


class _AssembleFn(SchemaFn):
  """((split, bucket), [(path, steps, bad, bytes, read units)]) ->
  (split, ("bucket", b, pass), GroupedRecords): every group of the bucket
  (of one pass).

  Outputs: main: the records; ERRORS: ((file, -1, -1), [dead-letter
  dict]) per rejected or truncated group; STATS.

  With a unit store (`units`), a bucket whose steps all came from kept
  read units is kept there too, under a key made of those units' keys
  (which name their content, the schema and the options) and the number
  of buckets: a later build whose bucket gets steps from the same units
  reuses its assembly, and only buckets a new or changed unit touches are
  assembled again. Counter: buckets_reused.
  """

  _encoder: GroupAssembler

  def __init__(self, schema_dict: Dict[str, Any],
               threads: Optional[int] = None, buckets: int = 0,
               units: Optional[str] = None):
    super().__init__(schema_dict, threads=threads)
    self._columns = [c for c, _ in schema_from_dict(schema_dict).group_by]
    self._buckets = buckets
    self._units = units
    self._reused = beam.metrics.Metrics.counter("beam_tfrecords",
                                                "buckets_reused")

  def _key(self, split: str, bucket: int, parcels: list) -> Optional[str]:
    """The bucket's key in the unit store, or None: not kept."""
    units = [p[4] for p in parcels]
    if self._units is None or any(u is None for u in units):
      return None
    return unit_key({"assembly": [split, bucket, self._buckets],
                     "units": sorted({k for u in units for k in u})})

  def _emit(self, result, window, timestamp):
    outputs = []
    for out in super()._emit(result, window, timestamp):
      if isinstance(out, _Assembled):  # (in order: every pass was kept)
        assert self._units is not None
        UnitStore(self._units).complete(out.key, out.passes, out.about)
      else:
        outputs.append(out)
    return outputs

  def _build(self, schema):
    return GroupAssembler(schema)

  def _elements(self, element) -> list:
    """The bucket's pieces of work: itself, or one per pass when it is
    larger than one assembly. The grouped values are read here, in the
    DoFn's own thread: runners that page them in through the state API
    serve that thread only."""
    (split, bucket), parcels = element
    parcels = list(parcels)
    key = self._key(split, bucket, parcels)
    if key is not None:
      assert self._units is not None
      kept = UnitStore(self._units).load(key)
      if kept is not None:
        self._reused.inc()
        return [_KeptPass(k.result, i == 0) for i, k in enumerate(kept)]
    if sum(b[3] for b in parcels) <= ASSEMBLY_BYTES:
      return [(split, bucket, parcels, None, 0, key)]
    # A bucket too large for one assembly (skewed keys).
    plan = plan_passes(lambda: _tables(parcels), ASSEMBLY_BYTES)
    return [(split, bucket, parcels, plan, i, key)
            for i in range(plan.passes)]

  def _work(self, piece):
    if isinstance(piece, _KeptPass):
      outputs, counts, errors = piece.result
      return list(outputs) + self._counted(piece.first, True), counts, errors
    split, bucket, parcels, plan, index, key = piece
    outputs, counts, errors = self._assembled(split, bucket, parcels, plan,
                                              index)
    if key is not None:
      assert self._units is not None
      passes = 1 if plan is None else plan.passes
      if UnitStore(self._units).put(key, index, (outputs, counts, errors)) \
          and index == passes - 1:
        outputs = outputs + [_Assembled(key, passes, {
            "split": split, "bucket": bucket, "buckets": self._buckets})]
    return outputs + self._counted(index == 0, False), counts, errors

  def _counted(self, first: bool, reused: bool) -> List[Output]:
    """UNITS: a bucket, reused or not (once: with its first pass)."""
    return [beam.pvalue.TaggedOutput(UNITS, (0, 0, 1, int(reused)))] \
        if first and self._units is not None else []

  def _assembled(self, split, bucket, parcels, plan, index):
    """One pass of a bucket assembled: (outputs, counts, dead letters)."""
    bad: Dict[tuple, list] = {}
    for path, _, marks, _, _ in parcels:
      for key, number, reason, count in marks:
        bad.setdefault(key, []).append((path, number, reason, count))
    tables = list(_tables(parcels))
    if plan is not None:
      tables = [(path, plan.select(t, index)) for path, t in tables]
    result = self._encoder.assemble(tables, bad)
    outputs: List[Output] = []
    errors: List[dict] = []
    if len(result):
      # The sink's shard of each group, here in the worker's threads.
      result.hashes = np.fromiter(map(stable_hash, result.keys),
                                  dtype=np.uint64, count=len(result))
      outputs.append((split, ("bucket", bucket, index), result))
    rejected = dropped = 0
    for key, e in result.errors:
      if e.dropped:
        dropped += e.rows
      else:
        rejected += e.rows
      errors.append(self._error(key, e.rows, e.reason, e.dropped,
                                e.examples))
    for r in plan.refused if plan is not None and index == 0 else ():
      rejected += r.rows
      errors.append(self._error(
          r.key, r.rows, f"the group has {r.rows:,} rows (about {r.size:,} "
          "bytes of steps), more than one worker assembles at once "
          f"({ASSEMBLY_BYTES:,} bytes), so it is not written; leave such "
          "keys out, or group by a finer key", False, r.examples))
    for error in errors:
      # Keyed like a batch's errors; (file, -1, -1) sorts before its rows.
      outputs.append(beam.pvalue.TaggedOutput(
          ERRORS, ((error["source"] or "", -1, -1), [error])))
    written = result.rows_written
    counts = stats(rows_written=written, rows_rejected=rejected,
                   rows_dropped=dropped, records=len(result.steps),
                   steps=written, steps_dropped=dropped)
    outputs.append(beam.pvalue.TaggedOutput(STATS, counts))
    return outputs, counts, errors

  def _error(self, key, rows, reason, dropped, examples) -> dict:
    return {"source": examples[0][0] if examples else None, "row": None,
            "rows": rows, "group": dict(zip(self._columns, key)),
            "kind": "dropped" if dropped else "rejected",
            "reason": reason, "problems": [], "raw": None,
            "examples": [{"source": s, "row": r} for s, r in examples]}


class _KeptPass(NamedTuple):
  """A pass of a reused bucket: (outputs, counts, dead letters) as kept;
  whether it is the bucket's first."""
  result: tuple
  first: bool


class EncodeGroupedSequences(beam.PTransform):
  """Groups rows by the schema's group_by key into SequenceExamples.

  Returns {"records", "errors", "stats", FEATURE_STATS} like `Encode`;
  "records" holds one batch per bucket, (split, ("bucket", b),
  GroupedRecords), whose items are its groups' records in key order.

  Args:
    schema: a SequenceExample schema with group_by.
    statistics: whether to describe the features (FEATURE_STATS).
    buckets: how many buckets the steps are spread over (see
      `buckets_for`; None: DEFAULT_BUCKETS); the output does not depend
      on it.
    spill_dir: where a batch's steps are written when they are at least
      SPILL_BYTES, so that only their place goes through the GroupByKey
      (the DirectRunner holds what it groups in memory, about 3 times);
      None: they travel in the elements (a cluster's shuffle is made for
      that, and reading small ranges of objects in a bucket store is not).
    units: the unit store (core.unit_cache) where batches may come from
      kept or reused read units (then counted in a UNITS output), and
      where buckets are kept and reused (see _AssembleFn); None: none.
  """

  def __init__(self, schema: Schema, statistics: bool = True,
               buckets: Optional[int] = None,
               spill_dir: Optional[str] = None,
               units: Optional[str] = None):
    super().__init__()
    self._schema = schema
    self._statistics = statistics
    self._buckets = buckets or DEFAULT_BUCKETS
    self._spill_dir = spill_dir
    self._units = units

  def expand(self, batches):
    schema_dict = self._schema.to_dict()
    threads = threads_for(batches.pipeline)
    steps = par_do(batches, "EncodeSteps", _EncodeStepsFn(
        schema_dict, self._buckets, self._spill_dir, threads=threads,
        statistics=self._statistics,
        gather=separates_outputs(batches.pipeline)),
                   (ERRORS, STATS, FEATURE_STATS)
                   + ((UNITS,) if self._units else ()), main="steps")
    grouped = (steps["steps"]
               # ((split, bucket), (path, steps, bad, bytes, units))
               | "GroupSteps" >> beam.GroupByKey())
               # ((split, bucket), [(path, steps, bad, bytes, units), ...])
    assembled = par_do(grouped, "Assemble", _AssembleFn(
        schema_dict, threads=threads, buckets=self._buckets,
        units=self._units), (ERRORS, STATS)
                       + ((UNITS,) if self._units else ()), main="records")
    out = {
        "records": assembled["records"],
        "errors": (steps[ERRORS], assembled[ERRORS])
                  | "Errors" >> beam.Flatten(),
        "stats": (steps[STATS], assembled[STATS]) | "Stats" >> beam.Flatten(),
        FEATURE_STATS: steps[FEATURE_STATS],
    }
    if self._units:
      out[UNITS] = (steps[UNITS], assembled[UNITS]) | "Units" >> beam.Flatten()
    return out

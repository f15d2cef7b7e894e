"""ReadInputs: read units -> SourceBatches, spread over the workers."""

import collections
from typing import (Any, Callable, Dict, List, NamedTuple, Optional,
                    Sequence, Tuple)

import apache_beam as beam

from beam_tfrecords.core.unit_cache import (Keeping, KeptBatchResults,
                                            UnitEntry, UnitRead, UnitStore)
from beam_tfrecords.runners.progress import tally
from beam_tfrecords.sources import ReadUnit, read_unit
from beam_tfrecords.sources.preprocess import (Preprocess, Versions,
                                               check_versions)
from beam_tfrecords.sources.tfrecord import unwrap_scalars

__all__ = ["ReadInputs", "unit_bytes", "KeptBatch"]


class KeptBatch(NamedTuple):
  """A batch of a reused unit, as kept (core.unit_cache): what encoding
  it gave besides records (transforms.encode's (outputs, counts, dead
  letters)) and its records' dealt parts of each split, passed on by
  Encode as they are."""
  order: tuple
  kept: KeptBatchResults
  entry: UnitEntry


def unit_bytes(units: Sequence[ReadUnit],
               files: Sequence[Tuple[str, int]]) -> List[int]:
  """About how many input bytes each unit reads (for progress): its byte
  range, else an even share of the bytes of its file or folder (Parquet
  row groups, image folders, whole files)."""
  sizes: Dict[str, int] = collections.Counter()
  shares: Dict[str, int] = collections.Counter()
  ranged = [u.end is not None and u.format not in ("parquet", "images")
            for u in units]
  for u, r in zip(units, ranged):
    if not r:
      shares[u.path] += 1
  roots = set(shares)
  for path, size in files:
    if path in roots:
      sizes[path] += size
      continue
    for root in roots:  # files inside an image folder
      if path.startswith(root.rstrip("/") + "/"):
        sizes[root] += size
  return [u.end - u.start if r and u.end is not None
          else sizes[u.path] // shares[u.path]
          for u, r in zip(units, ranged)]


@beam.typehints.with_input_types(Tuple[ReadUnit, int, Optional[str]])
@beam.typehints.with_output_types(Any)
class _ReadUnitFn(beam.DoFn):
  """Reads one unit (and runs the user's preprocess function on it), or
  passes on its kept results (KeptBatch) when `store` holds its key.

  A unit read with a key has its batches' results kept by Encode
  (SourceBatch.unit_entry); once read, the unit is marked complete.

  The first step on every worker, so its setup checks what the workers
  run: the launcher's versions, and that the preprocess function loads.
  Both fail the job before any row is read, with what to do.

  Counters (namespace beam_tfrecords): read_units, read_batches,
  bytes_read (about: a unit's bytes are counted as its batches come),
  units_reused.
  """

  def __init__(self, columns: Sequence[str],
               preprocess: Optional[Preprocess] = None,
               keeping: Optional[Keeping] = None):
    self._columns = list(columns)
    self._preprocess = preprocess
    # (The keys travel with the units.)
    self._keeping = None if keeping is None else keeping._replace(keys=())
    self._versions = Versions()
    self._fn: Optional[Callable[[Any], Any]] = None  # in setup()
    self._units = beam.metrics.Metrics.counter("beam_tfrecords", "read_units")
    self._batches = beam.metrics.Metrics.counter("beam_tfrecords",
                                                 "read_batches")
    self._bytes = beam.metrics.Metrics.counter("beam_tfrecords",
                                               "bytes_read")
    self._reused = beam.metrics.Metrics.counter("beam_tfrecords",
                                                "units_reused")

  def setup(self):
    check_versions(self._versions)
    if self._preprocess is not None:
      self._fn = self._preprocess.load()

  def process(self, element: Tuple[ReadUnit, int, Optional[str]]):
    unit, size, key = element
    self._units.inc()
    progress = tally()
    keeping = self._keeping
    store = UnitStore(keeping.root) if key and keeping else None
    kept = store.load(key, keeping.parts_dir, keeping.deal) \
        if store is not None and keeping and key else None
    if kept is not None:
      assert keeping is not None and key is not None
      for i, batch_kept in enumerate(kept):
        yield KeptBatch((unit.path, unit.start, i), batch_kept, UnitEntry(
            keeping.root, key, i, i == 0, keeping.deal))
      self._bytes.inc(size)
      self._reused.inc()
      progress.add(bytes=size, reused=1)
      progress.flush()
      return
    batches = 0
    # A batch of CSV / JSON is about pyarrow's block_size bytes of the file.
    batch_bytes = int(unit.option_dict.get("block_size") or 0)
    left = size
    columns = None if self._preprocess is not None else self._columns
    for i, batch in enumerate(read_unit(unit, columns)):
      self._batches.inc()
      done = min(batch_bytes, left)
      left -= done
      self._bytes.inc(done)
      progress.add(bytes=done)
      batch.order = (unit.path, unit.start, i)
      batches = i + 1
      if store is not None and keeping and key:
        batch.unit_entry = UnitEntry(store.root, key, i, i == 0,
                                     keeping.deal)
      if self._preprocess is not None:
        batch = self._preprocess.apply(self._fn, batch)
        if unit.format == "tfrecord":  # the function got lists
          batch = unwrap_scalars(batch, set(
              unit.option_dict.get("scalar_columns", ())))
      yield batch
    self._bytes.inc(left)
    progress.add(bytes=left)
    progress.flush()
    if store is not None and key:
      # (Its batches' results are kept by Encode and the sink's deal,
      # fused with this step; the deal marks the unit complete when this
      # reaches it, after the unit's batches. Where a runner does not fuse
      # them, a batch missing when the unit is loaded makes it a miss.)
      yield UnitRead(store.root, key, batches,
                     {"path": unit.path, "start": unit.start,
                      "end": unit.end})


class ReadInputs(beam.PTransform):
  """Reads planned units; a Reshuffle lets every worker take some.

  Args:
    units: the ReadUnits from `beam_tfrecords.sources.plan_inputs`.
    columns: the input columns to read.
    preprocess: a user function run on every batch read (it then gets
      every column of the input, and returns the columns to encode).
    sizes: about how many bytes each unit reads (`unit_bytes`), for
      progress; None: not counted.
    keeping: how read units are kept and reused (core.unit_cache.Keeping:
      the store, each unit's key, ...), or None.
  """

  def __init__(self, units: Sequence[ReadUnit], columns: Sequence[str],
               preprocess: Optional[Preprocess] = None,
               sizes: Optional[Sequence[int]] = None,
               keeping: Optional[Keeping] = None):
    super().__init__()
    if not units:
      raise ValueError("ReadInputs needs at least one read unit")
    self._units = list(zip(units, sizes or [0] * len(units),
                           keeping.keys if keeping else [None] * len(units)))
    self._columns = list(columns)
    self._preprocess = preprocess
    self._keeping = keeping

  def expand(self, pbegin):
    return (pbegin
            | "Units" >> beam.Create(self._units)
            # (ReadUnit, bytes)
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(_ReadUnitFn(self._columns,
                                               self._preprocess,
                                               self._keeping)))
            # SourceBatch, or KeptBatch

"""ReadInputs: read units -> SourceBatches, spread over the workers."""

import collections
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import apache_beam as beam

from beam_tfrecords.runners.progress import tally
from beam_tfrecords.sources import ReadUnit, SourceBatch, read_unit
from beam_tfrecords.sources.preprocess import (Preprocess, Versions,
                                               check_versions)
from beam_tfrecords.sources.tfrecord import unwrap_scalars

__all__ = ["ReadInputs", "unit_bytes"]


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


@beam.typehints.with_input_types(Tuple[ReadUnit, int])
@beam.typehints.with_output_types(SourceBatch)
class _ReadUnitFn(beam.DoFn):
  """Reads one unit (and runs the user's preprocess function on it).

  The first step on every worker, so its setup checks what the workers
  run: the launcher's versions, and that the preprocess function loads.
  Both fail the job before any row is read, with what to do.

  Counters (namespace beam_tfrecords): read_units, read_batches,
  bytes_read (about: a unit's bytes are counted as its batches come).
  """

  def __init__(self, columns: Sequence[str],
               preprocess: Optional[Preprocess] = None):
    self._columns = list(columns)
    self._preprocess = preprocess
    self._versions = Versions()
    self._fn: Optional[Callable[[Any], Any]] = None  # in setup()
    self._units = beam.metrics.Metrics.counter("beam_tfrecords", "read_units")
    self._batches = beam.metrics.Metrics.counter("beam_tfrecords",
                                                 "read_batches")
    self._bytes = beam.metrics.Metrics.counter("beam_tfrecords",
                                               "bytes_read")

  def setup(self):
    check_versions(self._versions)
    if self._preprocess is not None:
      self._fn = self._preprocess.load()

  def process(self, element: Tuple[ReadUnit, int]):
    unit, size = element
    self._units.inc()
    progress = tally()
    # A batch of CSV / JSON is about one block of the file.
    block = int(unit.option_dict.get("block_size") or 0)
    left = size
    columns = None if self._preprocess is not None else self._columns
    for i, batch in enumerate(read_unit(unit, columns)):
      self._batches.inc()
      done = min(block, left)
      left -= done
      self._bytes.inc(done)
      progress.add(bytes=done)
      batch.order = (unit.path, unit.start, i)
      if self._preprocess is not None:
        batch = self._preprocess.apply(self._fn, batch)
        if unit.format == "tfrecord":  # the function got lists
          batch = unwrap_scalars(batch, set(
              unit.option_dict.get("scalar_columns", ())))
      yield batch
    self._bytes.inc(left)
    progress.add(bytes=left)
    progress.flush()


class ReadInputs(beam.PTransform):
  """Reads planned units; a Reshuffle lets every worker take some.

  Args:
    units: the ReadUnits from `beam_tfrecords.sources.plan_inputs`.
    columns: the input columns to read.
    preprocess: a user function run on every batch read (it then gets
      every column of the input, and returns the columns to encode).
    sizes: about how many bytes each unit reads (`unit_bytes`), for
      progress; None: not counted.
  """

  def __init__(self, units: Sequence[ReadUnit], columns: Sequence[str],
               preprocess: Optional[Preprocess] = None,
               sizes: Optional[Sequence[int]] = None):
    super().__init__()
    if not units:
      raise ValueError("ReadInputs needs at least one read unit")
    self._units = list(zip(units, sizes or [0] * len(units)))
    self._columns = list(columns)
    self._preprocess = preprocess

  def expand(self, pbegin):
    return (pbegin
            | "Units" >> beam.Create(self._units)
            # (ReadUnit, bytes)
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(_ReadUnitFn(self._columns,
                                               self._preprocess)))
            # SourceBatch

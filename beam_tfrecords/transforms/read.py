"""ReadInputs: read units -> SourceBatches, spread over the workers."""

from typing import Optional, Sequence

import apache_beam as beam

from beam_tfrecords.preprocess import Preprocess, Versions, check_versions
from beam_tfrecords.sources import ReadUnit, SourceBatch, read_unit
from beam_tfrecords.sources.tfrecord import unwrap_scalars

__all__ = ["ReadInputs"]


@beam.typehints.with_input_types(ReadUnit)
@beam.typehints.with_output_types(SourceBatch)
class _ReadUnitFn(beam.DoFn):
  """Reads one unit (and runs the user's preprocess function on it).

  The first step on every worker, so its setup checks what the workers
  run: the launcher's versions, and that the preprocess function loads.
  Both fail the job before any row is read, with what to do.

  Counters (namespace beam_tfrecords): read_units, read_batches.
  """

  def __init__(self, columns: Sequence[str],
               preprocess: Optional[Preprocess] = None):
    self._columns = list(columns)
    self._preprocess = preprocess
    self._versions = Versions()
    self._fn = None
    self._units = beam.metrics.Metrics.counter("beam_tfrecords", "read_units")
    self._batches = beam.metrics.Metrics.counter("beam_tfrecords",
                                                 "read_batches")

  def setup(self):
    check_versions(self._versions)
    if self._preprocess is not None:
      self._fn = self._preprocess.load()

  def process(self, unit: ReadUnit):
    self._units.inc()
    columns = None if self._preprocess is not None else self._columns
    for i, batch in enumerate(read_unit(unit, columns)):
      self._batches.inc()
      batch.order = (unit.path, unit.start, i)
      if self._preprocess is not None:
        batch = self._preprocess.apply(self._fn, batch)
        if unit.format == "tfrecord":  # the function got lists
          batch = unwrap_scalars(batch, set(
              unit.option_dict.get("scalar_columns", ())))
      yield batch


class ReadInputs(beam.PTransform):
  """Reads planned units; a Reshuffle lets every worker take some.

  Args:
    units: the ReadUnits from `beam_tfrecords.sources.plan_inputs`.
    columns: the input columns to read.
    preprocess: a user function run on every batch read (it then gets
      every column of the input, and returns the columns to encode).
  """

  def __init__(self, units: Sequence[ReadUnit], columns: Sequence[str],
               preprocess: Optional[Preprocess] = None):
    super().__init__()
    if not units:
      raise ValueError("ReadInputs needs at least one read unit")
    self._units = list(units)
    self._columns = list(columns)
    self._preprocess = preprocess

  def expand(self, pbegin):
    return (pbegin
            | "Units" >> beam.Create(self._units)
            # ReadUnit
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(_ReadUnitFn(self._columns,
                                               self._preprocess)))
            # SourceBatch

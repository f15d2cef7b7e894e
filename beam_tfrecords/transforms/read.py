"""ReadInputs: read units -> SourceBatches, spread over the workers."""

from typing import Sequence

import apache_beam as beam

from beam_tfrecords.sources import ReadUnit, SourceBatch, read_unit

__all__ = ["ReadInputs"]


@beam.typehints.with_input_types(ReadUnit)
@beam.typehints.with_output_types(SourceBatch)
class _ReadUnitFn(beam.DoFn):
  """Reads one unit.

  Counters (namespace beam_tfrecords): read_units, read_batches.
  """

  def __init__(self, columns: Sequence[str]):
    self._columns = list(columns)
    self._units = beam.metrics.Metrics.counter("beam_tfrecords", "read_units")
    self._batches = beam.metrics.Metrics.counter("beam_tfrecords",
                                                 "read_batches")

  def process(self, unit: ReadUnit):
    self._units.inc()
    for i, batch in enumerate(read_unit(unit, self._columns)):
      self._batches.inc()
      batch.order = (unit.path, unit.start, i)
      yield batch


class ReadInputs(beam.PTransform):
  """Reads planned units; a Reshuffle lets every worker take some.

  Args:
    units: the ReadUnits from `beam_tfrecords.sources.plan_inputs`.
    columns: the input columns to read.
  """

  def __init__(self, units: Sequence[ReadUnit], columns: Sequence[str]):
    super().__init__()
    if not units:
      raise ValueError("ReadInputs needs at least one read unit")
    self._units = list(units)
    self._columns = list(columns)

  def expand(self, pbegin):
    return (pbegin
            | "Units" >> beam.Create(self._units)
            # ReadUnit
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(_ReadUnitFn(self._columns)))
            # SourceBatch

"""SourceBatches -> a published dataset: the graph behind WriteDataset.

    batches | WriteBatches(schema, plan)   # -> the published dataset.json

Encode (records, errors, statistics) -> the record shards (deterministic or
Beam's sink; TensorFlow Transform's shards too with `transform:`), the
errors/ files and the counts -> Commit (checks the counts, writes the
staged dataset.json) -> Finish (thresholds, lock, publish).
"""

import dataclasses
from typing import Any, Dict, Optional

import apache_beam as beam

from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.core.layout import (PARTS_DIR, TFT_TEMP_DIR,
                                        TRANSFORMED_DIR)
from beam_tfrecords.encoding.stats import merge_splits, plain_splits
from beam_tfrecords.inspect.expectations import CheckPlan
from beam_tfrecords.publish.append import AppendPlan
from beam_tfrecords.publish.commit import Commit
from beam_tfrecords.publish.finish import Finish, FinishPlan
from beam_tfrecords.runners.gaps import separates_outputs
from beam_tfrecords.schema import Schema
from beam_tfrecords.sinks import (TFRECORD_GZIP, Shuffle, WriteErrors,
                                  WriteShards, WriteWithBeamSink)
from beam_tfrecords.sinks.parts import (FeatureStatistics, OutputStaged,
                                        RowCounts, UnitsRead)
from beam_tfrecords.core.members import MEMBER_CAP
from beam_tfrecords.sinks.codec import Codec
from beam_tfrecords.transforms.dead_letters import dead_letter_json
from beam_tfrecords.transforms.encode import (FEATURE_STATS, KEY_DIGESTS,
                                              STAT_FIELDS, UNITS, Encode)
from beam_tfrecords.transforms.overlap import CountOverlap

__all__ = ["WriteBatches", "DatasetPlan", "SINKS"]

SINKS = {
    "deterministic": lambda d, plan, level, shuffle, codec, cap: WriteShards(
        d, plan.shards, codec, gzip_level=level, shuffle=shuffle,
        max_bytes=plan.max_bytes, member_cap=cap),
    # WriteToTFRecord compresses with zlib's default level and cannot bound
    # file sizes: it writes exactly plan.shards files.
    "beam": lambda d, plan, level, shuffle, codec, cap: WriteWithBeamSink(
        d, plan.shards),
}


@dataclasses.dataclass(frozen=True)
class DatasetPlan:
  """How one dataset is written, decided on the launcher.

  Attributes:
    staging: the staging folder (inside the output).
    shards: the ShardPlan (files per split, largest file).
    sink: "deterministic" or "beam".
    gzip_level: None (ISA-L's fast level) or zlib's 1-9.
    shuffle: a seeded Shuffle, or None.
    statistics: whether feature statistics are computed.
    error_shards: how many errors/ files.
    planned: dataset.json as known before the run (no splits, counts or
      errors yet).
    finish: what the last step needs (thresholds, lock, publish).
    buckets: grouped sequences: how many buckets the steps are spread
      over (transforms.grouped.buckets_for); None: the default.
    checks: the schema's expectations and the baseline (None: the
      schema expects nothing).
    codec: how record shards are written (gzip TFRecords; uncompressed
      ones for --tfds).
    member_bytes: framed bytes per gzip member at most (--member-size).
    units: the unit store where read units (and grouped builds' buckets)
      are kept and reused (core.unit_cache), or None: dataset.json's
      inputs say how many were reused.
    appending: --append: the dataset the new shards join
      (publish.append), else None.
    analysis: TensorFlow Transform's analysis kept as a phase
      (tft.pipeline.KeptAnalysis), or None.
  """
  staging: str
  shards: Any
  sink: str
  gzip_level: Optional[int]
  shuffle: Optional[Shuffle]
  statistics: bool
  error_shards: int
  planned: DatasetInfo
  finish: FinishPlan
  buckets: Optional[int] = None
  checks: Optional[CheckPlan] = None
  codec: Codec = TFRECORD_GZIP
  member_bytes: int = MEMBER_CAP
  units: Optional[str] = None
  appending: Optional[AppendPlan] = None
  analysis: Any = None


def _sum_columns(rows) -> tuple:
  sums = None
  for row in rows:
    sums = list(row) if sums is None else [a + b for a, b in zip(sums, row)]
  return tuple(sums or (0,) * len(STAT_FIELDS))


class WriteBatches(beam.PTransform):
  """SourceBatches -> the published dataset.json (one element)."""

  def __init__(self, schema: Schema, plan: DatasetPlan, staged=None):
    super().__init__()
    self._schema = schema
    self._plan = plan
    # The staging folder (one element) of a pipeline that stages its
    # output when it runs (staging.StageOutput): Commit waits for it.
    self._staged = staged

  def _records(self, records):
    """The record shards (and TensorFlow Transform's): their outputs."""
    schema, plan = self._schema, self._plan
    transform = schema.transform
    # Without keep_raw, the raw shards TFT transforms are part files.
    raw_dir = plan.staging if transform is None or transform.keep_raw \
        else FileSystems.join(plan.staging, PARTS_DIR, "raw")
    # (A transform: section is refused with --sink beam: TFT reads back
    # the deterministic sink's shards, by shard.)
    raw = (records
           # (split, key, [record])
           | "WriteSplits" >> SINKS[plan.sink](
               raw_dir, plan.shards, plan.gzip_level, plan.shuffle,
               plan.codec, plan.member_bytes))
    outputs = [raw] if raw_dir == plan.staging else []
    if transform is not None:
      # pylint: disable=import-outside-toplevel
      from beam_tfrecords.tft import TransformRecords
      outputs.append(
          (records, raw)
          | "Transform" >> TransformRecords(
              schema, plan.staging,
              FileSystems.join(plan.staging, TFT_TEMP_DIR), raw_dir,
              FileSystems.join(plan.staging, TRANSFORMED_DIR),
              plan.shards.shards, plan.gzip_level, plan.shards.max_bytes,
              plan.member_bytes, plan.analysis))
    return outputs

  def expand(self, batches):
    plan = self._plan
    # Grouped steps are spilled to local disk only (see Encode).
    spill = None if "://" in plan.staging else FileSystems.join(
        plan.staging, PARTS_DIR, "steps")
    # Where the runner holds a stage's output until all its consumers ran
    # (Dask: runners.gaps), records cross it as part files.
    records = None if separates_outputs(batches.pipeline) else \
        FileSystems.join(plan.staging, PARTS_DIR, "records")
    encoded = batches | "Encode" >> Encode(
        self._schema, plan.statistics, plan.buckets, spill, records,
        plan.units)
    # records: bytes; errors: dead-letter dicts; stats: STAT_FIELDS tuples
    outputs = self._records(encoded["records"])
    expect = self._schema.expect
    if expect is not None and expect.disjoint_splits:
      outputs.append(encoded["records"] | "SplitOverlap" >> CountOverlap())
    if expect is not None and expect.disjoint_keys:
      outputs.append(encoded[KEY_DIGESTS]
                     | "KeyOverlap" >> CountOverlap(keys=True))
    outputs.append(encoded["errors"]
                   | "WriteErrors" >> WriteErrors(
                       plan.staging, plan.error_shards, dead_letter_json))
    outputs.append(encoded["stats"]
                   # No defaults: Commit counts a missing part as zeros, and a
                   # default is a side input (see runners.gaps).
                   | "SumStats" >> beam.CombineGlobally(
                       _sum_columns).without_defaults()
                   | "StatsPart" >> beam.Map(
                       lambda s: RowCounts(tuple(s))).with_output_types(Any))
    if plan.statistics and FEATURE_STATS in encoded:
      outputs.append(encoded[FEATURE_STATS]
                     # (Each is a bundle's batches merged: SchemaFn.)
                     | "SumFeatureStats" >> beam.CombineGlobally(
                         merge_splits).without_defaults()
                     # (Typed as Any: Beam would make a Beam schema of the
                     # NamedTuple outputs when they are flattened, and fails
                     # on their dict fields.)
                     # (Top values as dicts from here on: stats.plain.)
                     | "FeatureStatsPart" >> beam.Map(
                         lambda s: FeatureStatistics(plain_splits(s))
                     ).with_output_types(Any))
    if UNITS in encoded:
      outputs.append(encoded[UNITS]
                     | "SumUnits" >> beam.CombineGlobally(
                         _sum_columns).without_defaults()
                     | "UnitsPart" >> beam.Map(
                         lambda s: UnitsRead(*s)).with_output_types(Any))
    if self._staged is not None:
      outputs.append(self._staged | "StagedPart" >> beam.Map(
          OutputStaged).with_output_types(Any))
    return (tuple(outputs)
            | "Parts" >> beam.Flatten()
            | "Commit" >> Commit(plan.staging, plan.planned, STAT_FIELDS,
                                 plan.checks, plan.appending)
            | "Finish" >> Finish(plan.finish))

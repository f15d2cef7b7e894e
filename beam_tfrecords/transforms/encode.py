"""Encode: SourceBatches -> serialized records, with a dead-letter output.

Examples and list-column SequenceExamples are encoded batch by batch
(`EncodeRows`). Grouped SequenceExamples take three steps
(`transforms.grouped.EncodeGroupedSequences`): rows -> steps by bucket,
GroupByKey, then one assembly per bucket.
"""

import logging
from typing import Any, Dict, List, Optional, Tuple, Union

import apache_beam as beam
import numpy as np

from beam_tfrecords.core import native
from beam_tfrecords.core.unit_cache import (KeepParts, KeptParts, KeptSplit,
                                            UnitEntry, UnitRead, UnitStore)
from beam_tfrecords.encoding import ExampleEncoder, SequenceEncoder
from beam_tfrecords.encoding.media import MediaPreparer
from beam_tfrecords.schema import Schema
from beam_tfrecords.schema.model import MediaKind
from beam_tfrecords.sources import SourceBatch
from beam_tfrecords.sources.fetch import fetch_files
from beam_tfrecords.runners.gaps import (par_do, separates_outputs,
                                          threads_for)
from beam_tfrecords.sinks.shards import kept_records
from beam_tfrecords.transforms.batch_fn import (ERRORS, FEATURE_STATS,
                                                KEY_DIGESTS, STAT_FIELDS, STATS,
                                                UNITS, Output, SchemaFn,
                                                by_split, stats, take,
                                                unit_counted)
from beam_tfrecords.transforms.overlap import digest
from beam_tfrecords.transforms.records_coder import Records
from beam_tfrecords.transforms.spilled import spill
from beam_tfrecords.transforms.dead_letters import remapped, row_errors
from beam_tfrecords.transforms.inputs import KeptBatch

__all__ = ["Encode", "EncodeRows", "ERRORS", "FEATURE_STATS", "KEY_DIGESTS",
           "STATS", "STAT_FIELDS", "UNITS", "key_digests"]

_LOG = logging.getLogger(__name__)

# Rows per piece of a batch whose schema reads files (images, .npy): the
# most files one piece holds in memory.
MEDIA_SLICE_ROWS = 64


@beam.typehints.with_input_types(SourceBatch)
class _EncodeBatchFn(SchemaFn):
  """Encodes one batch (Examples, or list-column SequenceExamples).

  Outputs: main: (split, batch order, records: an encoding.ragged.Ragged,
  which iterates as the list of serialized records) per split with
  records (with `records_dir`, a transforms.spilled.SpilledRecords in a
  part file there, in place of the list); ERRORS: (batch order, [dead-letter dict]) per batch with errors;
  STATS: a STAT_FIELDS tuple per batch.
  Counters (namespace beam_tfrecords): rows_read, rows_written,
  rows_rejected, rows_dropped, records, steps, steps_dropped.
  """

  _encoder: Union[ExampleEncoder, SequenceEncoder]

  def __init__(self, schema_dict: Dict[str, Any],
               threads: Optional[int] = 1, statistics: bool = True,
               records_dir: Optional[str] = None, bundle_stats: bool = True):
    super().__init__(schema_dict, threads=threads, statistics=statistics,
                     bundle_stats=bundle_stats)
    self._records_dir = records_dir

  def _build(self, schema):
    return SequenceEncoder(schema) if schema.is_sequence else \
        ExampleEncoder(schema)

  def setup(self):
    super().setup()
    native.log_path(_LOG)  # on a worker: once per process
    schema = self._encoder.schema
    self._keys = schema.expect.disjoint_keys if schema.expect else ()
    self._media = MediaPreparer(schema, fetch_files) \
        if schema.media else None
    # Batches of a schema that reads files are worked on in slices, so
    # that a batch of a million paths never holds a million images.
    self._slice_rows = MEDIA_SLICE_ROWS if any(
        m.kind is MediaKind.IMAGE or (m.kind is MediaKind.TENSOR
                                      and m.options.get("from"))
        for m in schema.media) else None

  def _elements(self, batch: SourceBatch):
    if self._slice_rows is None:
      return [batch]
    step = self._slice_rows
    return [batch.slice(start, min(start + step, batch.num_rows), number)
            for number, start in enumerate(range(0, max(batch.num_rows, 1),
                                               step))]

  def _work(self, batch):
    """A batch encoded (and kept, when its unit is), or a reused one's
    results as they were kept. A kept batch's records go on as KeepParts
    and a reused one's as KeptParts: the sink keeps, and reuses, what it
    deals them into (core.unit_cache). The end of a kept unit (UnitRead)
    goes on to the sink behind its batches."""
    if isinstance(batch, UnitRead):
      return [batch], stats(), []
    if isinstance(batch, KeptBatch):
      outputs, counts, errors = batch.kept.result
      return (list(outputs) + [
          _kept_parts(split, batch.order, kept, batch.entry)
          for split, kept in batch.kept.parts.items()]
              + unit_counted(batch.entry.first, True), counts, errors)
    result = self._encoded(batch)
    entry = batch.unit_entry
    if entry is None:
      return result
    outputs, counts, errors = result
    tagged = [o for o in outputs if isinstance(o, beam.pvalue.TaggedOutput)]
    records = [o for o in outputs
               if not isinstance(o, beam.pvalue.TaggedOutput)]
    UnitStore(entry.root).put(entry.key, entry.number,
                              (tagged, counts, errors),
                              splits=[split for split, _, _ in records])
    return ([KeepParts(split, order, items, entry)
             for split, order, items in records] + tagged
            + unit_counted(entry.first, False), counts, errors)

  def _encoded(self, batch: SourceBatch):
    made, rejected = ({}, {}) if self._media is None else \
        self._media.prepare(batch.columns, batch.num_rows, batch.path)
    splits_rows, found = by_split(self._splits, batch, rejected)
    every = dict(batch.columns, **made) if made else batch.columns
    outputs: List[Output] = []
    rows_written = records = steps = dropped = 0
    described = {}
    for split, index in splits_rows:
      columns, n = (every, batch.num_rows) if index is None else (
          take(every, index), len(index))
      result = self._encoder.encode_columns(columns, n,
                                            stats=self._statistics)
      if result.stats is not None:
        described[split] = result.stats
      if len(result.rows):
        # The records as one buffer (a Ragged, which iterates as the list
        # of records): framed by the sink without a bytes per record.
        outputs.append((split, batch.order, result.records
                        if self._records_dir is None else
                        spill(self._records_dir, result.records)))
        if self._keys:
          outputs.append(beam.pvalue.TaggedOutput(KEY_DIGESTS, (
              split, key_digests(columns, self._keys, result.rows))))
      found += remapped(result.errors, index)
      rows_written += result.rows_written
      records += len(result.rows)
      steps += int(result.steps.sum()) if result.steps is not None else 0
      dropped += result.dropped_steps
    errors = row_errors(batch, found)
    if errors:
      outputs.append(beam.pvalue.TaggedOutput(ERRORS, (batch.order, errors)))
    if described:
      outputs.append(beam.pvalue.TaggedOutput(FEATURE_STATS, described))
    counts = stats(
        rows_read=batch.num_rows + len(batch.errors),
        rows_written=rows_written, rows_rejected=len(errors),
        records=records, steps=steps, steps_dropped=dropped)
    outputs.append(beam.pvalue.TaggedOutput(STATS, counts))
    return outputs, counts, errors


def _kept_parts(split: str, order: tuple, kept: KeptSplit,
                entry: UnitEntry) -> Union[KeptParts, KeepParts]:
  """A reused batch's parts of a split as they were dealt, or, dealt for
  another shard plan, its records got back from them, to be dealt (and
  kept) again."""
  parts = KeptParts(split, order, kept.path, kept.parts, kept.how)
  if kept.other_deal is None:
    return parts
  return KeepParts(split, order, kept_records(parts), entry)


def key_digests(columns, keys, rows: np.ndarray) -> bytes:
  """The digests of the key columns' values (together) of these rows, back
  to back; rows without a value in some key column are left out (they
  cannot share a key with another split)."""
  taken = take({k: columns[k] for k in keys}, np.unique(rows))
  lists = [v.to_pylist() if hasattr(v, "to_pylist") else list(v)
           for v in (taken[k] for k in keys)]
  return b"".join(digest(repr(key).encode("utf-8"))
                  for key in zip(*lists) if None not in key)


class EncodeRows(beam.PTransform):
  """Encodes SourceBatches row by row (Examples, list-column sequences).

  Returns {"records": (split, batch order, records: a Ragged) (with `records_dir`
  a SpilledRecords, which iterates as that list: see _EncodeBatchFn),
  ERRORS ((batch order, [dead-letter dict: source, row, rows, reason,
  problems, raw])) and STATS.
  """

  def __init__(self, schema: Schema, statistics: bool = True,
               records_dir: Optional[str] = None, units: bool = False):
    super().__init__()
    self._schema = schema
    self._statistics = statistics
    self._records_dir = records_dir
    self._units = units

  def expand(self, batches):
    expect = self._schema.expect
    # (An output only when asked: on runners without tagged outputs each
    # one is another pass over every output; see runners.gaps.)
    keys: Tuple[str, ...] = (KEY_DIGESTS,) if (
        expect is not None and expect.disjoint_keys) else ()
    keys += (UNITS,) if self._units else ()
    # With a transform, TFT's analysis runs in this stage too, on the
    # bundle's thread: one encoding thread keeps both cores of a 2-core
    # worker busy, and holds one batch less (1M flights rows, 4 analyzers:
    # peak RSS 980 -> 905 MB, 22.2 -> 23.8 s).
    threads = 1 if self._schema.transform is not None else None
    outputs = par_do(batches, "EncodeBatch", _EncodeBatchFn(
        self._schema.to_dict(), threads=threads_for(batches.pipeline, threads),
        statistics=self._statistics, records_dir=self._records_dir,
        bundle_stats=separates_outputs(batches.pipeline)),
                     (ERRORS, STATS, FEATURE_STATS) + keys, main="records")
    # Sized without a pickle of every sampled batch's records.
    outputs["records"].element_type = Records
    return outputs


class Encode(beam.PTransform):
  """SourceBatches -> {"records", "errors", "stats"} as the schema says.

  "records" holds batches (split, key, [serialized record]); keys are
  unique and the same on every run (see sinks.shards). `spill_dir`: where
  grouped sequences' steps are spilled (a local folder); `records_dir`:
  where Examples' records go as part files, where the runner would hold
  them in memory (see transforms.spilled); `units`: the unit store where
  batches may come from units kept or reused (core.unit_cache), counted
  in UNITS (None: none).
  """

  def __init__(self, schema: Schema, statistics: bool = True,
               buckets: Optional[int] = None,
               spill_dir: Optional[str] = None,
               records_dir: Optional[str] = None,
               units: Optional[str] = None):
    super().__init__()
    self._schema = schema
    self._statistics = statistics
    self._buckets = buckets
    self._spill_dir = spill_dir
    self._records_dir = records_dir
    self._units = units

  def expand(self, batches):
    if self._schema.is_sequence and self._schema.group_by:
      # pylint: disable=import-outside-toplevel
      from beam_tfrecords.transforms.grouped import EncodeGroupedSequences
      return batches | "Grouped" >> EncodeGroupedSequences(
          self._schema, self._statistics, self._buckets, self._spill_dir,
          self._units)
    out = batches | "Rows" >> EncodeRows(self._schema, self._statistics,
                                         self._records_dir,
                                         bool(self._units))
    encoded = {"records": out["records"], "errors": out[ERRORS],
               "stats": out[STATS], FEATURE_STATS: out[FEATURE_STATS]}
    if KEY_DIGESTS in out:  # (expect: {disjoint_keys: ...})
      encoded[KEY_DIGESTS] = out[KEY_DIGESTS]
    if UNITS in out:
      encoded[UNITS] = out[UNITS]
    return encoded

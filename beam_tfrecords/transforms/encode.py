"""Encode: SourceBatches -> serialized records, with a dead-letter output.

Examples and list-column SequenceExamples are encoded batch by batch
(`EncodeRows`). Grouped SequenceExamples take three steps
(`EncodeGroupedSequences`): rows -> keyed steps, GroupByKey, then one
assembly per group.
"""

import base64
import json
from typing import Any, Dict, List

import apache_beam as beam

from beam_tfrecords.encoding import (ExampleEncoder, SequenceAssembler,
                                     SequenceEncoder, StepEncoder)
from beam_tfrecords.errors import reason_category
from beam_tfrecords.schema import Schema, schema_from_dict
from beam_tfrecords.sources import SourceBatch

__all__ = ["Encode", "EncodeRows", "EncodeGroupedSequences", "ERRORS",
           "STATS", "STAT_FIELDS", "dead_letter_json"]

ERRORS = "errors"
STATS = "stats"
# Each STATS element is a tuple of these counts (summed for dataset.json).
# rows_read = rows_written + rows_rejected + rows_dropped always holds.
STAT_FIELDS = ("rows_read", "rows_written", "rows_rejected", "rows_dropped",
               "records", "steps", "steps_dropped")
# Raw cells longer than this are cut in the dead-letter row (the reason still
# says what was wrong with the whole value).
MAX_RAW_CHARS = 10_000
_NAMESPACE = "beam_tfrecords"


def _stats(**counts) -> tuple:
  return tuple(counts.get(k, 0) for k in STAT_FIELDS)


def _jsonable(value: Any) -> Any:
  if isinstance(value, bytes):
    try:
      value = value.decode("utf-8")
    except UnicodeDecodeError:
      return {"base64": base64.b64encode(value[:MAX_RAW_CHARS]).decode("ascii")}
  if isinstance(value, str):
    return value if len(value) <= MAX_RAW_CHARS else \
        value[:MAX_RAW_CHARS] + f"... ({len(value)} characters)"
  if isinstance(value, dict):
    return {str(k): _jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_jsonable(v) for v in value]
  if isinstance(value, float) and value != value:
    return "NaN"
  if value is None or isinstance(value, (bool, int, float)):
    return value
  return str(value)


def _plain(value: Any) -> bool:
  """Whether _jsonable(value) is value (the common cells, checked fast)."""
  kind = type(value)
  return value is None or kind is int or kind is bool or (
      kind is float and value == value) or (
          kind is str and len(value) <= MAX_RAW_CHARS)


def dead_letter_json(record: Dict[str, Any]) -> str:
  raw = record.get("raw")
  if not isinstance(raw, dict):
    return json.dumps(_jsonable(record), sort_keys=True, ensure_ascii=False)
  # The usual dead-letter row: most raw cells need no change (checked fast).
  out = _jsonable({k: v for k, v in record.items() if k != "raw"})
  out["raw"] = {str(k): v if _plain(v) else _jsonable(v)
                for k, v in raw.items()}
  return json.dumps(out, sort_keys=True, ensure_ascii=False)


def _row_errors(batch: SourceBatch, encode_errors):
  """Dead-letter dicts of a batch's unreadable and unencodable rows."""
  for err in batch.errors:
    yield {"source": batch.path, "row": err.row, "rows": 1,
           "reason": err.reason, "problems": [], "raw": err.raw}
  raws = batch.raw_rows([err.row for err in encode_errors])
  for err, raw in zip(encode_errors, raws):
    yield {"source": batch.path, "row": batch.row_number(err.row), "rows": 1,
           "reason": err.reason,
           "problems": [{"feature": f, "reason": r} for f, r in err.problems],
           "raw": raw}


class _Counters:
  """The pipeline's counters: one per STAT_FIELDS entry, and rows per
  rejection reason ("rejected: <reason without its values>")."""

  def __init__(self):
    self._counters = [beam.metrics.Metrics.counter(_NAMESPACE, k)
                      for k in STAT_FIELDS]

  @staticmethod
  def rejected(error: Dict[str, Any]) -> Dict[str, Any]:
    _Counters.rejected_all([error])
    return error

  @staticmethod
  def rejected_all(errors: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    rows: Dict[str, int] = {}
    for error in errors:
      category = reason_category(error["reason"])[:200]
      rows[category] = rows.get(category, 0) + error.get("rows", 1)
    for category, n in rows.items():
      beam.metrics.Metrics.counter(_NAMESPACE, "rejected: " + category).inc(n)
    return errors

  def add(self, stats: tuple) -> tuple:
    for counter, value in zip(self._counters, stats):
      if value:
        counter.inc(value)
    return stats


class _SchemaFn(beam.DoFn):
  """A DoFn that pickles as a schema dict and builds its encoder in setup()."""

  def __init__(self, schema_dict: Dict[str, Any]):
    self._schema_dict = schema_dict
    self._encoder = None
    self._counters = _Counters()

  def _build(self, schema: Schema):
    raise NotImplementedError

  def setup(self):
    self._encoder = self._build(schema_from_dict(self._schema_dict))


@beam.typehints.with_input_types(SourceBatch)
class _EncodeBatchFn(_SchemaFn):
  """Encodes one batch (Examples, or list-column SequenceExamples).

  Outputs: main: (batch order, [serialized record]); ERRORS: (batch order,
  [dead-letter dict]) per batch with errors; STATS: a STAT_FIELDS tuple per
  batch.
  Counters (namespace beam_tfrecords): rows_read, rows_written,
  rows_rejected, rows_dropped, records, steps, steps_dropped.
  """

  def _build(self, schema):
    return SequenceEncoder(schema) if schema.is_sequence else \
        ExampleEncoder(schema)

  def process(self, batch: SourceBatch):
    result = self._encoder.encode_columns(batch.columns, batch.num_rows)
    if len(result.rows):
      yield batch.order, result.record_list()
    errors = self._counters.rejected_all(
        list(_row_errors(batch, result.errors)))
    rejected = len(errors)
    if errors:
      yield beam.pvalue.TaggedOutput(ERRORS, (batch.order, errors))
    steps = int(result.steps.sum()) if result.steps is not None else 0
    yield beam.pvalue.TaggedOutput(STATS, self._counters.add(_stats(
        rows_read=batch.num_rows + len(batch.errors),
        rows_written=result.rows_written, rows_rejected=rejected,
        records=len(result.rows), steps=steps,
        steps_dropped=result.dropped_steps)))


class EncodeRows(beam.PTransform):
  """Encodes SourceBatches row by row (Examples, list-column sequences).

  Returns a DoOutputsTuple: main ((batch order, [serialized record])),
  ERRORS ((batch order, [dead-letter dict: source, row, rows, reason,
  problems, raw])) and STATS.
  """

  def __init__(self, schema: Schema):
    super().__init__()
    self._schema = schema

  def expand(self, batches):
    return batches | "EncodeBatch" >> beam.ParDo(
        _EncodeBatchFn(self._schema.to_dict())).with_outputs(
            ERRORS, STATS, main="records")


@beam.typehints.with_input_types(SourceBatch)
class _EncodeStepsFn(_SchemaFn):
  """One batch -> (group key, (source path, [step])) per key in the batch.

  Rows of one key in one batch travel together, so a file sorted by key
  sends one element per key instead of one per row.
  Outputs: main: keyed steps; ERRORS; STATS.
  Counters: as _EncodeBatchFn.
  """

  def _build(self, schema):
    return StepEncoder(schema)

  def process(self, batch: SourceBatch):
    result = self._encoder.encode_columns(
        batch.columns, batch.num_rows, batch.known_row_numbers())
    for key, steps in result.groups:
      yield key, (batch.path, steps)
    errors = self._counters.rejected_all(
        list(_row_errors(batch, result.errors)))
    rejected = len(errors)
    if errors:
      yield beam.pvalue.TaggedOutput(ERRORS, (batch.order, errors))
    yield beam.pvalue.TaggedOutput(STATS, self._counters.add(_stats(
        rows_read=batch.num_rows + len(batch.errors),
        rows_rejected=rejected)))


class _AssembleFn(_SchemaFn):
  """(key, [(path, [step])]) -> the group's SequenceExample(s).

  Outputs: main: (group key, [serialized record]); ERRORS: ((file, -1, -1),
  [dead-letter dict]) per rejected or truncated group; STATS.
  Counters: as _EncodeBatchFn.
  """

  def __init__(self, schema_dict: Dict[str, Any]):
    super().__init__(schema_dict)
    self._columns = [c for c, _ in schema_from_dict(schema_dict).group_by]

  def _build(self, schema):
    return SequenceAssembler(schema)

  def process(self, element):
    key, chunks = element
    result = self._encoder.assemble(chunks)
    if result.records:
      yield key, result.records
    rejected = dropped = 0
    for e in result.errors:
      if e.dropped:
        dropped += e.rows
      else:
        rejected += e.rows
      source = e.examples[0][0] if e.examples else None
      error = self._counters.rejected({
          "source": source, "row": None, "rows": e.rows,
          "group": dict(zip(self._columns, key)),
          "kind": "dropped" if e.dropped else "rejected",
          "reason": e.reason, "problems": [], "raw": None,
          "examples": [{"source": s, "row": r} for s, r in e.examples]})
      # Keyed like a batch's errors; (file, -1, -1) sorts before its rows.
      yield beam.pvalue.TaggedOutput(ERRORS, ((source or "", -1, -1),
                                              [error]))
    yield beam.pvalue.TaggedOutput(STATS, self._counters.add(_stats(
        rows_written=result.rows_written, rows_rejected=rejected,
        rows_dropped=dropped, records=len(result.records),
        steps=result.rows_written, steps_dropped=dropped)))


class EncodeGroupedSequences(beam.PTransform):
  """Groups rows by the schema's group_by key into SequenceExamples.

  Returns {"records", "errors", "stats"} like `Encode`.
  """

  def __init__(self, schema: Schema):
    super().__init__()
    self._schema = schema

  def expand(self, batches):
    schema_dict = self._schema.to_dict()
    steps = batches | "EncodeSteps" >> beam.ParDo(
        _EncodeStepsFn(schema_dict)).with_outputs(ERRORS, STATS, main="steps")
    assembled = (steps.steps
                 # (key, (source path, [step]))
                 | "GroupSteps" >> beam.GroupByKey()
                 # (key, [(source path, [step]), ...])
                 | "Assemble" >> beam.ParDo(_AssembleFn(schema_dict))
                 .with_outputs(ERRORS, STATS, main="records"))
    return {
        "records": assembled.records,
        "errors": (steps[ERRORS], assembled[ERRORS])
                  | "Errors" >> beam.Flatten(),
        "stats": (steps[STATS], assembled[STATS]) | "Stats" >> beam.Flatten(),
    }


class Encode(beam.PTransform):
  """SourceBatches -> {"records", "errors", "stats"} as the schema says.

  "records" holds chunks (key, [serialized record]); keys are unique and
  the same on every run (see sinks.shards).
  """

  def __init__(self, schema: Schema):
    super().__init__()
    self._schema = schema

  def expand(self, batches):
    if self._schema.is_sequence and self._schema.group_by:
      return batches | "Grouped" >> EncodeGroupedSequences(self._schema)
    out = batches | "Rows" >> EncodeRows(self._schema)
    return {"records": out.records, "errors": out[ERRORS],
            "stats": out[STATS]}

"""Encode: SourceBatches -> serialized records, with a dead-letter output.

Examples and list-column SequenceExamples are encoded batch by batch
(`EncodeRows`). Grouped SequenceExamples take three steps
(`transforms.grouped.EncodeGroupedSequences`): rows -> steps by bucket,
GroupByKey, then one assembly per bucket.
"""

import base64
import collections
import concurrent.futures
import json
import os
from typing import Any, Dict, List, Optional, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.utils.windowed_value import WindowedValue

from beam_tfrecords.encoding import ExampleEncoder, SequenceEncoder
from beam_tfrecords.encoding.example import RowError
from beam_tfrecords.encoding.media import MediaPreparer
from beam_tfrecords.splits import SplitAssigner, key_types
from beam_tfrecords.errors import reason_category
from beam_tfrecords.progress import tally
from beam_tfrecords.schema import Schema, schema_from_dict
from beam_tfrecords.schema.model import MediaKind
from beam_tfrecords.sources import SourceBatch
from beam_tfrecords.runner_gaps import par_do, threads_for

__all__ = ["Encode", "EncodeRows", "ERRORS",
           "FEATURE_STATS",
           "STATS", "STAT_FIELDS", "dead_letter_json"]

ERRORS = "errors"
STATS = "stats"
# Per-split, per-feature statistics of the written Examples.
FEATURE_STATS = "feature_stats"
# Each STATS element is a tuple of these counts (summed for dataset.json).
# rows_read = rows_written + rows_rejected + rows_dropped always holds.
STAT_FIELDS = ("rows_read", "rows_written", "rows_rejected", "rows_dropped",
               "records", "steps", "steps_dropped")
_READ, _REJECTED, _RECORDS = (STAT_FIELDS.index(k) for k in (
    "rows_read", "rows_rejected", "records"))
# Raw cells longer than this are cut in the dead-letter row (the reason still
# says what was wrong with the whole value).
MAX_RAW_CHARS = 10_000
_NAMESPACE = "beam_tfrecords"
# Threads per worker process that encode batches (None: one per core, at
# most this many). Measured on 1M rows, 2 cores: 8.7 s with one, 7.0 s
# with two.
ENCODE_THREADS_MAX = 2
# Rows per piece of a batch whose schema reads files (images, .npy): the
# most files one piece holds in memory.
MEDIA_SLICE_ROWS = 64


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


def _row_errors(batch: SourceBatch, encode_errors) -> List[Dict[str, Any]]:
  """Dead-letter dicts of a batch's unreadable and unencodable rows, in
  row order."""
  errors = list(_unsorted_row_errors(batch, encode_errors))
  errors.sort(key=lambda e: (e["row"] is None, e["row"] or 0,
                             e.get("element") or ""))
  return errors


def _unsorted_row_errors(batch: SourceBatch, encode_errors):
  for err in batch.errors:
    yield {"source": batch.path, "row": err.row, "rows": 1,
           "reason": err.reason, "problems": [], "raw": err.raw}
  raws = batch.raw_rows([err.row for err in encode_errors])
  for err, raw in zip(encode_errors, raws):
    error = {"source": batch.path, "row": batch.row_number(err.row),
             "rows": 1, "reason": err.reason,
             "problems": [{"feature": f, "reason": r}
                          for f, r in err.problems],
             "raw": raw}
    if batch.elements is not None:  # a PCollection's row: its digest
      error["element"] = batch.elements[err.row]
    yield error


class _Counters:
  """The pipeline's counters: one per STAT_FIELDS entry, and rows per
  rejection reason ("rejected: <reason without its values>")."""

  def __init__(self):
    self._counters = [beam.metrics.Metrics.counter(_NAMESPACE, k)
                      for k in STAT_FIELDS]

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
    tally().add(rows=stats[_READ], records=stats[_RECORDS],
                rejected=stats[_REJECTED])
    return stats


def _take(columns: Dict[str, Any], index: np.ndarray) -> Dict[str, Any]:
  taken = pa.array(index, type=pa.int64())
  return {c: (a.take(taken) if isinstance(a, (pa.Array, pa.ChunkedArray))
              else [a[i] for i in index.tolist()])
          for c, a in columns.items()}


def _by_split(assigner: SplitAssigner, batch: SourceBatch,
              rejected: Optional[Dict[int, list]] = None):
  """([(split name, row index or None for all rows)], [RowError]).

  Rows that no split takes are RowErrors (feature "splits"), and so are
  the `rejected` rows ({row: [(feature, reason)]}, e.g. unreadable
  images)."""
  names = assigner.rule.names
  rejected = rejected or {}
  if len(names) == 1 and not assigner.rule.columns:
    split = np.zeros(batch.num_rows, dtype=np.int32)
    problems = {}
  else:
    split, problems = assigner.assign(batch.columns, batch.num_rows)
  ok = np.ones(batch.num_rows, dtype=bool)
  if problems or rejected:
    ok[list(problems) + list(rejected)] = False
  parts = []
  for i, name in enumerate(names):
    index = np.nonzero((split == i) & ok)[0]
    if len(index) == batch.num_rows:
      index = None
    if index is None or len(index):
      parts.append((name, index))
  errors = [RowError(row=r, problems=tuple(rejected.get(r, ())) + (
      (("splits", problems[r]),) if r in problems else ()))
            for r in sorted(set(problems) | set(rejected))]
  return parts, errors


def _remapped(errors, index) -> list:
  if index is None:
    return list(errors)
  return [RowError(row=int(index[e.row]), problems=e.problems)
          for e in errors]


class _SchemaFn(beam.DoFn):
  """A DoFn that pickles as a schema dict and builds its encoder in setup().

  With `threads` > 1, elements are worked on by a small thread pool while
  the next ones are read: the work is numpy / Arrow / ISA-L, which release
  the GIL, so one worker process uses more than one core on every runner.
  Outputs keep their element's order; at most `threads` + 1 elements are
  in flight. Counters are updated in the DoFn's own thread (Beam's metrics
  are thread-local).
  """

  def __init__(self, schema_dict: Dict[str, Any],
               threads: Optional[int] = 1, statistics: bool = True):
    self._schema_dict = schema_dict
    self._threads = threads
    self._statistics = statistics
    self._encoder = None
    self._pool = None
    self._pending = collections.deque()
    self._counters = _Counters()

  def _build(self, schema: Schema):
    raise NotImplementedError

  def _work(self, element) -> Tuple[list, tuple, list]:
    """(outputs, STAT_FIELDS tuple, dead-letter dicts); no Beam calls."""
    raise NotImplementedError

  def setup(self):
    schema = schema_from_dict(self._schema_dict)
    self._encoder = self._build(schema)
    self._splits = SplitAssigner(schema.splits, key_types(schema))
    if self._threads is None:  # decided where the work runs
      self._threads = min(os.cpu_count() or 1, ENCODE_THREADS_MAX)
    if self._threads > 1:
      self._pool = concurrent.futures.ThreadPoolExecutor(
          self._threads, thread_name_prefix="beam_tfrecords-encode")

  def teardown(self):
    if self._pool is not None:
      self._pool.shutdown(wait=True)
      self._pool = None

  def start_bundle(self):
    self._pending = collections.deque()

  def _emit(self, result):
    outputs, stats, errors = result
    self._counters.rejected_all(errors)
    self._counters.add(stats)
    return outputs

  def _elements(self, element) -> list:
    """The pieces an element is worked on in (itself, by default)."""
    return [element]

  def process(self, element, window=beam.DoFn.WindowParam,
              timestamp=beam.DoFn.TimestampParam):
    for piece in self._elements(element):
      if self._pool is None:
        yield from self._emit(self._work(piece))
        continue
      self._pending.append((self._pool.submit(self._work, piece), window,
                            timestamp))
      while self._pending and (len(self._pending) > self._threads
                               or self._pending[0][0].done()):
        yield from self._emit_windowed(*self._pending.popleft())

  def finish_bundle(self):
    while self._pending:
      yield from self._emit_windowed(*self._pending.popleft())
    tally().flush()

  def _emit_windowed(self, future, window, timestamp):
    """An earlier element's outputs, in that element's window."""
    for out in self._emit(future.result()):
      if isinstance(out, beam.pvalue.TaggedOutput):
        yield beam.pvalue.TaggedOutput(out.tag, WindowedValue(
            out.value, timestamp, [window]))
      else:
        yield WindowedValue(out, timestamp, [window])


@beam.typehints.with_input_types(SourceBatch)
class _EncodeBatchFn(_SchemaFn):
  """Encodes one batch (Examples, or list-column SequenceExamples).

  Outputs: main: (split, batch order, [serialized record]) per split with
  records; ERRORS: (batch order, [dead-letter dict]) per batch with errors;
  STATS: a STAT_FIELDS tuple per batch.
  Counters (namespace beam_tfrecords): rows_read, rows_written,
  rows_rejected, rows_dropped, records, steps, steps_dropped.
  """

  def _build(self, schema):
    return SequenceEncoder(schema) if schema.is_sequence else \
        ExampleEncoder(schema)

  def setup(self):
    super().setup()
    schema = self._encoder.schema
    self._media = MediaPreparer(schema) if schema.media else None
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
    return [batch.slice(start, min(start + step, batch.num_rows), part)
            for part, start in enumerate(range(0, max(batch.num_rows, 1),
                                               step))]

  def _work(self, batch: SourceBatch):
    made, rejected = ({}, {}) if self._media is None else \
        self._media.prepare(batch.columns, batch.num_rows, batch.path)
    parts, row_errors = _by_split(self._splits, batch, rejected)
    every = dict(batch.columns, **made) if made else batch.columns
    outputs = []
    rows_written = records = steps = dropped = 0
    described = {}
    for split, index in parts:
      columns, n = (every, batch.num_rows) if index is None else (
          _take(every, index), len(index))
      result = self._encoder.encode_columns(columns, n,
                                            stats=self._statistics)
      if result.stats is not None:
        described[split] = result.stats
      if len(result.rows):
        outputs.append((split, batch.order, result.record_list()))
      row_errors += _remapped(result.errors, index)
      rows_written += result.rows_written
      records += len(result.rows)
      steps += int(result.steps.sum()) if result.steps is not None else 0
      dropped += result.dropped_steps
    errors = _row_errors(batch, row_errors)
    if errors:
      outputs.append(beam.pvalue.TaggedOutput(ERRORS, (batch.order, errors)))
    if described:
      outputs.append(beam.pvalue.TaggedOutput(FEATURE_STATS, described))
    stats = _stats(
        rows_read=batch.num_rows + len(batch.errors),
        rows_written=rows_written, rows_rejected=len(errors),
        records=records, steps=steps, steps_dropped=dropped)
    outputs.append(beam.pvalue.TaggedOutput(STATS, stats))
    return outputs, stats, errors


class EncodeRows(beam.PTransform):
  """Encodes SourceBatches row by row (Examples, list-column sequences).

  Returns {"records": (split, batch order, [record]),
  ERRORS ((batch order, [dead-letter dict: source, row, rows, reason,
  problems, raw])) and STATS.
  """

  def __init__(self, schema: Schema, statistics: bool = True):
    super().__init__()
    self._schema = schema
    self._statistics = statistics

  def expand(self, batches):
    return par_do(batches, "EncodeBatch", _EncodeBatchFn(
        self._schema.to_dict(), threads=threads_for(batches.pipeline),
        statistics=self._statistics), (ERRORS, STATS, FEATURE_STATS),
                  main="records")


class Encode(beam.PTransform):
  """SourceBatches -> {"records", "errors", "stats"} as the schema says.

  "records" holds chunks (split, key, [serialized record]); keys are
  unique and the same on every run (see sinks.shards).
  """

  def __init__(self, schema: Schema, statistics: bool = True,
               buckets: Optional[int] = None,
               spill_dir: Optional[str] = None):
    super().__init__()
    self._schema = schema
    self._statistics = statistics
    self._buckets = buckets
    self._spill_dir = spill_dir

  def expand(self, batches):
    if self._schema.is_sequence and self._schema.group_by:
      # pylint: disable=import-outside-toplevel
      from beam_tfrecords.transforms.grouped import EncodeGroupedSequences
      return batches | "Grouped" >> EncodeGroupedSequences(
          self._schema, self._statistics, self._buckets, self._spill_dir)
    out = batches | "Rows" >> EncodeRows(self._schema, self._statistics)
    return {"records": out["records"], "errors": out[ERRORS],
            "stats": out[STATS], FEATURE_STATS: out[FEATURE_STATS]}

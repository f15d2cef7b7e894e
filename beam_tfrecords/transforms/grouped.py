"""Grouped SequenceExamples in Beam: batches -> steps by bucket -> records.

    batches | EncodeGroupedSequences(schema)

1. **EncodeSteps**, per input batch, vectorized: every row becomes a step
   (`encoding.steps.StepEncoder.encode_table`), and every step goes to one
   of `buckets` buckets by a hash of its group key. One element per
   (split, bucket) of the batch: the bucket's steps as compressed Arrow IPC
   bytes, plus, under `on_bad_step: reject_group`, the rows of the
   bucket's keys that went to errors/.
2. **GroupSteps**: GroupByKey on (split, bucket). Elements are few (batches
   x buckets), not one per row or per group, so the runner's per-element
   costs do not grow with the number of groups.
3. **Assemble**, per bucket: `encoding.groups.GroupAssembler` orders the
   bucket's steps with one Arrow sort and writes every group's records at
   once; one element `(split, ("bucket", b), GroupedRecords)`. The
   deterministic sink deals its groups to shards at once and merges the
   buckets back into key order (`sinks.runs`), so the files are the same
   bytes as when each group was its own element.

Memory: a bucket's steps (compressed) while the runner groups them, and
one bucket at a time per worker thread while assembling. The number of
buckets grows with the input (`buckets_for`), so a bucket stays about
`BUCKET_BYTES` of input.
"""

from typing import Any, Dict, List, Optional

import apache_beam as beam
import numpy as np
import pyarrow as pa

from beam_tfrecords.encoding.groups import GroupAssembler
from beam_tfrecords.encoding.steps import StepEncoder, key_hash, keys_hash
from beam_tfrecords.schema import Schema, schema_from_dict
from beam_tfrecords.schema.model import OnBadStep
from beam_tfrecords.sources import SourceBatch
from beam_tfrecords.transforms.encode import (ERRORS, FEATURE_STATS, STATS,
                                              _by_split, _remapped,
                                              _row_errors, _SchemaFn, _stats,
                                              _take)

__all__ = ["EncodeGroupedSequences", "buckets_for", "BUCKET_BYTES",
           "DEFAULT_BUCKETS"]

# Input bytes per bucket that buckets_for aims at, and its bounds. Buckets
# are what the assembly is spread over (workers x threads) and what one
# assembly holds in memory.
BUCKET_BYTES = 16 << 20
MIN_BUCKETS, MAX_BUCKETS = 16, 4096
# When the input's size is not known (a PCollection).
DEFAULT_BUCKETS = 64
# Arrow IPC compression of the steps on their way to the GroupByKey:
# measured on the events benchmark, LZ4 halves them at ~1 GB/s.
_IPC = pa.ipc.IpcWriteOptions(compression="lz4")


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
  return pa.ipc.open_stream(data).read_all()


@beam.typehints.with_input_types(SourceBatch)
class _EncodeStepsFn(_SchemaFn):
  """One batch -> ((split, bucket), (source path, steps as IPC bytes,
  bad)) per bucket with steps or bad rows in the batch.

  `bad` lists, under on_bad_step: reject_group, (key, first row number,
  its reason, rows) of the bucket's keys with rows in errors/ (a group's
  rows all go to one split: the split rule reads only group_by columns).
  Outputs: main: the buckets' steps; ERRORS; STATS; FEATURE_STATS.
  Counters: as EncodeRows'.
  """

  def __init__(self, schema_dict: Dict[str, Any], buckets: int,
               threads: Optional[int] = None, statistics: bool = True):
    super().__init__(schema_dict, threads=threads, statistics=statistics)
    self._buckets = buckets

  def _build(self, schema):
    return StepEncoder(schema)

  def _work(self, batch: SourceBatch):
    parts, row_errors = _by_split(self._splits, batch)
    marks = self._encoder.schema.on_bad_step is OnBadStep.REJECT_GROUP
    known = None
    outputs = []
    described = {}
    for split, index in parts:
      known = batch.known_row_numbers() if known is None else known
      if index is None:
        steps = self._encoder.encode_table(
            batch.columns, batch.num_rows, known, stats=self._statistics)
      else:
        steps = self._encoder.encode_table(
            _take(batch.columns, index), len(index),
            [known[i] for i in index.tolist()], stats=self._statistics)
      bad = _bad_by_bucket(batch, steps, index, self._buckets) \
          if marks else {}
      outputs += self._buckets_of(split, batch.path, steps.table, bad)
      row_errors += _remapped(steps.errors, index)
      if steps.stats is not None:
        described[split] = steps.stats
    errors = _row_errors(batch, row_errors)
    if errors:
      outputs.append(beam.pvalue.TaggedOutput(ERRORS, (batch.order, errors)))
    if described:
      outputs.append(beam.pvalue.TaggedOutput(FEATURE_STATS, described))
    stats = _stats(rows_read=batch.num_rows + len(batch.errors),
                   rows_rejected=len(errors))
    outputs.append(beam.pvalue.TaggedOutput(STATS, stats))
    return outputs, stats, errors

  def _buckets_of(self, split, path, table: pa.Table, bad) -> list:
    bucket = (key_hash(table) % np.uint64(self._buckets)).astype(np.int64)
    order = np.argsort(bucket, kind="stable")
    ordered = table.take(pa.array(order))
    bounds = np.searchsorted(bucket[order], np.arange(self._buckets + 1))
    out = []
    for b in range(self._buckets):
      start, stop = int(bounds[b]), int(bounds[b + 1])
      if start == stop and b not in bad:
        continue
      out.append(((split, b), (path, _ipc_bytes(
          ordered.slice(start, stop - start)), bad.get(b, []))))
    return out


def _bad_by_bucket(batch: SourceBatch, steps, index, buckets: int
                   ) -> Dict[int, List[tuple]]:
  """bucket -> [(key, first row number, its reason, rows)] of a batch's
  rows that could not become steps of their (known) group."""
  if not steps.bad:
    return {}
  rows: Dict[tuple, list] = {}
  for key, row, reason in steps.bad:
    number = batch.row_number(row if index is None else int(index[row]))
    rows.setdefault(key, []).append((number, reason))
  keys = list(rows)
  hashes = keys_hash(keys, steps.table) % np.uint64(buckets)
  out: Dict[int, List[tuple]] = {}
  for key, h in zip(keys, hashes.tolist()):
    found = rows[key]
    first = min(found, key=lambda r: (r[0] is None, r[0] or 0, r[1]))
    out.setdefault(int(h), []).append((key,) + first + (len(found),))
  return out


class _AssembleFn(_SchemaFn):
  """((split, bucket), [(path, steps, bad)]) -> (split, ("bucket", b),
  GroupedRecords): every group of the bucket.

  Outputs: main: the records; ERRORS: ((file, -1, -1), [dead-letter
  dict]) per rejected or truncated group; STATS.
  """

  def __init__(self, schema_dict: Dict[str, Any],
               threads: Optional[int] = None):
    super().__init__(schema_dict, threads=threads)
    self._columns = [c for c, _ in schema_from_dict(schema_dict).group_by]

  def _build(self, schema):
    return GroupAssembler(schema)

  def _work(self, element):
    (split, bucket), blocks = element
    tables, bad = [], {}
    for path, data, marks in blocks:
      tables.append((path, _ipc_table(data)))
      for key, number, reason, count in marks:
        bad.setdefault(key, []).append((path, number, reason, count))
    result = self._encoder.assemble(tables, bad)
    outputs = [(split, ("bucket", bucket), result)] if len(result) else []
    rejected = dropped = 0
    errors = []
    for key, e in result.errors:
      if e.dropped:
        dropped += e.rows
      else:
        rejected += e.rows
      source = e.examples[0][0] if e.examples else None
      error = {
          "source": source, "row": None, "rows": e.rows,
          "group": dict(zip(self._columns, key)),
          "kind": "dropped" if e.dropped else "rejected",
          "reason": e.reason, "problems": [], "raw": None,
          "examples": [{"source": s, "row": r} for s, r in e.examples]}
      errors.append(error)
      # Keyed like a batch's errors; (file, -1, -1) sorts before its rows.
      outputs.append(beam.pvalue.TaggedOutput(
          ERRORS, ((source or "", -1, -1), [error])))
    written = result.rows_written
    stats = _stats(rows_written=written, rows_rejected=rejected,
                   rows_dropped=dropped, records=len(result.steps),
                   steps=written, steps_dropped=dropped)
    outputs.append(beam.pvalue.TaggedOutput(STATS, stats))
    return outputs, stats, errors


class EncodeGroupedSequences(beam.PTransform):
  """Groups rows by the schema's group_by key into SequenceExamples.

  Returns {"records", "errors", "stats", FEATURE_STATS} like `Encode`;
  "records" holds one chunk per bucket, (split, ("bucket", b),
  GroupedRecords), whose items are its groups' records in key order.

  Args:
    schema: a SequenceExample schema with group_by.
    statistics: whether to describe the features (FEATURE_STATS).
    buckets: how many buckets the steps are spread over (see
      `buckets_for`; None: DEFAULT_BUCKETS); the output does not depend
      on it.
  """

  def __init__(self, schema: Schema, statistics: bool = True,
               buckets: Optional[int] = None):
    super().__init__()
    self._schema = schema
    self._statistics = statistics
    self._buckets = buckets or DEFAULT_BUCKETS

  def expand(self, batches):
    schema_dict = self._schema.to_dict()
    steps = batches | "EncodeSteps" >> beam.ParDo(
        _EncodeStepsFn(schema_dict, self._buckets,
                       statistics=self._statistics)).with_outputs(
            ERRORS, STATS, FEATURE_STATS, main="steps")
    assembled = (steps.steps
                 # ((split, bucket), (path, steps, bad))
                 | "GroupSteps" >> beam.GroupByKey()
                 # ((split, bucket), [(path, steps, bad), ...])
                 | "Assemble" >> beam.ParDo(_AssembleFn(schema_dict))
                 .with_outputs(ERRORS, STATS, main="records"))
    return {
        "records": assembled.records,
        "errors": (steps[ERRORS], assembled[ERRORS])
                  | "Errors" >> beam.Flatten(),
        "stats": (steps[STATS], assembled[STATS]) | "Stats" >> beam.Flatten(),
        FEATURE_STATS: steps[FEATURE_STATS],
    }

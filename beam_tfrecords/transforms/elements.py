"""A user's PCollection (dicts or Arrow record batches) as SourceBatches.

Rows from a PCollection have no file and no row number, and they arrive in
an order the runner chooses. So that the same content gives the same bytes
on every run and worker count, batches are made from the content:

* dict rows are keyed by a digest of their content (canonical JSON), dealt
  into ROW_BUCKETS buckets by it (a GroupByKey), and each bucket's rows are
  sorted by digest and cut into batches of at most BATCH_ROWS;
* a `pyarrow.RecordBatch` (or Table) stays one batch, ordered by a digest
  of its Arrow IPC bytes.

Each row's dead-letter entry names it by `element`: the row's digest, or
the batch's digest and the row's index in it (`<digest>:<index>`).
"""

import base64
import datetime
import decimal
import hashlib
import json
from typing import Any, Iterable, Mapping, Optional, Sequence

import apache_beam as beam
import pyarrow as pa

from beam_tfrecords.runners.gaps import par_do
from beam_tfrecords.sources import read_columns, source_paths, with_paths
from beam_tfrecords.sources.base import SourceBatch, row_columns

__all__ = ["ToSourceBatches", "PCOLLECTION", "row_digest"]

# The `source` of rows that came from a PCollection.
PCOLLECTION = "<pcollection>"
# Dict rows are grouped into this many buckets (a bucket's rows are held
# and sorted in memory: 100 M rows make ~100 k rows a bucket).
ROW_BUCKETS = 1024
BATCH_ROWS = 8192


def _plain(value: Any) -> Any:
  if isinstance(value, bytes):
    return {"$bytes": base64.b64encode(value).decode("ascii")}
  if isinstance(value, (decimal.Decimal, datetime.date, datetime.time,
                        datetime.datetime)):
    return str(value)
  if hasattr(value, "tolist"):  # numpy arrays and scalars
    return value.tolist()
  return repr(value)


def row_digest(row: Mapping[str, Any]) -> str:
  """A digest of a row's content: keys and values, not their order."""
  text = json.dumps(row, sort_keys=True, default=_plain, ensure_ascii=False,
                    separators=(",", ":"))
  return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def _batch_digest(batch: pa.RecordBatch) -> str:
  sink = pa.BufferOutputStream()
  with pa.ipc.new_stream(sink, batch.schema) as writer:
    writer.write_batch(batch)
  return hashlib.blake2b(sink.getvalue().to_pybytes(),
                         digest_size=12).hexdigest()


def _columns_of(batch: pa.RecordBatch, columns: Optional[Sequence[str]]):
  """The batch's columns the schema reads (absent ones: all missing;
  paths into nested columns resolved, see sources.nested_columns)."""
  names = batch.schema.names
  paths = source_paths(columns, "parquet")
  wanted = names if columns is None else read_columns(columns, paths)
  found = {c: (batch.column(names.index(c)) if c in names
               else pa.nulls(batch.num_rows)) for c in wanted}
  if not paths:
    return found
  assert columns is not None  # the paths are among them
  return with_paths(found, columns, paths)


def _row_columns(rows, columns: Optional[Sequence[str]]):
  """Dict rows -> the columns the schema reads (paths resolved)."""
  paths = source_paths(columns, "jsonl")
  found = row_columns(rows, read_columns(columns, paths))
  if not paths:
    return found
  assert columns is not None  # the paths are among them
  return with_paths(found, columns, paths)


def _element_error(element: Any) -> TypeError:
  text = repr(element)
  return TypeError(
      "WriteDataset / EncodeRecords take rows as dicts (column -> value) or "
      "pyarrow.RecordBatch / pyarrow.Table elements; got "
      f"{type(element).__name__}: {text[:120]}"
      + ("…" if len(text) > 120 else ""))


class _Route(beam.DoFn):
  """SourceBatches pass; record batches become one; dict rows are keyed
  (bucket, (digest, row)) for the grouping."""

  def __init__(self, columns: Optional[Sequence[str]]):
    self._columns = None if columns is None else list(columns)

  def process(self, element):
    if isinstance(element, SourceBatch):
      yield beam.pvalue.TaggedOutput("batches", element)
    elif isinstance(element, Mapping):
      digest = row_digest(element)
      yield int(digest[:8], 16) % ROW_BUCKETS, (digest, dict(element))
    elif isinstance(element, (pa.RecordBatch, pa.Table)):
      batches = ([element] if isinstance(element, pa.RecordBatch)
                 else element.combine_chunks().to_batches())
      for batch in batches:
        if batch.num_rows:
          digest = _batch_digest(batch)
          yield beam.pvalue.TaggedOutput("batches", SourceBatch(
              path=PCOLLECTION, first_row=None,
              columns=_columns_of(batch, self._columns),
              num_rows=batch.num_rows, order=(PCOLLECTION, "batch-" + digest,
                                              0),
              elements=[f"{digest}:{i}" for i in range(batch.num_rows)]))
    else:
      raise _element_error(element)


def _bucket_batches(columns: Optional[Sequence[str]]):
  def batches(keyed) -> Iterable[SourceBatch]:
    bucket, items = keyed
    items = sorted(items, key=lambda item: item[0])
    for number, start in enumerate(range(0, len(items), BATCH_ROWS)):
      taken = items[start:start + BATCH_ROWS]
      rows = [row for _, row in taken]
      yield SourceBatch(
          path=PCOLLECTION, first_row=None,
          columns=_row_columns(rows, None if columns is None
                              else list(columns)),
          num_rows=len(rows), order=(PCOLLECTION, f"rows-{bucket:04d}", number),
          elements=[digest for digest, _ in taken])
  return batches


class ToSourceBatches(beam.PTransform):
  """dicts / RecordBatches / Tables (or SourceBatches, passed on) ->
  SourceBatches ordered by content.

  Args:
    columns: the columns the schema reads (None: every column).
  """

  def __init__(self, columns: Optional[Sequence[str]] = None):
    super().__init__()
    self._columns = None if columns is None else list(columns)

  def expand(self, elements):
    routed = par_do(elements, "Route", _Route(self._columns), ("batches",),
                    main="rows")
    from_rows = (routed["rows"]
                 | "GroupRows" >> beam.GroupByKey()
                 | "RowBatches" >> beam.FlatMap(
                     _bucket_batches(self._columns)))
    return (routed["batches"], from_rows) | "Batches" >> beam.Flatten()

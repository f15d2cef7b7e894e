"""Existing TFRecord files of tf.train.Example -> Arrow batches.

Each record is one row; each feature of the Example is a column of the
same name (`source:` picks another). Records are decoded in batches by
tfx-bsl's C++ `ExamplesToRecordBatchDecoder`: a feature becomes a list
column (int64, float32 or binary values). A feature the schema declares
as a scalar (shape []) takes the single value of its list; an empty list
is a missing value, and a longer list is passed on so the row is
rejected with its length.

Rows are numbered by record, from 1 in each file. A record that is not a
tf.train.Example (a SequenceExample, or not a protocol buffer at all)
goes to errors/ with its reason. A file whose framing is broken (a
truncated record, a CRC that does not match) fails the build: the records
after it cannot be found, so they cannot be accounted for.

gzip files are recognised by their `.gz` suffix (`--tfrecord-compression
gzip|none` says otherwise). Files are not split: one worker reads each.
"""

from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.errors import InputError
from beam_tfrecords.records import iter_tfrecords
from beam_tfrecords.sources.base import (Format, InputFile, ReadError,
                                         ReadUnit, SourceBatch,
                                         register_format, row_columns)

__all__ = ["TFRecordFormat", "decode_examples", "scalars"]

# Records per batch handed to the encoder.
BATCH_ROWS = 8192


def _is_example(record: bytes) -> bool:
  """Whether the record's top level is at most one Example.features field
  (tag 0x0a): a SequenceExample also has feature_lists (tag 0x12), which
  an Example decoder would silently ignore."""
  n = len(record)
  if n == 0:
    return True
  if record[0] != 0x0A:
    return False
  length, shift, pos = 0, 0, 1
  while pos < n and shift < 64:
    byte = record[pos]
    length |= (byte & 0x7F) << shift
    pos += 1
    if not byte & 0x80:
      return pos + length == n
    shift += 7
  return False


def _not_example_reason(record: bytes) -> str:
  from beam_tfrecords.records import decode_sequence_example
  try:
    decode_sequence_example(record)
    return ("the record is a tf.train.SequenceExample, not a "
            "tf.train.Example; --format tfrecord reads Examples")
  except Exception:  # pylint: disable=broad-except
    return "the record is not a tf.train.Example (it does not parse)"


def _raw(record: bytes) -> str:
  text = repr(record[:200])
  return text + (f"... ({len(record)} bytes)" if len(record) > 200 else "")


def decode_examples(records: Sequence[bytes]):
  """(columns, kept, errors): columns by feature name for the records
  that are Examples (kept: their indexes), errors: index -> reason."""
  from tfx_bsl.coders.example_coder import ExamplesToRecordBatchDecoder
  decoder = ExamplesToRecordBatchDecoder()
  errors = {i: _not_example_reason(r) for i, r in enumerate(records)
            if not _is_example(r)}
  kept = [i for i in range(len(records)) if i not in errors]
  good = [records[i] for i in kept]
  try:
    batch = decoder.DecodeBatch(good)
    return {n: batch.column(i) for i, n in enumerate(batch.schema.names)}, \
        kept, errors
  except Exception:  # pylint: disable=broad-except
    pass
  # A record that does not parse, or a feature whose kind differs between
  # records: one by one, values as Python values.
  rows: List[Optional[Dict[str, Any]]] = []
  for i, record in zip(kept, good):
    try:
      rows.append({k: v[0] for k, v in
                   decoder.DecodeBatch([record]).to_pydict().items()})
    except Exception as e:  # pylint: disable=broad-except
      errors[i] = f"the record is not a tf.train.Example ({e})"
      rows.append(None)
  kept = [i for i, row in zip(kept, rows) if row is not None]
  return row_columns([row for row in rows if row is not None]), kept, errors


def scalars(column):
  """A list column -> one value per row where every list holds at most one
  (an empty list is missing); else Python values, a list kept as it is
  where it holds several, so that the row is rejected with its length."""
  if isinstance(column, list):
    return [v[0] if isinstance(v, list) and len(v) == 1 else
            (None if v == [] else v) for v in column]
  if not pa.types.is_large_list(column.type) and \
      not pa.types.is_list(column.type):
    return column
  lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(
      zero_copy_only=False)
  if len(lengths) and lengths.max() > 1:
    return scalars(column.to_pylist())
  flat = pc.list_flatten(column)
  index = np.cumsum(lengths) - 1
  return flat.take(pa.array(index, mask=lengths != 1))


class TFRecordFormat(Format):
  name = "tfrecord"
  extensions = (".tfrecord", ".tfrecords", ".tfr")
  splittable = False

  def check(self, files: Sequence[InputFile], columns: Sequence[str],
            options: Mapping[str, Any]) -> Dict[str, Any]:
    opts = dict(options)
    compression = opts.get("compression")
    if compression not in (None, "gzip", "none"):
      raise InputError(f"--tfrecord-compression must be gzip or none, got "
                       f"{compression!r}")
    opts["scalar_columns"] = tuple(opts.get("scalar_columns", ()))
    return opts

  def read(self, unit: ReadUnit, columns: Optional[Sequence[str]]
           ) -> Iterator[SourceBatch]:
    opts = unit.option_dict
    scalar = set(opts.get("scalar_columns", ()))
    records: List[bytes] = []
    first = 1
    try:
      for record in iter_tfrecords(unit.path, opts.get("compression")):
        records.append(record)
        if len(records) >= BATCH_ROWS:
          yield self._batch(unit.path, first, records, columns, scalar)
          first += len(records)
          records = []
    except ValueError as e:  # framing: truncated, or a CRC mismatch
      raise InputError(
          f"{e} (after {first + len(records) - 1} good records); the rest "
          "of the file cannot be read, so the build stops. Rewrite the "
          "file, or leave it out of --input") from e
    except OSError as e:
      raise InputError(f"{unit.path}: cannot read it as a TFRecord file "
                       f"({e}); is it gzip? (--tfrecord-compression)") from e
    if records:
      yield self._batch(unit.path, first, records, columns, scalar)

  @staticmethod
  def _batch(path, first, records, columns, scalar) -> SourceBatch:
    decoded, kept, errors = decode_examples(records)
    wanted = decoded if columns is None else {
        c: decoded[c] for c in columns if c in decoded}
    out = {c: scalars(a) if c in scalar else a for c, a in wanted.items()}
    return SourceBatch(
        path=path, first_row=first, columns=out, num_rows=len(kept),
        errors=[ReadError(row=first + i, raw=_raw(records[i]), reason=r)
                for i, r in sorted(errors.items())],
        numbers=None if not errors else [first + i for i in kept])


register_format(TFRecordFormat())

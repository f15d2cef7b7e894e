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

gzip files are recognised by a `.gz` suffix or by their first bytes
(`--tfrecord-compression gzip|none` says). Files are not split: one
worker reads each. Batches hold up to 8,192 records and 16 MiB.
"""

from typing import (Any, Collection, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Tuple, Union)

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.core.errors import InputError, ShardDamagedError
from beam_tfrecords.core.shard_reader import iter_tfrecords
from beam_tfrecords.core.tfrecord_files import proto_fields, read_varint
from beam_tfrecords.sources.base import (Format, InputFile, ReadError, ReadUnit,
                                         SourceBatch, register_format)

__all__ = ["TFRecordFormat", "decode_examples", "scalars", "unwrap_scalars"]

# Records per batch handed to the encoder, and at most this many bytes of
# them (records can be images).
BATCH_ROWS = 8192
BATCH_BYTES = 16 << 20


def _has_feature_lists(record: bytes) -> bool:
  """Whether the record's top level has a SequenceExample's feature_lists
  (field 2, length-delimited), which an Example decoder would silently
  drop. Anything else (repeated or unknown fields, garbage) is left to
  the decoder."""
  try:
    if record and record[0] == 0x0A:  # the usual Example: one field 1
      length, pos = read_varint(record, 1)
      if pos + length == len(record):
        return False
    return any(field == 2 and wire == 2
               for field, wire, _ in proto_fields(record))
  except (IndexError, ValueError):
    return False


def _not_example_reason(record: bytes) -> str:
  from beam_tfrecords.core.tfrecord_files import decode_sequence_example
  try:
    decode_sequence_example(record)
    return ("the record is a tf.train.SequenceExample, not a "
            "tf.train.Example; --format tfrecord reads Examples")
  except Exception:  # pylint: disable=broad-except
    return "the record is not a tf.train.Example (it does not parse)"


def _raw(record: bytes) -> str:
  text = repr(record[:200])
  return text + (f"... ({len(record)} bytes)" if len(record) > 200 else "")


def _decode_ranges(decoder, records, lo, hi, out):
  """Decodes records[lo:hi] in as few pieces as the decoder allows: it
  refuses a batch with a record that does not parse, or a feature whose
  kind differs between records. Appends (lo, hi, RecordBatch or reason)."""
  try:
    out.append((lo, hi, decoder.DecodeBatch(records[lo:hi])))
  except Exception as e:  # pylint: disable=broad-except
    if hi - lo == 1:
      out.append((lo, hi, f"the record is not a tf.train.Example ({e})"))
    else:
      mid = (lo + hi) // 2
      _decode_ranges(decoder, records, lo, mid, out)
      _decode_ranges(decoder, records, mid, hi, out)


def _is_list(column) -> bool:
  return pa.types.is_large_list(column.type) or pa.types.is_list(column.type)


def _has_values(column) -> bool:
  """(A feature with no kind set decodes as a null column.)"""
  return _is_list(column) and bool(
      pc.sum(pc.list_value_length(column)).as_py() or 0)


def _merge(pieces):
  """One column from the pieces' (None: the piece lacks the feature):
  typed when the pieces that hold values agree on the kind (pieces of
  empty lists of another kind take it), else Python values."""
  kinds = {p.type for _, p in pieces if p is not None and _has_values(p)}
  if len(kinds) > 1:
    values: List[Any] = []
    for n, p in pieces:
      values += [None] * n if p is None else p.to_pylist()
    return values
  present = [p for _, p in pieces if p is not None and _is_list(p)]
  if not kinds and not present:
    return pa.nulls(sum(n for n, _ in pieces))
  kind = kinds.pop() if kinds else present[0].type
  out = []
  for n, p in pieces:
    if p is None or not _is_list(p):
      out.append(pa.nulls(n, kind))
    elif p.type != kind:  # empty lists (or nulls) of another kind
      offsets = pc.fill_null(p.offsets, 0) if p.offsets.null_count else \
          p.offsets
      out.append(pa.LargeListArray.from_arrays(
          pc.cast(offsets, pa.int64()), pa.array([], kind.value_type),
          mask=p.is_null()))
    else:
      out.append(p)
  return pa.concat_arrays(out)


def decode_examples(records: Sequence[bytes]):
  """(columns, kept, errors): columns by feature name for the records
  that are Examples (kept: their indexes), errors: index -> reason."""
  from tfx_bsl.coders.example_coder import ExamplesToRecordBatchDecoder
  decoder = ExamplesToRecordBatchDecoder()
  errors = {i: _not_example_reason(r) for i, r in enumerate(records)
            if _has_feature_lists(r)}
  candidates = [i for i in range(len(records)) if i not in errors]
  good = [records[i] for i in candidates]
  # (lo, hi, RecordBatch or the reason it did not decode)
  ranges: List[Tuple[int, int, Union[pa.RecordBatch, str]]] = []
  _decode_ranges(decoder, good, 0, len(good), ranges)
  batches = []
  for lo, hi, decoded in ranges:
    if isinstance(decoded, str):
      errors[candidates[lo]] = decoded
    else:
      batches.append((hi - lo, decoded))
  kept = [candidates[j] for lo, hi, decoded in ranges
          if not isinstance(decoded, str) for j in range(lo, hi)]
  if len(batches) == 1:
    batch = batches[0][1]
    return dict(zip(batch.schema.names, batch.columns)), kept, errors
  names = list(dict.fromkeys(n for _, b in batches for n in b.schema.names))
  columns = {name: _merge([(n, b.column(name) if name in b.schema.names
                            else None) for n, b in batches])
             for name in names}
  return columns, kept, errors


def scalars(column):
  """A list column -> one value per row where every list holds at most one
  (an empty list is missing); else Python values, a list kept as it is
  where it holds several, so that the row is rejected with its length."""
  if isinstance(column, list):
    return [v[0] if isinstance(v, list) and len(v) == 1 else
            (None if v == [] else v) for v in column]
  if not _is_list(column):
    return column
  lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(
      zero_copy_only=False)
  if len(lengths) and lengths.max() > 1:
    return scalars(column.to_pylist())
  flat = pc.list_flatten(column)
  index = np.cumsum(lengths) - 1
  return flat.take(pa.array(index, mask=lengths != 1))


def unwrap_scalars(batch: SourceBatch,
                   scalar: Collection[str]) -> SourceBatch:
  """The batch with its `scalar` columns holding single values."""
  if not scalar:
    return batch
  batch.columns = {c: scalars(a) if c in scalar else a
                   for c, a in batch.columns.items()}
  return batch


class TFRecordFormat(Format):
  name = "tfrecord"
  extensions = (".tfrecord", ".tfrecords", ".tfr")
  chunkable = False

  def check(self, files: Sequence[InputFile], columns: Sequence[str],
            format_options: Mapping[str, Any]) -> Dict[str, Any]:
    opts = dict(format_options)
    compression = opts.get("compression")
    if compression not in (None, "gzip", "none"):
      raise InputError(f"--tfrecord-compression must be gzip or none, got "
                       f"{compression!r}")
    opts["scalar_columns"] = tuple(opts.get("scalar_columns", ()))
    return opts

  def read(self, unit: ReadUnit, columns: Optional[Sequence[str]]
           ) -> Iterator[SourceBatch]:
    opts = unit.option_dict
    # With --preprocess (columns None) the function gets the lists, and
    # the single values are taken from what it returns (reader.py).
    scalar = () if columns is None else set(opts.get("scalar_columns", ()))
    records: List[bytes] = []
    first, size = 1, 0
    try:
      for record in iter_tfrecords(unit.path, opts.get("compression")):
        records.append(record)
        size += len(record)
        if len(records) >= BATCH_ROWS or size >= BATCH_BYTES:
          yield self._batch(unit.path, first, records, columns, scalar)
          first += len(records)
          records, size = [], 0
    except ShardDamagedError as e:  # cut, a CRC, gzip that is not
      good = first + len(records) - 1
      if e.cut:
        raise InputError(
            f"{unit.path}: the file ends early ({e.reason}): it is "
            f"truncated (an interrupted download or copy?) after {good} "
            "good records; replace it or leave it out of --input. Nothing "
            "from this build is published.") from e
      if e.member == 0 and e.offset == 0:  # no gzip from its first byte
        raise InputError(
            f"{unit.path}: cannot read it as a TFRecord file after {good} "
            f"good records ({e.reason}); is it gzip? "
            "(--tfrecord-compression gzip|none)") from e
      raise InputError(
          f"{unit.path}: {e.reason}: the file is damaged after {good} good "
          "records, so the build stops. Replace or rewrite it, or leave it "
          "out of --input. Nothing from this build is published.") from e
    except OSError as e:
      raise InputError(f"{unit.path}: cannot read it ({e})") from e
    if records:
      yield self._batch(unit.path, first, records, columns, scalar)

  @staticmethod
  def _batch(path, first, records, columns, scalar) -> SourceBatch:
    decoded, kept, errors = decode_examples(records)
    wanted = decoded if columns is None else {
        c: decoded[c] for c in columns if c in decoded}
    return unwrap_scalars(SourceBatch(
        path=path, first_row=first, columns=wanted, num_rows=len(kept),
        errors=[ReadError(row=first + i, raw=_raw(records[i]), reason=r)
                for i, r in sorted(errors.items())],
        numbers=None if not errors else [first + i for i in kept]), scalar)


register_format(TFRecordFormat())

"""Rows whose cells hold lists -> serialized tf.train.SequenceExample.

A SequenceExample schema without `group_by`: each sequence feature's cell
holds the list of the row's steps (`convert_steps`), and each row
becomes one sequence, or, past `max_length` steps, what `overflow` says:
the row is rejected, cut to its first / last steps, or split into several
sequences. Vectorized over a whole batch, like Examples. No Beam here.
"""

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.encoding import columns as col
from beam_tfrecords.encoding import messages, wire
from beam_tfrecords.encoding.example import EncodedBatch, row_errors
from beam_tfrecords.encoding.ragged import offsets_of, ranges
from beam_tfrecords.encoding.sequences import (SchemaSource, check_sequence,
                                               convert_feature)
from beam_tfrecords.encoding import histogram
from beam_tfrecords.encoding.stats import column_stats
from beam_tfrecords.schema import Derive, Feature, Overflow, Schema
from beam_tfrecords.schema.model import FeatureType
from beam_tfrecords.schema.values import parse_json

__all__ = ["SequenceEncoder", "sequence_stats", "Steps", "convert_steps"]


# Columns whose cells are lists of steps -> the steps, converted.

@dataclasses.dataclass
class Steps:
  """One sequence feature of n rows, each row's cell a list of steps.

  Attributes:
    values: one entry per step (all rows back to back), the step's values;
      null where the step's value is missing.
    offsets: n+1 offsets of each row's first step in `values`.
    present: per row, whether the cell held a list (False: missing).
    errors: row -> reason.
  """
  values: pa.LargeListArray
  offsets: np.ndarray
  present: np.ndarray
  errors: col.RowErrors

  @property
  def counts(self) -> np.ndarray:
    return np.diff(self.offsets)


def _step_list(feature: Feature, cell: Any) -> list:
  """The steps one cell holds (Python path)."""
  if isinstance(cell, (list, tuple)):
    return list(cell)
  if isinstance(cell, (str, bytes)):
    if feature.separator is not None:
      # Bytes are split as bytes: each step is then judged by the value
      # rules (a `string` step that is not UTF-8 is an error, not U+FFFD).
      if len(cell) == 0:
        return []
      if isinstance(cell, str):
        return cell.split(feature.separator)
      return cell.split(feature.separator.encode("utf-8"))
    try:
      text = cell.decode("utf-8") if isinstance(cell, bytes) else cell
    except UnicodeDecodeError as e:
      raise ValueError(f"the cell is not valid UTF-8 (byte {e.start}) and "
                       "so not a JSON list of steps") from None
    if text.strip().startswith("["):
      try:
        parsed = parse_json(text)
      except ValueError as e:
        raise ValueError(f"could not parse {text[:60]!r} as a JSON list of "
                         f"steps: {e}") from None
      except RecursionError:  # "[[[[..." thousands deep
        raise ValueError(f"could not parse {text[:60]!r} as a JSON list of "
                         "steps: it is nested too deep to read") from None
      if isinstance(parsed, list):
        return parsed
  raise ValueError(f"expected a list of steps (a JSON or Parquet list, or "
                   f"text split by `separator`), got {type(cell).__name__} "
                   f"{str(cell)[:60]!r}")


def _flat_cells(cells: list) -> Any:
  """An Arrow array of step cells when the types allow, else the list."""
  try:
    array = pa.array(cells)
    array.validate(full=True)  # e.g. bytes that are not UTF-8 in a string
    return array
  except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
    return cells


def convert_steps(feature: Feature, array: Any, num_rows: int) -> Steps:
  """Converts a column whose cells are lists of steps (a sequence feature
  without group_by): JSON lists, Parquet lists, lists of lists, JSON text or
  text split by the feature's separator.

  Each step is converted like an Example cell of the feature's (step) shape;
  a missing step takes the default, is an error when required, and is
  otherwise an empty step.
  """
  step_feature = dataclasses.replace(feature, separator=None)
  errors: col.RowErrors = {}
  if array is None:
    return Steps(pa.nulls(0, col.list_type(feature)),
                 np.zeros(num_rows + 1, dtype=np.int64),
                 np.zeros(num_rows, dtype=bool), errors)
  if isinstance(array, pa.ChunkedArray):
    array = array.combine_chunks()
  if isinstance(array, pa.Array) and pa.types.is_dictionary(array.type):
    array = array.dictionary_decode()
  if (isinstance(array, pa.Array) and col.is_text(array.type)
      and feature.separator is not None
      and not pc.any(pc.equal(pc.binary_length(array), 0)).as_py()):
    try:
      text = array if feature.type is FeatureType.BYTES else col.as_utf8(array)
      array = pc.split_pattern(text, feature.separator)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
      pass  # e.g. invalid UTF-8: the Python path says which row
  cells = None
  if isinstance(array, pa.Array) and col.is_list(array.type):
    if pa.types.is_fixed_size_list(array.type):
      array = pc.cast(array, pa.large_list(array.type.value_type))
    offsets = np.asarray(array.offsets, dtype=np.int64)
    present = array.is_valid().to_numpy(zero_copy_only=False)
    if not (array.null_count and np.any(np.diff(offsets)[~present])):
      start, end = int(offsets[0]), int(offsets[-1])
      cells = array.values.slice(start, end - start)
      offsets = offsets - start
  if cells is None:  # the Python path: text cells, mixed types
    pylist = array.to_pylist() if isinstance(array, pa.Array) else list(array)
    flat: list = []
    offsets = np.zeros(num_rows + 1, dtype=np.int64)
    present = np.zeros(num_rows, dtype=bool)
    for row, cell in enumerate(pylist):
      if cell is not None:
        try:
          flat.extend(_step_list(feature, cell))
          present[row] = True
        except ValueError as e:
          errors[row] = str(e)
      offsets[row + 1] = len(flat)
    cells = _flat_cells(flat)
  if isinstance(cells, list):
    values, step_errors = col.convert_cells(step_feature, cells)
  else:
    values, step_errors = col.convert_column(step_feature, cells, len(cells))
  values = col.apply_missing(step_feature, values, step_errors)
  if step_errors:
    steps = np.fromiter(step_errors, dtype=np.int64)
    rows = np.searchsorted(offsets, steps, side="right") - 1
    for step, row in sorted(zip(steps.tolist(), rows.tolist())):
      errors.setdefault(row, f"at step {step - int(offsets[row])}: "
                        f"{step_errors[step]}")
  return Steps(values, offsets, present, errors)


# row -> [(feature name, reason)]
_Problems = Dict[int, List[Tuple[str, str]]]
# What the statistics describe: (feature, its lists per record, and for a
# feature list the steps per record).
_Described = List[Tuple[Feature, pa.LargeListArray, Optional[np.ndarray]]]


class SequenceEncoder:
  """Encodes rows whose sequence cells hold lists of steps (no group_by).

  Each row becomes one SequenceExample, or, past `max_length` steps, what
  the `overflow` policy says (reject the row, keep the first/last steps, or
  split it into several sequences). Feature lists of one row must have the
  same number of steps unless the schema says `ragged: true`.

  Args:
    schema: a SequenceExample schema (Schema, dict or path) without group_by.
  """

  def __init__(self, schema: SchemaSource):
    self._schema = check_sequence(schema)
    if self._schema.group_by:
      raise ValueError("a schema with group_by is encoded by StepEncoder and "
                       "SequenceAssembler")

  @property
  def schema(self) -> Schema:
    return self._schema

  def __reduce__(self):
    return (SequenceEncoder, (self._schema.to_dict(),))

  def encode(self, batch: pa.RecordBatch) -> EncodedBatch:
    return self.encode_columns(col.batch_columns(batch), batch.num_rows)

  def encode_rows(self, rows: Sequence[Mapping[str, Any]]) -> EncodedBatch:
    columns = {c: [row.get(c) for row in rows] for c in self._schema.columns}
    return self.encode_columns(columns, len(rows))

  def encode_columns(self, columns: Mapping[str, Any], n: int,
                     stats: bool = False) -> EncodedBatch:
    """Records of n rows; with `stats`, also describes each feature of the
    written records (a sequence feature: its values over all steps, and
    `steps_min` / `steps_max` per sequence)."""
    s = self._schema
    problems: _Problems = {}

    def note(name: str, errors: col.RowErrors) -> None:
      for row, reason in errors.items():
        problems.setdefault(row, []).append((name, reason))

    context: List[Tuple[Feature, pa.LargeListArray]] = []
    for f in s.context:
      if f.column is None:
        continue
      lists, errors = convert_feature(f, columns, n)
      note(f.name, errors)
      context.append((f, lists))
    steps: List[Tuple[Feature, Steps]] = []
    for f in s.sequence:
      st = convert_steps(f, col.input_of(f, columns), n)
      if f.required:
        for row in np.nonzero(~st.present)[0].tolist():
          st.errors.setdefault(int(row), f'required list is missing (column '
                               f'"{f.column}" has no value)')
      note(f.name, st.errors)
      steps.append((f, st))
    counts = np.stack([np.where(st.present, st.counts, -1)
                       for _, st in steps])              # (features, rows)
    length = counts.max(axis=0).clip(min=0)
    if not s.ragged and len(steps) > 1:
      lo = np.where(counts < 0, np.iinfo(np.int64).max, counts).min(axis=0)
      for row in np.nonzero((lo < length) & (length > 0))[0].tolist():
        detail = ", ".join(f"{f.name} has {int(counts[i, row])} steps"
                           for i, (f, _) in enumerate(steps)
                           if counts[i, row] >= 0)
        problems.setdefault(row, []).append((
            "*", f"the feature lists differ in length: {detail}; give "
            "them the same length or declare ragged: true"))
    # Pieces: (row, first step, steps); one per row unless split.
    max_len = s.max_length
    rows = np.arange(n, dtype=np.int64)
    begin = np.zeros(n, dtype=np.int64)
    if max_len is not None:
      long_rows = np.nonzero(length > max_len)[0]
      if s.overflow is Overflow.REJECT:
        for row in long_rows.tolist():
          problems.setdefault(row, []).append((
              "*", f"the sequence has {int(length[row])} steps, more than "
              f"max_length {max_len} (overflow: reject); raise max_length or "
              "choose overflow: split / keep_first / keep_last"))
    good = np.ones(n, dtype=bool)
    if problems:
      good[list(problems)] = False
    rows, length = rows[good], length[good]
    begin = begin[good]
    dropped = np.zeros(len(rows), dtype=np.int64)  # steps left out, per piece
    number = np.zeros(len(rows), dtype=np.int64)
    if max_len is not None and s.overflow is not Overflow.REJECT:
      if s.overflow is Overflow.SPLIT:
        pieces = np.maximum(1, -(-length // max_len))
        rows = np.repeat(rows, pieces)
        number = ranges(np.zeros(len(pieces), dtype=np.int64), pieces)
        total = np.repeat(length, pieces)
        begin = number * max_len
        length = np.minimum(max_len, total - begin)
        dropped = np.zeros(len(rows), dtype=np.int64)
      else:
        dropped = np.maximum(length - max_len, 0)
        if s.overflow is Overflow.KEEP_LAST:
          begin = np.maximum(length - max_len, 0)
        length = np.minimum(length, max_len)
    return self._assemble(rows, begin, length, number, context, steps,
                          problems, dropped, stats)

  def _assemble(self, rows: np.ndarray, begin: np.ndarray,
                length: np.ndarray, number: np.ndarray,
                context: List[Tuple[Feature, pa.LargeListArray]],
                steps: List[Tuple[Feature, Steps]], problems: _Problems,
                dropped: np.ndarray, stats: bool = False) -> EncodedBatch:
    """The records of the pieces (rows[i]'s steps begin[i] ..
    begin[i] + length[i], its number[i]-th piece)."""
    s = self._schema
    take = pa.array(rows)
    described: _Described = []
    ctx_fields: List[messages.Field] = []
    by_name = dict(context)
    lengths_of: Dict[str, np.ndarray] = {}
    list_fields: List[messages.Field] = []
    for f, st in steps:
      row_steps = st.counts[rows]
      # This piece's steps of this feature (fewer when ragged).
      # Step i of every feature list is the same time step, so a piece
      # covers the same step indices in each (fewer where a list is short).
      n_steps = np.clip(row_steps - begin, 0, length)
      index = ranges(st.offsets[rows] + begin, n_steps)
      values = st.values.take(pa.array(index)) if len(index) else \
          st.values.slice(0, 0)
      feats = messages.feature_values(messages.typed(f, values))
      body = messages.steps_column(feats, offsets_of(n_steps))
      present = st.present[rows]
      lengths_of[f.name] = n_steps
      list_fields.append(messages.Field(f.name, body, present))
      if stats:
        described.append((f, _per_sequence(values, n_steps, present),
                          n_steps))
    for f in s.context:
      if f.derive is Derive.LENGTH or f.derive is Derive.PART:
        value = number if f.derive is Derive.PART else (
            lengths_of[f.of] if f.of else length).astype(np.int64)
        ctx_fields.append(messages.Field(f.name, messages.int64_column(
            value, np.arange(len(value) + 1)),
                                        np.ones(len(value), dtype=bool)))
        if stats:
          described.append((f, pa.LargeListArray.from_arrays(
              pa.array(np.arange(len(value) + 1)), pa.array(value)), None))
      else:
        lists = by_name[f].take(take)
        ctx_fields.append(messages.Field(
            f.name, messages.typed(f, lists),
            lists.is_valid().to_numpy(zero_copy_only=False)))
        if stats:
          described.append((f, lists, None))
    records = messages.sequence_examples(
        wire.sorted_by_name(ctx_fields), wire.sorted_by_name(list_fields),
        len(rows))
    too_big = records.lengths > s.max_record_bytes
    if too_big.any():
      for i in np.nonzero(too_big)[0].tolist():
        problems.setdefault(int(rows[i]), []).append((
            "*", f"the record would be {int(records.lengths[i]):,} bytes, "
            f"over max_record_bytes {s.max_record_bytes:,}; set max_length "
            "with overflow: split"))
      # A row split into pieces is rejected whole.
      keep = np.nonzero(~np.isin(rows, rows[too_big]))[0]
      records = records.take(keep)
      rows, length, dropped = rows[keep], length[keep], dropped[keep]
      if stats:
        described = [(f, lists.take(pa.array(keep)),
                      None if n_steps is None else n_steps[keep])
                     for f, lists, n_steps in described]
    return EncodedBatch(records=records, rows=rows,
                        errors=row_errors(problems),
                        steps=length.astype(np.int64),
                        dropped_steps=int(dropped.sum()),
                        stats={f.name: sequence_stats(f, lists, n_steps)
                               for f, lists, n_steps in described}
                        if stats else None)


def _per_sequence(values: pa.LargeListArray, n_steps: np.ndarray,
                  present: np.ndarray) -> pa.LargeListArray:
  """Per-step lists -> one list per sequence of all its steps' values
  (null where the sequence has no such feature list)."""
  per_step = pc.fill_null(pc.list_value_length(values), 0).to_numpy(
      zero_copy_only=False).astype(np.int64)
  offsets = offsets_of(per_step)[offsets_of(n_steps.astype(np.int64))]
  return pa.LargeListArray.from_arrays(
      pa.array(offsets), pc.list_flatten(values),
      mask=pa.array(~present.astype(bool)))


def sequence_stats(feature: Feature, lists: pa.LargeListArray,
                   n_steps: Optional[np.ndarray]) -> dict:
  """column_stats of a feature's values per record; for a feature list,
  also the steps per record that has it (steps_min / steps_max)."""
  out = column_stats(feature, lists)
  if n_steps is not None:
    had = n_steps[lists.is_valid().to_numpy(zero_copy_only=False)]
    if len(had):
      out["steps_min"], out["steps_max"] = int(had.min()), int(had.max())
      out["steps_hist"] = histogram.of_ints(
          had.astype(np.int64), out["steps_min"], out["steps_max"])
  return out

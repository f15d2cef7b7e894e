"""Rows -> serialized tf.train.SequenceExample. No Beam here.

Two ways rows become sequences, as the schema says:

* **List columns** (no `group_by`): `SequenceEncoder` (here) turns each row
  into one sequence (or several, with `overflow: split`); each sequence
  feature's cell holds the list of steps. Vectorized over a whole batch,
  like Examples.
* **Grouped rows** (`group_by`): `encoding.steps.StepEncoder` turns each row
  into one step, keyed by the group key; after the rows of a key are
  brought together, `encoding.groups.GroupAssembler` orders the steps of
  many groups at once, checks the context, applies `max_length` and writes
  the records (`encoding.assembler.SequenceAssembler` does the same for
  one group, and writes the groups that need an error message).

Steps inside a group are ordered by the `order_by` values, then, where
those tie, by the step's own serialized values: the result depends only on
the rows, not on file order, runner or worker count.

A group with a rejected row (one that could not become a step, though its
group key was read) is rejected whole unless the schema says
`on_bad_step: drop_step`: a sequence with a gap in it is not written.

Context values must be the same on every row of a group. When they are not,
the whole group goes to the dead-letter output with both values and where
they came from; a feature declared `derive: first` / `derive: last` takes
the value of the first / last step instead.
"""

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.encoding import columns as col
from beam_tfrecords.encoding import wire
from beam_tfrecords.encoding.stats import column_stats, log_buckets
from beam_tfrecords.encoding.example import (EncodedBatch, RowError,
                                             _feature_bytes)
from beam_tfrecords.schema import (Derive, Feature, Overflow, Schema,
                                   load_schema)

__all__ = ["SequenceEncoder", "sequence_stats"]


def _check_sequence(schema: Schema) -> Schema:
  schema = load_schema(schema)
  if not schema.is_sequence:
    raise ValueError(f"schema {schema.name!r} describes {schema.record.value} "
                     "records, not sequence_example")
  return schema


def _row_errors(problems: Dict[int, List[Tuple[str, str]]]) -> List[RowError]:
  return [RowError(row=r, problems=tuple(p)) for r, p in sorted(problems.items())]


def _convert(feature: Feature, columns: Mapping[str, Any], n: int):
  """Converted column (defaults applied) and row errors of one feature."""
  array = columns.get(feature.column)
  if isinstance(array, list):
    lists, errors = col.convert_cells(feature, array)
  else:
    lists, errors = col.convert_column(feature, array, n)
  return col.apply_missing(feature, lists, errors), errors



def _offsets(lengths: np.ndarray) -> np.ndarray:
  out = np.zeros(len(lengths) + 1, dtype=np.int64)
  np.cumsum(lengths, out=out[1:])
  return out


class SequenceEncoder:
  """Encodes rows whose sequence cells hold lists of steps (no group_by).

  Each row becomes one SequenceExample, or, past `max_length` steps, what
  the `overflow` policy says (reject the row, keep the first/last steps, or
  split it into several sequences). Feature lists of one row must have the
  same number of steps unless the schema says `ragged: true`.

  Args:
    schema: a SequenceExample schema (Schema, dict or path) without group_by.
  """

  def __init__(self, schema):
    self._schema = _check_sequence(schema)
    if self._schema.group_by:
      raise ValueError("a schema with group_by is encoded by StepEncoder and "
                       "SequenceAssembler")

  @property
  def schema(self) -> Schema:
    return self._schema

  def __reduce__(self):
    return (SequenceEncoder, (self._schema.to_dict(),))

  def encode(self, batch: pa.RecordBatch) -> EncodedBatch:
    return self.encode_columns(
        {name: batch.column(i) for i, name in enumerate(batch.schema.names)},
        batch.num_rows)

  def encode_rows(self, rows: Sequence[Mapping[str, Any]]) -> EncodedBatch:
    columns = {c: [row.get(c) for row in rows] for c in self._schema.columns}
    return self.encode_columns(columns, len(rows))

  def encode_columns(self, columns: Mapping[str, Any], n: int,
                     stats: bool = False) -> EncodedBatch:
    """Records of n rows; with `stats`, also describes each feature of the
    written records (a sequence feature: its values over all steps, and
    `steps_min` / `steps_max` per sequence)."""
    s = self._schema
    problems: Dict[int, List[Tuple[str, str]]] = {}

    def note(name, errors):
      for row, reason in errors.items():
        problems.setdefault(row, []).append((name, reason))

    context = []
    for f in s.context:
      if f.column is None:
        continue
      lists, errors = _convert(f, columns, n)
      note(f.name, errors)
      context.append((f, lists))
    steps = []
    for f in s.sequence:
      array = columns.get(f.column)
      st = col.convert_steps(f, array, n)
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
    part = np.zeros(len(rows), dtype=np.int64)
    if max_len is not None and s.overflow is not Overflow.REJECT:
      if s.overflow is Overflow.SPLIT:
        pieces = np.maximum(1, -(-length // max_len))
        rows = np.repeat(rows, pieces)
        part = wire.ranges(np.zeros(len(pieces), dtype=np.int64), pieces)
        total = np.repeat(length, pieces)
        begin = part * max_len
        length = np.minimum(max_len, total - begin)
        dropped = np.zeros(len(rows), dtype=np.int64)
      else:
        dropped = np.maximum(length - max_len, 0)
        if s.overflow is Overflow.KEEP_LAST:
          begin = np.maximum(length - max_len, 0)
        length = np.minimum(length, max_len)
    return self._assemble(rows, begin, length, part, context, steps,
                          problems, dropped, stats)

  def _assemble(self, rows, begin, length, part, context, steps, problems,
                dropped, stats=False) -> EncodedBatch:
    s = self._schema
    take = pa.array(rows)
    described = [] if stats else None  # (feature, lists, steps or None)
    ctx_parts = []
    by_name = dict(context)
    lengths_of = {}
    list_parts = []
    for f, st in steps:
      row_steps = st.counts[rows]
      # This piece's steps of this feature (fewer when ragged).
      # Step i of every feature list is the same time step, so a piece
      # covers the same step indices in each (fewer where a list is short).
      n_steps = np.clip(row_steps - begin, 0, length)
      index = wire.ranges(st.offsets[rows] + begin, n_steps)
      values = st.values.take(pa.array(index)) if len(index) else \
          st.values.slice(0, 0)
      feats = _feature_bytes(f, values)
      body = wire.feature_lists(feats, _offsets(n_steps))
      present = st.present[rows]
      lengths_of[f.name] = n_steps
      list_parts.append((f.name, body, present))
      if stats:
        described.append((f, _per_sequence(values, n_steps, present),
                          n_steps))
    for f in s.context:
      if f.derive is Derive.LENGTH or f.derive is Derive.PART:
        value = part if f.derive is Derive.PART else (
            lengths_of[f.of] if f.of else length).astype(np.int64)
        ctx_parts.append((f.name, wire.int64_feature(
            value, np.arange(len(value) + 1)),
                          np.ones(len(value), dtype=bool)))
        if stats:
          described.append((f, pa.LargeListArray.from_arrays(
              pa.array(np.arange(len(value) + 1)), pa.array(value)), None))
      else:
        lists = by_name[f].take(take)
        ctx_parts.append((f.name, _feature_bytes(f, lists),
                          lists.is_valid().to_numpy(zero_copy_only=False)))
        if stats:
          described.append((f, lists, None))
    ctx_parts.sort(key=lambda p: p[0].encode("utf-8"))
    list_parts.sort(key=lambda p: p[0].encode("utf-8"))
    records = wire.sequence_example_message(ctx_parts, list_parts, len(rows))
    too_big = records.lengths > s.max_record_bytes
    if too_big.any():
      for i in np.nonzero(too_big)[0].tolist():
        problems.setdefault(int(rows[i]), []).append((
            "*", f"the record would be {int(records.lengths[i]):,} bytes, "
            f"over max_record_bytes {s.max_record_bytes:,}; set max_length "
            "with overflow: split"))
      # A row split into pieces is rejected whole.
      keep = np.nonzero(~np.isin(rows, rows[too_big]))[0]
      records = _take_ragged(records, keep)
      rows, length, dropped = rows[keep], length[keep], dropped[keep]
      if stats:
        described = [(f, lists.take(pa.array(keep)),
                      None if n_steps is None else n_steps[keep])
                     for f, lists, n_steps in described]
    errors = _row_errors(problems)
    return EncodedBatch(records=records, rows=rows, errors=errors,
                        steps=length.astype(np.int64),
                        dropped_steps=int(dropped.sum()),
                        stats=None if described is None else {
                            f.name: sequence_stats(f, lists, n_steps)
                            for f, lists, n_steps in described})


def _per_sequence(values, n_steps: np.ndarray, present: np.ndarray
                  ) -> pa.LargeListArray:
  """Per-step lists -> one list per sequence of all its steps' values
  (null where the sequence has no such feature list)."""
  per_step = pc.fill_null(pc.list_value_length(values), 0).to_numpy(
      zero_copy_only=False).astype(np.int64)
  offsets = _offsets(per_step)[_offsets(n_steps.astype(np.int64))]
  return pa.LargeListArray.from_arrays(
      pa.array(offsets), pc.list_flatten(values),
      mask=pa.array(~present.astype(bool)))


def sequence_stats(feature: Feature, lists, n_steps: Optional[np.ndarray]
                   ) -> dict:
  """column_stats of a feature's values per record; for a feature list,
  also the steps per record that has it (steps_min / steps_max)."""
  out = column_stats(feature, lists)
  if n_steps is not None:
    had = n_steps[lists.is_valid().to_numpy(zero_copy_only=False)]
    if len(had):
      out["steps_min"], out["steps_max"] = int(had.min()), int(had.max())
      out["steps_hist"] = log_buckets(had.astype(np.float64))
  return out


def _take_ragged(r: wire.Ragged, index: np.ndarray) -> wire.Ragged:
  lengths = r.lengths[index]
  out_offsets = _offsets(lengths)
  src = wire.ranges(r.offsets[:-1][index], lengths)
  return wire.Ragged(r.buf[src], out_offsets)



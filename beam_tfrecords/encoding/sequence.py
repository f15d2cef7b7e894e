"""Rows -> serialized tf.train.SequenceExample. No Beam here.

Two ways rows become sequences, as the schema says:

* **List columns** (no `group_by`): `SequenceEncoder` turns each row into one
  sequence (or several, with `overflow: split`); each sequence feature's cell
  holds the list of steps. Vectorized over a whole batch, like Examples.
* **Grouped rows** (`group_by`): `StepEncoder` turns each row into one step,
  keyed by the group key (`StepBatch`); after the rows of a key are brought
  together (Beam's GroupByKey), `SequenceAssembler` orders the steps, checks
  the context, applies `max_length`, and writes the record(s).

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

import dataclasses
import heapq
import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.encoding import columns as col
from beam_tfrecords.encoding import wire
from beam_tfrecords.encoding.stats import column_stats
from beam_tfrecords.encoding.example import (EncodedBatch, RowError,
                                             _feature_bytes)
from beam_tfrecords.schema import (Derive, Feature, FeatureType, Overflow,
                                   Schema, load_schema)
from beam_tfrecords.schema.model import OnBadStep

__all__ = ["SequenceEncoder", "StepEncoder", "StepBatch", "Step", "BadRows",
           "SequenceAssembler", "GroupResult", "GroupError",
           "GROUP_REJECTED"]

# One step of a grouped sequence, as it travels through GroupByKey:
#   (order values, step Feature bytes per sequence feature (schema order),
#    context Feature bytes or None per row-read context feature, row number)
Step = Tuple[tuple, Tuple[bytes, ...], Tuple[Optional[bytes], ...],
             Optional[int]]
# Rows of a group that could not become steps, as one batch reports them:
#   (source path, row number of the first, its reason, how many rows)
BadRows = Tuple[str, Optional[int], str, int]
# How the reason of a group rejected for one of its rows starts.
GROUP_REJECTED = "group_rejected_because_of_row"

# Upper bounds of the framing bytes around a step's Feature (tag + length)
# and around a map entry (tags, lengths), for the record size check.
_STEP_OVERHEAD = 11
_ENTRY_OVERHEAD = 33


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


def _ranges(begins: np.ndarray, lengths: np.ndarray) -> np.ndarray:
  """Concatenated aranges: begins[i] .. begins[i] + lengths[i]."""
  total = int(lengths.sum())
  if total == 0:
    return np.empty(0, dtype=np.int64)
  starts = np.repeat(begins - np.cumsum(lengths) + lengths, lengths)
  return starts + np.arange(total, dtype=np.int64)


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
        part = _ranges(np.zeros(len(pieces), dtype=np.int64), pieces)
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
      index = _ranges(st.offsets[rows] + begin, n_steps)
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
  return out


def _take_ragged(r: wire.Ragged, index: np.ndarray) -> wire.Ragged:
  lengths = r.lengths[index]
  out_offsets = _offsets(lengths)
  src = _ranges(r.offsets[:-1][index], lengths)
  return wire.Ragged(r.buf[src], out_offsets)


# ---------------------------------------------------------------------------
# Grouped rows.


@dataclasses.dataclass
class StepBatch:
  """The steps of one input batch, by group key.

  Attributes:
    groups: (key, steps) per key, in first-seen order; the key is a tuple
      of stored values (int, float or bytes) in group_by order.
    errors: rows that could not become a step.
    bad: the rows of `errors` whose group key was read, as (key, row,
      reason), in row order: their groups are incomplete.
  """
  groups: List[Tuple[tuple, List[Step]]]
  errors: List[RowError]
  # feature name -> column_stats over the rows that became steps (when
  # asked for): context features per row, sequence features per step.
  stats: Optional[Dict[str, dict]] = None
  bad: List[Tuple[tuple, int, str]] = dataclasses.field(default_factory=list)


def _key_feature(column: str, ftype: FeatureType, what: str) -> Feature:
  return Feature(name=f"{what} {column}", type=ftype, source=column,
                 required=True)


class StepEncoder:
  """Encodes grouped rows as steps (the first half of grouped sequences).

  Args:
    schema: a SequenceExample schema with group_by.
  """

  def __init__(self, schema):
    self._schema = _check_sequence(schema)
    s = self._schema
    if not s.group_by:
      raise ValueError("a schema without group_by is encoded by "
                       "SequenceEncoder")
    self._keys = [_key_feature(c, t, "group_by") for c, t in s.group_by]
    self._order = [_key_feature(k.column, k.type, "order_by")
                   for k in s.order_by]
    self._context = [f for f in s.context if f.column is not None]

  @property
  def schema(self) -> Schema:
    return self._schema

  def __reduce__(self):
    return (StepEncoder, (self._schema.to_dict(),))

  def encode_rows(self, rows: Sequence[Mapping[str, Any]]) -> StepBatch:
    columns = {c: [row.get(c) for row in rows] for c in self._schema.columns}
    return self.encode_columns(columns, len(rows))

  def encode_columns(self, columns: Mapping[str, Any], n: int,
                     row_numbers: Optional[Sequence[Optional[int]]] = None,
                     stats: bool = False) -> StepBatch:
    """Steps of n rows; `row_numbers` (per row, or None) go with each step
    so that group-level errors can say where a row came from. With
    `stats`, also describes the features of the rows that became steps."""
    s = self._schema
    problems: Dict[int, List[Tuple[str, str]]] = {}

    def scalars(feature):
      lists, errors = _convert(feature, columns, n)
      for row, reason in errors.items():
        problems.setdefault(row, []).append((feature.name, reason))
      return lists.flatten().to_pylist() if lists.null_count == 0 else [
          None if v is None else v[0] for v in lists.to_pylist()]

    keys = [scalars(f) for f in self._keys]
    orders = [scalars(f) for f in self._order]
    for f, values in zip(self._keys + self._order, keys + orders):
      if f.type is FeatureType.FLOAT:
        for row, v in enumerate(values):
          if v is None:
            continue
          if math.isnan(v):
            what = ("grouped" if f in self._keys else "ordered")
            problems.setdefault(row, []).append((
                f.name, f"NaN cannot be {what}; give the row a number"))
          elif v == 0.0:
            values[row] = 0.0  # -0.0 and 0.0 are one key (as Python says)
    context = []
    converted = []
    for f in self._context:
      lists, errors = _convert(f, columns, n)
      for row, reason in errors.items():
        problems.setdefault(row, []).append((f.name, reason))
      present = lists.is_valid().to_numpy(zero_copy_only=False)
      feats = _feature_bytes(f, lists).to_list()
      context.append([b if p else None for b, p in zip(feats, present)])
      converted.append((f, lists))
    features = []
    for f in s.sequence:
      lists, errors = _convert(f, columns, n)
      for row, reason in errors.items():
        problems.setdefault(row, []).append((f.name, reason))
      # A missing step value (no default, not required) is an empty step.
      features.append(_feature_bytes(f, lists).to_list())
      converted.append((f, lists))
    described = None
    if stats:
      good = np.ones(n, dtype=bool)
      good[list(problems)] = False
      keep = pa.array(good)
      described = {f.name: column_stats(f, lists.filter(keep))
                   for f, lists in converted}
    rows = row_numbers if row_numbers is not None else [None] * n
    groups: Dict[tuple, List[Step]] = {}
    key_rows = list(zip(*keys))
    order_rows = list(zip(*orders)) if orders else [()] * n
    feature_rows = list(zip(*features))
    context_rows = list(zip(*context)) if context else [()] * n
    for i in range(n):
      if i in problems:
        continue
      groups.setdefault(key_rows[i], []).append(
          (order_rows[i], feature_rows[i], context_rows[i], rows[i]))
    errors = _row_errors(problems)
    # A row without a readable key belongs to no group; the others leave a
    # gap in theirs (key_rows holds the normalized key, as the steps do).
    key_names = {f.name for f in self._keys}
    bad = [(key_rows[e.row], e.row, e.reason) for e in errors
           if not any(name in key_names for name, _ in e.problems)]
    return StepBatch(groups=list(groups.items()), errors=errors,
                     stats=described, bad=bad)


@dataclasses.dataclass(frozen=True)
class GroupError:
  """Rows of a group that are not in a record, and why.

  Attributes:
    rows: how many input rows this accounts for.
    reason: what happened, for a person.
    dropped: True when a declared policy (keep_first / keep_last) left the
      rows out; False when they were rejected.
    examples: up to a few (source, row) of the rows concerned.
  """
  rows: int
  reason: str
  dropped: bool = False
  examples: Tuple[Tuple[str, Optional[int]], ...] = ()


@dataclasses.dataclass
class GroupResult:
  """What one group became.

  Attributes:
    records: serialized SequenceExamples (several with overflow: split).
    steps: the number of steps in each record.
    errors: the group's rows that are in no record.
  """
  records: List[bytes]
  steps: List[int]
  errors: List[GroupError]

  @property
  def rows_written(self) -> int:
    return sum(self.steps)


def _show_feature(value: Optional[bytes]) -> str:
  from beam_tfrecords.records import decode_feature  # only for messages
  if value is None:
    return "missing"
  kind, values = decode_feature(value)
  shown = [v.decode("utf-8", "backslashreplace") if isinstance(v, bytes)
           else v for v in values]
  return repr(shown[0]) if len(shown) == 1 else repr(shown)


def _where(entry) -> Tuple[str, Optional[int]]:
  return (entry[4], entry[3])


class SequenceAssembler:
  """Orders the steps of one group and writes its SequenceExample(s).

  Args:
    schema: the SequenceExample schema with group_by.
  """

  EXAMPLES = 3  # (source, row) examples kept per group error

  def __init__(self, schema):
    self._schema = _check_sequence(schema)
    s = self._schema
    row_read = [f for f in s.context if f.column is not None]
    self._ctx_index = {f.name: i for i, f in enumerate(row_read)}
    self._constant = [f for f in row_read if f.derive is None]
    descending = [k.descending for k in s.order_by]

    def key(e):
      order = e[0] if not any(descending) else tuple(
          _descending(v) if d else v for v, d in zip(e[0], descending))
      # Ties: the step's serialized values, then its context values
      # (missing sorts first), so no record depends on input order; last
      # the row's place (steps equal in all values write the same bytes
      # either way; this only fixes which rows errors/ names).
      return (order, e[1], tuple((c is not None, c or b"") for c in e[2]),
              e[4], -1 if e[3] is None else e[3])
    # Steps sort by the order_by values, then (ties) by their own values.
    self._key = key

  def __reduce__(self):
    return (SequenceAssembler, (self._schema.to_dict(),))

  def assemble(self, chunks: Iterable[Tuple[str, Sequence[Step]]],
               bad: Sequence[BadRows] = ()) -> GroupResult:
    """One group's steps, in chunks of (source path, steps).

    `bad` are the group's rows that could not become steps (they are in
    errors/ already); under on_bad_step: reject_group, any of them rejects
    the group's other rows too.
    `chunks` is iterated more than once (Beam's grouped values allow it).
    Under overflow reject / keep_first / keep_last, memory stays bounded
    by max_length steps (plus what the runner holds); without max_length
    or with split, the group's steps are held and sorted in memory.
    """
    s = self._schema
    max_len = s.max_length
    n = sum(len(steps) for _, steps in chunks)
    if n == 0:
      return GroupResult([], [], [])
    if bad and s.on_bad_step is OnBadStep.REJECT_GROUP:
      return GroupResult([], [], [self._rejected_for(chunks, bad, n)])
    over = max_len is not None and n > max_len
    if over and s.overflow is Overflow.REJECT:
      first = heapq.nsmallest(self.EXAMPLES, self._entries(chunks),
                              key=self._key)
      return GroupResult([], [], [GroupError(
          rows=n, reason=f"the group has {n:,} rows, more than max_length "
          f"{max_len:,} (overflow: reject); raise max_length or choose "
          "overflow: split / keep_first / keep_last",
          examples=tuple(_where(e) for e in first))])
    if self._constant and self._varies(self._entries(chunks)):
      # Rare: sort so the message names the same two rows on every run.
      entries = sorted(self._entries(chunks), key=self._key)
      return GroupResult([], [], [self._context_conflict(entries)])
    errors = []
    if over and s.overflow is not Overflow.SPLIT:
      keep_last = s.overflow is Overflow.KEEP_LAST
      # The dropped steps are the n - max_len at the other end; a few of
      # them (the nearest to the kept ones) are named as examples.
      shown = min(self.EXAMPLES, n - max_len)
      if keep_last:
        kept = heapq.nlargest(max_len, self._entries(chunks), key=self._key)
        kept.reverse()
        gone = heapq.nlargest(max_len + shown, self._entries(chunks),
                              key=self._key)[max_len:]
      else:
        kept = heapq.nsmallest(max_len, self._entries(chunks), key=self._key)
        gone = heapq.nsmallest(max_len + shown, self._entries(chunks),
                               key=self._key)[max_len:]
      errors.append(GroupError(
          rows=n - max_len, dropped=True,
          reason=f"max_length {max_len:,} (overflow: {s.overflow.value}) "
          f"left out the {'first' if keep_last else 'last'} "
          f"{n - max_len:,} of {n:,} steps",
          examples=tuple(_where(e) for e in gone)))
      pieces = [kept]
    else:
      entries = sorted(self._entries(chunks), key=self._key)
      step = max_len if over else n
      pieces = [entries[i:i + step] for i in range(0, n, step)]
    records, steps = [], []
    for part, piece in enumerate(pieces):
      size = self._size_bound(piece)
      if size > s.max_record_bytes:
        errors.append(GroupError(
            rows=len(piece), reason=f"the sequence would be about "
            f"{size:,} bytes, over max_record_bytes {s.max_record_bytes:,}; "
            "set max_length with overflow: split",
            examples=tuple(_where(e) for e in piece[:self.EXAMPLES])))
        continue
      records.append(self._record(piece, part))
      steps.append(len(piece))
    return GroupResult(records, steps, errors)

  def _rejected_for(self, chunks, bad: Sequence[BadRows], n: int
                    ) -> GroupError:
    """The error of a group rejected because some of its rows were."""
    # The smallest (source, row) names the group's bad row, whatever order
    # the batches came in.
    path, row, reason, _ = min(bad, key=lambda b: (
        b[0], b[1] is None, b[1] or 0, b[2]))
    count = sum(b[3] for b in bad)
    more = f"{count:,} of its rows were rejected; " if count > 1 else ""
    first = heapq.nsmallest(self.EXAMPLES, self._entries(chunks),
                            key=self._key)
    return GroupError(
        rows=n, reason=f"{GROUP_REJECTED}: {_place(path, row)}: {reason} "
        f"({more}on_bad_step: drop_step writes the sequence without "
        f"{'them' if count > 1 else 'it'})",
        examples=tuple(_where(e) for e in first))

  def _size_bound(self, piece: list) -> int:
    """At least the serialized size of the record `piece` makes."""
    s = self._schema
    size = sum(len(f) + _STEP_OVERHEAD for e in piece for f in e[1])
    size += sum(len(c) for c in piece[0][2] if c is not None)
    size += sum(len(c) for c in piece[-1][2] if c is not None)
    size += sum(len(f.name.encode("utf-8")) + _ENTRY_OVERHEAD
                for f in s.context + s.sequence)
    return size + 2 * _ENTRY_OVERHEAD

  @staticmethod
  def _entries(chunks):
    """Each step with its source path appended (a fresh pass each call)."""
    for path, steps in chunks:
      for step in steps:
        yield step + (path,)

  def _varies(self, entries) -> bool:
    """Whether a context value that must be constant is not (one pass)."""
    columns = [self._ctx_index[f.name] for f in self._constant]
    first = None
    for e in entries:
      values = [e[2][j] for j in columns]
      if first is None:
        first = values
      elif values != first:
        return True
    return False

  def _context_conflict(self, entries: list) -> Optional[GroupError]:
    for f in self._constant:
      j = self._ctx_index[f.name]
      first = entries[0][2][j]
      for e in entries:
        if e[2][j] != first:
          return GroupError(
              rows=len(entries),
              reason=f'context feature "{f.name}" differs inside the group: '
              f"{_show_feature(first)} ({_where_text(entries[0])}) vs "
              f"{_show_feature(e[2][j])} ({_where_text(e)}); make it a "
              "sequence feature, or declare derive: first / last to take "
              "the value of the first / last step",
              examples=(_where(entries[0]), _where(e)))
    return None

  def _record(self, piece: list, part: int) -> bytes:
    s = self._schema
    context = []
    for f in s.context:
      if f.derive is Derive.LENGTH or f.derive is Derive.PART:
        value = len(piece) if f.derive is Derive.LENGTH else part
        context.append((f.name, wire.frame(0x1A, wire.frame(
            0x0A, wire._varint_bytes(value)))))
        continue
      j = self._ctx_index[f.name]
      step = piece[-1] if f.derive is Derive.LAST else piece[0]
      if step[2][j] is not None:
        context.append((f.name, step[2][j]))
    lists = [(f.name, [e[1][i] for e in piece])
             for i, f in enumerate(s.sequence)]
    context.sort(key=lambda p: p[0].encode("utf-8"))
    lists.sort(key=lambda p: p[0].encode("utf-8"))
    return wire.sequence_example_bytes(context, lists)


class _Reversed:
  """Wraps a value so that it sorts in reverse (descending bytes keys)."""
  __slots__ = ("v",)

  def __init__(self, v):
    self.v = v

  def __eq__(self, other):
    return self.v == other.v

  def __lt__(self, other):
    return other.v < self.v


def _descending(value):
  return -value if isinstance(value, (int, float)) else _Reversed(value)


def _where_text(entry) -> str:
  return _place(entry[4], entry[3])


def _place(path: str, row: Optional[int]) -> str:
  return f"{path} row {row}" if row is not None else path

"""Grouped rows -> steps, as columns (the first half of grouped sequences).

A schema with `group_by` makes one SequenceExample per group of rows. Each
row becomes one step: its group key, its `order_by` values, the serialized
tf.train.Feature of each sequence feature, and the serialized Feature of
each context feature read from rows. `StepEncoder.encode_table` builds
these for a whole batch at once, as Arrow columns (`StepTable`); no Python
object is made per row. `encoding.groups` brings the steps of a key
together and writes the records.

`key_hash` spreads keys over buckets the same way in every process (Python's
own `hash` of bytes differs between processes).

`StepEncoder.encode_columns` gives the same steps as Python values per
group (`StepBatch` of `encoding.grouped_sequences.Step`), for
`SequenceAssembler` (one group at a time).
"""

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.encoding import columns as col
from beam_tfrecords.encoding import messages
from beam_tfrecords.encoding.example import RowError, row_errors
from beam_tfrecords.encoding.grouped_sequences import BadStep, Step
from beam_tfrecords.encoding.ragged import Ragged, from_arrow, to_arrow
from beam_tfrecords.encoding.sequences import (SchemaSource, check_sequence,
                                               convert_feature)
from beam_tfrecords.encoding.stats import column_stats
from beam_tfrecords.schema import Feature, FeatureType, Schema

__all__ = ["StepEncoder", "StepTable", "StepBatch", "key_hash", "keys_hash",
           "columns_of", "step_features",
           "KEY", "ORDER", "STEP", "STEPS", "CONTEXT", "ROW"]

# Column names of a StepTable: KEY + i per group_by column, ORDER + i per
# order_by key, STEPS (every sequence feature of the step, packed:
# messages.packed_values), CONTEXT + i per context feature read from rows
# (schema order), ROW. STEP + i names sequence feature i where a step's
# Features are unpacked into columns of their own (the assembly's sort of
# steps that tie on order_by).
KEY, ORDER, STEP, STEPS, CONTEXT, ROW = "k", "o", "s", "steps", "c", "row"


@dataclasses.dataclass
class StepTable:
  """The steps of one batch, as columns.

  Attributes:
    table: one row per input row that became a step, in input order:
      KEY<i> (int64, float32 or large_binary: the group key; -0.0 stored
      as 0.0), ORDER<i> (likewise), STEPS (large_binary: the step's
      serialized Feature of each sequence feature, in schema order, packed
      by `messages.packed_values`: `step_features` unpacks them),
      CONTEXT<i> (large_binary, null where missing),
      ROW (int64: the row's number in its file, null where not known).
    errors: the rows that could not become steps.
    bad: the rows of `errors` whose group key was read, in row order:
      their groups are incomplete.
    stats: feature name -> column_stats over the rows that became steps
      (when asked for): context features per row, sequence features per
      step.
    good: None, or (`encode_table(..., drop=False)`) per row of `table`,
      which then holds every input row, whether it became a step (its
      other rows are the errors', with whatever their columns hold): the
      caller leaves them out in a copy it makes anyway.
  """
  table: pa.Table
  errors: List[RowError]
  bad: List[BadStep]
  stats: Optional[Dict[str, dict]] = None
  good: Optional[np.ndarray] = None

  def keys(self) -> List[tuple]:
    """Each step's group key, as Python values."""
    return list(zip(*(self.table.column(f"{KEY}{i}").to_pylist()
                      for i in range(len(columns_of(self.table, KEY))))))


@dataclasses.dataclass
class StepBatch:
  """The steps of one input batch, by group key.

  Attributes:
    groups: (key, steps) per key, in first-seen order; the key is a tuple
      of stored values (int, float or bytes) in group_by order.
    errors: rows that could not become a step.
    bad: the rows of `errors` whose group key was read, in row order:
      their groups are incomplete.
  """
  groups: List[Tuple[tuple, List[Step]]]
  errors: List[RowError]
  # feature name -> column_stats over the rows that became steps (when
  # asked for): context features per row, sequence features per step.
  stats: Optional[Dict[str, dict]] = None
  bad: List[BadStep] = dataclasses.field(default_factory=list)


def columns_of(table: pa.Table, prefix: str) -> List[str]:
  """The names of a StepTable's columns of one kind (KEY, ORDER, ...)."""
  return [name for name in table.column_names
          if name[:len(prefix)] == prefix and name[len(prefix):].isdigit()]


def step_features(table: pa.Table, k: int) -> List[Ragged]:
  """A StepTable's STEPS unpacked: each of its k sequence features'
  serialized Feature per step (the assembly writes FeatureLists of
  them)."""
  column = table.column(STEPS)
  column = column.chunk(0) if column.num_chunks == 1 else \
      column.combine_chunks()
  return messages.unpacked_values(from_arrow(column), k)


def _key_feature(column: str, ftype: FeatureType, what: str) -> Feature:
  return Feature(name=f"{what} {column}", type=ftype, source=column,
                 required=True)


def _first_values(lists: pa.LargeListArray) -> pa.Array:
  """Each row's first value (null where the row has none)."""
  offsets = np.asarray(lists.offsets, dtype=np.int64)
  lengths = np.diff(offsets)
  if lists.null_count == 0 and (lengths == 1).all():
    return lists.flatten()
  has = lengths > 0
  index = np.where(has, offsets[:-1], 0)
  values = lists.values
  if not len(values):
    return pa.nulls(len(lists), type=values.type)
  return values.take(pa.array(index, mask=~has))


def _normalized(values: pa.Array) -> pa.Array:
  """Floats with -0.0 as 0.0 (one key, as Python's == says)."""
  if not pa.types.is_floating(values.type):
    return values
  array = values.to_numpy(zero_copy_only=False) + np.float32(0.0)
  return pa.array(array, type=values.type,
                  mask=None if not values.null_count else
                  values.is_null().to_numpy(zero_copy_only=False))


class StepEncoder:
  """Encodes grouped rows as steps (the first half of grouped sequences).

  Args:
    schema: a SequenceExample schema with group_by.
  """

  def __init__(self, schema: SchemaSource):
    self._schema = check_sequence(schema)
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

  def encode_table(self, columns: Mapping[str, Any], n: int,
                   row_numbers: Optional[Sequence[Optional[int]]] = None,
                   stats: bool = False, drop: bool = True) -> StepTable:
    """The steps of n rows as columns; `row_numbers` (per row, or None)
    go with each step so that group-level errors can say where a row came
    from. With `stats`, also describes the features of the rows that
    became steps. `drop=False`: the rows that did not are not taken out
    of the table but marked (StepTable.good)."""
    s = self._schema
    problems: Dict[int, List[Tuple[str, str]]] = {}
    # A column read by several features (key, step, context) is converted
    # once per kind of value: conversion depends on type, shape, separator.
    done: Dict[Feature, Tuple[pa.LargeListArray, col.RowErrors]] = {}

    def converted(feature: Feature) -> pa.LargeListArray:
      how = dataclasses.replace(feature, name="", source=feature.column,
                                required=False,
                                default=None, description="", derive=None,
                                of=None)
      if how not in done:
        done[how] = convert_feature(how, columns, n)
      lists, errors = done[how]
      errors = dict(errors)
      lists = col.apply_missing(feature, lists, errors)
      for row, reason in errors.items():
        problems.setdefault(row, []).append((feature.name, reason))
      return lists

    scalars = {}
    for f in self._keys + self._order:
      values = _normalized(_first_values(converted(f)))
      if f.type is FeatureType.FLOAT and len(values):
        nan = pc.fill_null(pc.is_nan(values), False).to_numpy(
            zero_copy_only=False)
        what = "grouped" if f in self._keys else "ordered"
        for row in np.nonzero(nan)[0].tolist():
          problems.setdefault(row, []).append((
              f.name, f"NaN cannot be {what}; give the row a number"))
      scalars[f] = values
    out: Dict[str, pa.Array] = {}
    for i, f in enumerate(self._keys):
      out[f"{KEY}{i}"] = scalars[f]
    for i, f in enumerate(self._order):
      out[f"{ORDER}{i}"] = scalars[f]
    described = []
    for f in s.sequence:
      described.append((f, converted(f)))
    # A missing step value (no default, not required) is an empty step.
    out[STEPS] = to_arrow(messages.packed_values(
        [messages.typed(f, lists) for f, lists in described], n))
    for i, f in enumerate(self._context):
      lists = converted(f)
      present = lists.is_valid().to_numpy(zero_copy_only=False)
      out[f"{CONTEXT}{i}"] = to_arrow(
          messages.feature_values(messages.typed(f, lists)),
          None if present.all() else present)
      described.append((f, lists))
    numbers = row_numbers if row_numbers is not None else [None] * n
    out[ROW] = pa.array(numbers, type=pa.int64())
    table = pa.table(out)
    errors = row_errors(problems)
    good = None
    if problems:
      good = np.ones(n, dtype=bool)
      good[list(problems)] = False
      if drop:
        table = table.filter(pa.array(good))
    stat = None
    if stats:
      keep = None if good is None else pa.array(good)
      stat = {f.name: column_stats(f, lists if keep is None else
                                   lists.filter(keep))
              for f, lists in described}
    return StepTable(table=table, errors=errors,
                     bad=self._bad(errors, scalars), stats=stat,
                     good=None if drop else good)

  def _bad(self, errors: List[RowError], scalars: Dict[Feature, pa.Array]
           ) -> List[BadStep]:
    """The rows of `errors` whose group key was read: a row without a
    readable key belongs to no group; the others leave a gap in theirs."""
    key_names = {f.name for f in self._keys}
    bad_rows = [e for e in errors
                if not any(name in key_names for name, _ in e.problems)]
    if not bad_rows:
      return []
    index = pa.array([e.row for e in bad_rows], type=pa.int64())
    keys = list(zip(*(scalars[f].take(index).to_pylist()
                      for f in self._keys)))
    return [BadStep(key, e.row, e.reason) for key, e in zip(keys, bad_rows)]

  def encode_rows(self, rows: Sequence[Mapping[str, Any]]) -> StepBatch:
    columns = {c: [row.get(c) for row in rows] for c in self._schema.columns}
    return self.encode_columns(columns, len(rows))

  def encode_columns(self, columns: Mapping[str, Any], n: int,
                     row_numbers: Optional[Sequence[Optional[int]]] = None,
                     stats: bool = False) -> StepBatch:
    """`encode_table`'s steps as Python values, by group key."""
    steps = self.encode_table(columns, n, row_numbers, stats)
    t = steps.table
    s = self._schema

    def rows(prefix: str, count: int) -> List[tuple]:
      return list(zip(*(t.column(f"{prefix}{i}").to_pylist()
                        for i in range(count)))) or [()] * t.num_rows

    orders = rows(ORDER, len(self._order))
    features = list(zip(*(values.to_list() for values in step_features(
        t, len(s.sequence))))) or [()] * t.num_rows
    context = rows(CONTEXT, len(self._context))
    numbers = t.column(ROW).to_pylist()
    groups: Dict[tuple, List[Step]] = {}
    # Step._make over zip: a third of the cost of Step(...) per row.
    for key, step in zip(steps.keys(), map(Step._make, zip(
        orders, features, context, numbers))):
      groups.setdefault(key, []).append(step)
    return StepBatch(groups=list(groups.items()), errors=steps.errors,
                     stats=steps.stats, bad=steps.bad)


# ---------------------------------------------------------------------------
# Keys -> buckets.

_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_ODD = np.uint64(0x9E3779B97F4A7C15)
_BYTE_BASE = np.uint64(0x100000001B3)


def _mix(z: np.ndarray) -> np.ndarray:
  """splitmix64's finalizer (uint64 arithmetic wraps, as intended)."""
  z = (z ^ (z >> np.uint64(30))) * _MIX1
  z = (z ^ (z >> np.uint64(27))) * _MIX2
  return z ^ (z >> np.uint64(31))


def _bytes_hash(array: pa.Array) -> np.ndarray:
  """A polynomial hash of each value's bytes (and its length)."""
  ragged = from_arrow(array.cast(pa.large_binary()))
  offsets = ragged.offsets - ragged.offsets[0]
  lengths = np.diff(offsets)
  data = ragged.buf[ragged.offsets[0]:ragged.offsets[-1]].astype(np.uint64)
  longest = int(lengths.max()) if len(lengths) else 0
  powers = np.ones(max(longest, 1), dtype=np.uint64)
  if longest > 1:
    powers[1:] = _BYTE_BASE
    powers = np.cumprod(powers, dtype=np.uint64)
  position = np.arange(len(data), dtype=np.int64) - np.repeat(
      offsets[:-1], lengths)
  sums = np.zeros(len(data) + 1, dtype=np.uint64)
  np.cumsum(data * powers[position], dtype=np.uint64, out=sums[1:])
  return (sums[offsets[1:]] - sums[offsets[:-1]]) ^ lengths.astype(np.uint64)


def key_hash(table: pa.Table) -> np.ndarray:
  """A uint64 per step from its group key columns, the same in every
  process and run."""
  out = np.zeros(table.num_rows, dtype=np.uint64)
  with np.errstate(over="ignore"):
    for i in range(len(columns_of(table, KEY))):
      column = table.column(f"{KEY}{i}").combine_chunks()
      if column.null_count and not pa.types.is_binary(column.type) and \
          not pa.types.is_large_binary(column.type):
        # (rows kept with drop=False whose key was not read)
        column = pc.fill_null(column, pa.scalar(0, column.type))
      if pa.types.is_integer(column.type):
        h = column.to_numpy(zero_copy_only=False).astype(np.int64).view(
            np.uint64)
      elif pa.types.is_floating(column.type):
        h = column.to_numpy(zero_copy_only=False).astype(np.float64).view(
            np.uint64)
      else:
        h = _bytes_hash(column)
      out = _mix(out * _ODD + h)
  return out


def keys_hash(keys: Sequence[tuple], like: pa.Table) -> np.ndarray:
  """key_hash of group keys given as Python values (the key columns'
  types taken from the StepTable `like`)."""
  return key_hash(pa.table({
      f"{KEY}{i}": pa.array([key[i] for key in keys],
                            type=like.schema.field(f"{KEY}{i}").type)
      for i in range(len(columns_of(like, KEY)))}))

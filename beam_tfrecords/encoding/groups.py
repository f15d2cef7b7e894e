"""The steps of many groups -> their SequenceExamples, at once. No Beam here.

`GroupAssembler.assemble` takes the steps (`encoding.steps.StepTable`
tables) of every group in a bucket, from any number of batches, and writes
each group's record(s):

1. one Arrow sort orders all steps by group key, then within a group by
   the `order_by` values and, where those tie, by the step's own values,
   its context values, its file and its row: exactly the order of
   `SequenceAssembler` (the reference, which orders one group at a time);
2. the groups that need a message of their own (a rejected row under
   `on_bad_step: reject_group`, more steps than `max_length` under
   `overflow: reject`, a context value that differs inside the group, a
   record over `max_record_bytes`) are found with numpy and handed to
   `SequenceAssembler`: the reference writes them, so their records and
   messages are the reference's own;
3. every other group (split by `max_length` under `overflow: split`, cut
   to its first / last `max_length` steps under `keep_first` /
   `keep_last`, with the reference's wording of what was left out) is
   written by the vectorized wire encoder over all groups of the bucket at
   once: no Python object per step.

The result (`encoding.grouped_sequences.GroupedRecords`) lists the groups
in key order with their records; its bytes equal the reference's, group
by group (tests/unit/encoding/test_groups.py).
"""

import json
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.encoding import messages, wire
from beam_tfrecords.encoding.assembler import SequenceAssembler
from beam_tfrecords.encoding.grouped_sequences import (ENTRY_OVERHEAD,
                                                       STEP_OVERHEAD, BadRows,
                                                       GroupedRecords,
                                                       GroupError, Step)
from beam_tfrecords.encoding.ragged import (Ragged, from_arrow, offsets_of,
                                            ranges, to_arrow)
from beam_tfrecords.encoding.sequences import SchemaSource, check_sequence
from beam_tfrecords.encoding.steps import (CONTEXT, KEY, ORDER, ROW, STEP,
                                           STEPS, step_features)
from beam_tfrecords.schema import Derive, Overflow, Schema
from beam_tfrecords.schema.model import OnBadStep

# GroupedRecords is what GroupAssembler.assemble returns.
__all__ = ["GroupAssembler", "GroupedRecords"]

# Sort-only columns: the file's place among the files, the row number
# (-1 where not known), and per context value whether it is present and
# its bytes (b"" where missing): a missing value sorts first, as in
# SequenceAssembler, without relying on Arrow's null placement.
_PATH, _ROW_SORT, _HAS, _VALUE = "path", "row_sort", "has", "value"
# An integer column whose values span less than this is ranked by value
# less its least (no sort); a wider one by np.unique.
_DIRECT = 1 << 24


class _Pieces(NamedTuple):
  """The records to write, as ranges of the sorted steps: per record its
  group (index), its number in the group (`derive: part`), its first
  step and its number of steps."""
  group: np.ndarray
  number: np.ndarray
  begin: np.ndarray
  length: np.ndarray


def _changes(column: pa.Array) -> np.ndarray:
  """Where each value differs from the one before (n - 1 flags)."""
  if len(column) < 2:
    return np.zeros(0, dtype=bool)
  if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
    values = column.to_numpy(zero_copy_only=False)
    return values[1:] != values[:-1]
  return pc.not_equal(column.slice(1), column.slice(0, len(column) - 1)
                      ).to_numpy(zero_copy_only=False)


def _column(t: pa.Table, name: str) -> pa.Array:
  """A column of a combined table as one array."""
  column = t.column(name)
  return column.chunk(0) if column.num_chunks == 1 else \
      column.combine_chunks()


def _lengths(column: pa.Array) -> np.ndarray:
  """Bytes per value of a large_binary array (0 where null)."""
  return pc.fill_null(pc.binary_length(column), 0).to_numpy(
      zero_copy_only=False).astype(np.int64)


def _same_as_previous(t: pa.Table, names: Sequence[str]) -> np.ndarray:
  """Per row: whether it equals the row before in every column of
  `names` (two nulls equal, as a sort ties them); the first row: no."""
  if not t.num_rows:
    return np.zeros(0, dtype=bool)
  same = np.ones(t.num_rows - 1, dtype=bool)
  for name in names:
    column = t.column(name).combine_chunks()
    a, b = column.slice(1), column.slice(0, t.num_rows - 1)
    equal = pc.fill_null(pc.equal(a, b), False)
    if column.null_count:
      equal = pc.or_(equal, pc.and_(pc.is_null(a), pc.is_null(b)))
    same &= equal.to_numpy(zero_copy_only=False)
  return np.concatenate([[False], same])


def _ranks(column: pa.Array, descending: bool
           ) -> Optional[Tuple[np.ndarray, int]]:
  """(per row, a whole number from 0 that orders the rows as Arrow's
  sort does, equal where Arrow's ties; how many numbers there are), or
  None for a column with nulls or NaN, or of another type than integer,
  float and (large) binary or string: Arrow sorts those itself."""
  kind = column.type
  if column.null_count:
    return None
  if pa.types.is_integer(kind) or pa.types.is_floating(kind):
    values = column.to_numpy(zero_copy_only=False)
    if pa.types.is_floating(kind) and np.isnan(values).any():
      return None
    low, high = (values.min(), values.max()) if len(values) else (0, 0)
    if pa.types.is_integer(kind) and int(high) - int(low) < _DIRECT:
      # (signed: widened first, so that int8's -128..127 does not wrap;
      # unsigned: the difference fits, as the range is small)
      ranks = (values.astype(np.int64) - np.int64(low)
               if values.dtype.kind == "i" else
               (values - low).astype(np.int64))
      count = int(high) - int(low) + 1
    else:  # (-0.0 and 0.0 are one value, as Arrow ties them)
      unique, ranks = np.unique(values, return_inverse=True)
      count = len(unique)
  elif (pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or
        pa.types.is_string(kind) or pa.types.is_large_string(kind)):
    encoded = pc.dictionary_encode(column)
    rank_of = np.empty(len(encoded.dictionary), dtype=np.int64)
    rank_of[pc.array_sort_indices(encoded.dictionary).to_numpy()] = \
        np.arange(len(encoded.dictionary))
    ranks, count = rank_of[encoded.indices.to_numpy()], len(rank_of)
  else:
    return None
  ranks = ranks.astype(np.int64, copy=False)
  return (count - 1 - ranks if descending else ranks), max(count, 1)


def _packed(ranks: Sequence[Tuple[np.ndarray, int]]) -> List[np.ndarray]:
  """Rank columns (most significant first) -> as few int64 words, most
  significant first, that compare as the columns do in turn."""
  words: List[np.ndarray] = []
  word, size = None, 1
  for values, count in ranks:
    if word is not None and size * count < 2**62:
      word, size = word * count + values, size * count
    else:
      if word is not None:
        words.append(word)
      word, size = values, count
  if word is not None:
    words.append(word)
  return words


def _first_order(t: pa.Table, leading: Sequence[Tuple[str, str]]
                 ) -> Optional[Tuple[np.ndarray, np.ndarray]]:
  """pc.sort_indices(t, leading + path + row, ascending)'s order, by
  numpy over whole numbers that order as the columns do (one stable sort
  where they pack into one word), and per sorted row whether it ties
  with the row before on `leading`; None where a column is not ranked
  (`_ranks`): then Arrow sorts."""
  ranked = []
  for name, direction in list(leading) + [(_PATH, "ascending"),
                                          (_ROW_SORT, "ascending")]:
    got = _ranks(_column(t, name), direction == "descending")
    if got is None:
      return None
    ranked.append(got)
  words = _packed(ranked)
  order = (np.argsort(words[0], kind="stable") if len(words) == 1 else
           np.lexsort(words[::-1]))
  tie = np.zeros(len(order), dtype=bool)
  if len(order) > 1:
    tie[1:] = True
    for word in _packed(ranked[:len(leading)]):
      sorted_word = word[order]
      tie[1:] &= sorted_word[1:] == sorted_word[:-1]
  return order, tie


class GroupAssembler:
  """Orders the steps of many groups and writes their SequenceExamples.

  Args:
    schema: the SequenceExample schema with group_by.
  """

  def __init__(self, schema: SchemaSource):
    self._schema = s = check_sequence(schema)
    self._reference = SequenceAssembler(s)
    self._row_read = [f for f in s.context if f.column is not None]
    self._constant = [i for i, f in enumerate(self._row_read)
                      if f.derive is None]
    self._sort_keys = (
        [(f"{KEY}{i}", "ascending") for i in range(len(s.group_by))]
        + [(f"{ORDER}{i}", "descending" if k.descending else "ascending")
           for i, k in enumerate(s.order_by)]
        + [(f"{STEP}{i}", "ascending") for i in range(len(s.sequence))]
        + [(f"{name}{i}", "ascending") for i in range(len(self._row_read))
           for name in (_HAS, _VALUE)]
        + [(_PATH, "ascending"), (_ROW_SORT, "ascending")])
    # The record size bound's constant term (SequenceAssembler._size_bound).
    self._fixed_bytes = sum(len(f.name.encode("utf-8")) + ENTRY_OVERHEAD
                            for f in s.context + s.sequence
                            ) + 2 * ENTRY_OVERHEAD

  def __reduce__(self):
    return (GroupAssembler, (self._schema.to_dict(),))

  @property
  def schema(self) -> Schema:
    return self._schema

  def assemble(self, parcels: Sequence[Tuple[str, pa.Table]],
               bad: Optional[Dict[tuple, List[BadRows]]] = None
               ) -> GroupedRecords:
    """Every group in `parcels` ((source path, StepTable.table) pairs, in
    any order; a group's steps may be in several). `bad`: group key ->
    its rows that could not become steps (see SequenceAssembler)."""
    s = self._schema
    t = self._sorted(parcels)
    n = t.num_rows
    if n == 0:
      return GroupedRecords([], Ragged(np.empty(0, np.uint8),
                                       np.zeros(1, np.int64)),
                            np.zeros(1, np.int64), np.zeros(0, np.int64), [])
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for i in range(len(s.group_by)):
      new[1:] |= _changes(_column(t, f"{KEY}{i}"))
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, n))
    first = pa.array(starts)
    keys = list(zip(*(_column(t, f"{KEY}{i}").take(first).to_pylist()
                      for i in range(len(s.group_by)))))
    special = self._special(t, keys, starts, sizes, bad)
    pieces = self._pieces(starts, sizes, special)
    features = step_features(t, len(s.sequence))
    too_big = self._too_big(t, features, pieces, len(starts))
    if (too_big & ~special).any():
      special |= too_big
      pieces = self._pieces(starts, sizes, special)
    group, number, begin, length = pieces
    records = self._records(t, features, begin, length, number)
    if special.any():
      keep = ~special[group]
      records = from_arrow(to_arrow(records).filter(pa.array(keep)))
      group, number, length = group[keep], number[keep], length[keep]
    errors = self._dropped(t, starts, sizes, special)
    # The special groups, written by the reference.
    extra: Dict[int, List[bytes]] = {}
    extra_steps: Dict[int, List[int]] = {}
    for g in np.flatnonzero(special).tolist():
      result = self._reference.assemble(
          self._group_steps(t, features, int(starts[g]), int(sizes[g])),
          (bad or {}).get(keys[g], ()))
      extra[g], extra_steps[g] = result.records, result.steps
      errors += [(g, e) for e in result.errors]
    errors.sort(key=lambda e: e[0])
    return self._collect(keys, group, number, records, length, extra,
                         extra_steps, [(keys[g], e) for g, e in errors])

  def _pieces(self, starts: np.ndarray, sizes: np.ndarray,
              special: np.ndarray) -> _Pieces:
    """(group, number, first step, steps) of every record: one per group,
    or under overflow: split one per max_length steps (keep_first /
    keep_last: the kept steps). A special group is one piece of all its
    steps, whose record is replaced by the reference's."""
    s = self._schema
    max_len = s.max_length
    count = np.ones(len(starts), np.int64)
    if max_len is not None and s.overflow is Overflow.SPLIT:
      count = np.where(special, 1, np.maximum(1, -(-sizes // max_len)))
    group = np.repeat(np.arange(len(starts)), count)
    number = ranges(np.zeros(len(starts), np.int64), count)
    begin, length = starts[group], sizes[group]
    if max_len is None or s.overflow is Overflow.REJECT:
      return _Pieces(group, number, begin, length)
    normal = ~special[group]
    if s.overflow is Overflow.SPLIT:
      begin = np.where(normal, begin + number * max_len, begin)
      length = np.where(normal,
                        np.minimum(max_len, length - number * max_len),
                        length)
    else:
      kept = np.where(normal, np.minimum(length, max_len), length)
      if s.overflow is Overflow.KEEP_LAST:
        begin = begin + length - kept
      length = kept
    return _Pieces(group, number, begin, length)

  def _dropped(self, t, starts, sizes, special) -> List[tuple]:
    """(group, GroupError) of the groups keep_first / keep_last cut, as
    SequenceAssembler words them (examples: the left-out steps nearest to
    the kept ones)."""
    s = self._schema
    max_len = s.max_length
    if max_len is None or s.overflow not in (Overflow.KEEP_FIRST,
                                             Overflow.KEEP_LAST):
      return []
    cut = np.flatnonzero((sizes > max_len) & ~special)
    if not len(cut):
      return []
    paths = json.loads(t.schema.metadata[b"paths"])
    where = _column(t, _PATH).to_numpy()
    rows = _column(t, ROW)
    keep_last = s.overflow is Overflow.KEEP_LAST
    out = []
    for g in cut.tolist():
      n, start = int(sizes[g]), int(starts[g])
      shown = min(SequenceAssembler.EXAMPLES, n - max_len)
      at = ([start + n - max_len - 1 - k for k in range(shown)] if keep_last
            else [start + max_len + k for k in range(shown)])
      out.append((g, GroupError(
          rows=n - max_len, dropped=True,
          reason=f"max_length {max_len:,} (overflow: {s.overflow.value}) "
          f"left out the {'first' if keep_last else 'last'} "
          f"{n - max_len:,} of {n:,} steps",
          examples=tuple((paths[where[i]], rows[i].as_py()) for i in at))))
    return out

  def _sorted(self, parcels) -> pa.Table:
    paths = sorted({path for path, table in parcels if table.num_rows})
    index = {path: i for i, path in enumerate(paths)}
    tables = []
    for path, table in parcels:
      if not table.num_rows:
        continue
      rows = table.column(ROW)
      tables.append(table.append_column(_PATH, pa.array(
          np.full(table.num_rows, index[path], dtype=np.int32))
      ).append_column(_ROW_SORT, pc.fill_null(rows, -1)))
    if not tables:
      return pa.table({})
    # (taken from the parcels' chunks: one copy, not a concatenation
    # and then a take)
    t = self._in_order(pa.concat_tables(tables))
    return t.replace_schema_metadata({"paths": json.dumps(paths)})

  def _keys(self, t: pa.Table) -> pa.Table:
    """t with the steps' sequence features unpacked (STEP<i>, sorted by
    in turn) and the context's sort keys: whether a value is there, and
    the value (missing ones after the others in each run)."""
    keys = t
    for i, values in enumerate(step_features(t, len(self._schema.sequence))):
      keys = keys.append_column(f"{STEP}{i}", to_arrow(values))
    for j in range(len(self._row_read)):
      values = _column(t, f"{CONTEXT}{j}")
      keys = keys.append_column(f"{_HAS}{j}", pc.cast(
          pc.is_valid(values), pa.int8())).append_column(
              f"{_VALUE}{j}", pc.fill_null(values, b""))
    return keys

  def _in_order(self, t: pa.Table) -> pa.Table:
    """t's rows in the order of pc.sort_indices(self._keys(t),
    self._sort_keys), found the cheap way where it can be: sorted first
    by the group keys and order_by (then path and row), only runs of
    steps equal in those need the steps' values and the context to order
    them, and a run whose steps are equal in those too is in order
    already (the same rows repeated). So only runs of steps that tie on
    order_by and differ in content are sorted again by every key: the
    same order, since the full sort keeps runs whole and in their order
    (their columns lead its keys)."""
    leading = [k for k in self._sort_keys
               if k[0].startswith((KEY, ORDER))]
    found = _first_order(t, leading)
    if found is None:
      t = t.take(pc.sort_indices(t, sort_keys=leading + [
          (_PATH, "ascending"), (_ROW_SORT, "ascending")])).combine_chunks()
      tie = _same_as_previous(t, [name for name, _ in leading])
    else:
      order, tie = found
      t = t.take(pa.array(order)).combine_chunks()
    if t.num_rows < 2 or not tie.any():
      return t
    # (the context's has and value keys tie where its values do, and the
    # unpacked steps where the packed ones do: their lengths are the
    # shortest varints)
    content = [STEPS] + [f"{CONTEXT}{j}" for j in range(len(self._row_read))]
    same = _same_as_previous(t, content)
    runs = np.cumsum(~tie)  # the run of each row (ties join runs)
    mixed = np.unique(runs[tie & ~same])
    if not mixed.size:
      return t
    where = np.flatnonzero(np.isin(runs, mixed))
    again = pc.sort_indices(self._keys(t.take(pa.array(where))),
                            sort_keys=self._sort_keys).to_numpy()
    moved = np.arange(t.num_rows)
    moved[where] = where[again]
    return t.take(pa.array(moved)).combine_chunks()

  def _special(self, t, keys, starts, sizes, bad) -> np.ndarray:
    """Which groups need SequenceAssembler for a rejected row, more steps
    than max_length under overflow: reject, or a context conflict (the
    size check comes after the pieces are known: _too_big)."""
    s = self._schema
    special = np.zeros(len(starts), dtype=bool)
    if bad and s.on_bad_step is OnBadStep.REJECT_GROUP:
      where = {key: g for g, key in enumerate(keys)}
      for key in bad:
        if key in where:
          special[where[key]] = True
    over = (np.zeros(len(starts), dtype=bool) if s.max_length is None
            else sizes > s.max_length)
    if s.overflow is Overflow.REJECT:
      special |= over
    if self._constant and len(t) > 1:
      # A group holds a value other than its first step's where two of its
      # steps in a row differ ("equal, or both missing" is transitive).
      differ = ~_same_as_previous(
          t, [f"{CONTEXT}{j}" for j in self._constant])
      differ[starts] = False
      special |= np.add.reduceat(differ.astype(np.int64), starts) > 0
    return special

  def _too_big(self, t: pa.Table, features: List[Ragged], pieces: _Pieces,
               groups: int) -> np.ndarray:
    """Groups with a piece whose size bound (SequenceAssembler's) is over
    max_record_bytes (`features`: the steps' unpacked, step_features)."""
    s = self._schema
    begin, length = pieces.begin, pieces.length
    per_step = np.full(t.num_rows, STEP_OVERHEAD * len(s.sequence),
                       dtype=np.int64)
    for values in features:
      per_step += values.lengths
    context = np.zeros(t.num_rows, dtype=np.int64)
    for j in range(len(self._row_read)):
      context += _lengths(_column(t, f"{CONTEXT}{j}"))
    total = np.zeros(t.num_rows + 1, dtype=np.int64)
    np.cumsum(per_step, out=total[1:])
    end = begin + length
    bound = (total[end] - total[begin] + context[begin] + context[end - 1]
             + self._fixed_bytes)
    out = np.zeros(groups, dtype=bool)
    out[pieces.group[bound > s.max_record_bytes]] = True
    return out

  def _records(self, t: pa.Table, features: List[Ragged], begin: np.ndarray,
               length: np.ndarray, number: np.ndarray) -> Ragged:
    """The SequenceExample of each piece (steps begin..begin+length of the
    sorted table, the pieces covering it in order; `number`: its number
    within its group; `features`: the steps' unpacked)."""
    s = self._schema
    ends = begin + length
    steps = None  # the pieces cover the table in order: no take
    if not (begin[0] == 0 and ends[-1] == t.num_rows
            and np.array_equal(begin[1:], ends[:-1])):
      steps = ranges(begin, length)
    lists: List[messages.Field] = []
    for f, values in zip(s.sequence, features):
      lists.append(messages.Field(
          f.name, messages.steps_column(
              values if steps is None else values.take(steps),
              offsets_of(length)),
          np.ones(len(begin), dtype=bool)))
    context: List[messages.Field] = []
    every = np.arange(len(begin) + 1)
    for f in s.context:
      if f.derive is Derive.LENGTH or f.derive is Derive.PART:
        value = (number if f.derive is Derive.PART
                 else length).astype(np.int64)
        context.append(messages.Field(
            f.name, messages.int64_column(value, every),
            np.ones(len(begin), dtype=bool)))
        continue
      j = self._row_read.index(f)
      at = begin + length - 1 if f.derive is Derive.LAST else begin
      values = _column(t, f"{CONTEXT}{j}").take(pa.array(at))
      context.append(messages.Field(
          f.name, messages.raw_column(from_arrow(values)),
          values.is_valid().to_numpy(zero_copy_only=False)))
    return messages.sequence_examples(wire.sorted_by_name(context),
                                      wire.sorted_by_name(lists),
                                      len(begin))

  def _group_steps(self, t: pa.Table, features: List[Ragged], start: int,
                   size: int) -> List[Tuple[str, List[Step]]]:
    """One group's steps as SequenceAssembler takes them (`features`: the
    steps' unpacked)."""
    s = self._schema
    rows = t.slice(start, size)
    paths = json.loads(t.schema.metadata[b"paths"])

    def columns(prefix, count):
      return list(zip(*(_column(rows, f"{prefix}{i}").to_pylist()
                        for i in range(count)))) or [()] * size

    orders = columns(ORDER, len(s.order_by))
    step_values = list(zip(*(values[start:start + size].to_list()
                             for values in features))) or [()] * size
    context = columns(CONTEXT, len(self._row_read))
    numbers = _column(rows, ROW).to_pylist()
    by_path: Dict[str, List[Step]] = {}
    for path, step in zip(_column(rows, _PATH).to_pylist(), map(
        Step._make, zip(orders, step_values, context, numbers))):
      by_path.setdefault(paths[path], []).append(step)
    return list(by_path.items())

  @staticmethod
  def _collect(keys, group, number, records, length, extra, extra_steps,
               errors) -> GroupedRecords:
    """Records of the vectorized pieces and of the reference's groups,
    group after group in key order."""
    counts = np.bincount(group, minlength=len(keys)).astype(np.int64)
    if extra:
      for g, found in extra.items():
        counts[g] = len(found)
      # Where each vectorized piece and each reference record goes.
      offsets = offsets_of(counts)
      source = np.empty(int(offsets[-1]), dtype=np.int64)
      steps = np.empty(int(offsets[-1]), dtype=np.int64)
      position = offsets[group] + number
      source[position] = np.arange(len(group))
      steps[position] = length
      extra_records: List[bytes] = []
      for g in sorted(extra):
        at = int(offsets[g])
        for i, (record, n) in enumerate(zip(extra[g], extra_steps[g])):
          source[at + i] = len(group) + len(extra_records)
          steps[at + i] = n
          extra_records.append(record)
      every = pa.concat_arrays([
          to_arrow(records),
          pa.array(extra_records, type=pa.large_binary())])
      records = from_arrow(every.take(pa.array(source)))
      length = steps
    keep = counts > 0
    return GroupedRecords([k for k, w in zip(keys, keep.tolist()) if w],
                          records, offsets_of(counts[keep]),
                          length.astype(np.int64), errors)

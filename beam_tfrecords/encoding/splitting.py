"""Splits: which split each input row (or group) goes to. No Beam here.

The schema's `splits:` section names one rule (see `SplitRule`):

* hash: a stable hash of one or more key columns picks the split with the
  declared weights (`80%` or bucket counts); all rows with the same key
  land in the same split, on every run, machine and worker count.
* values: a column's value names the split (optionally mapped).
* below: a column's value is compared with ordered bounds (numbers, or
  text such as ISO dates); the first split whose bound is above the value
  takes the row, `rest` takes the others.

`SplitAssigner(rule).assign(columns, n)` returns each row's split index
and the rows that cannot be assigned, with their reasons.

The hash is FNV-1a (64 bit) over the key's text, the columns separated by
0x1F, finished with splitmix64's mixer; the top 32 bits pick the split.
Key text: integers in decimal, text as UTF-8, bytes as they are, other
types as Arrow casts them to text; a missing value hashes as 0x1E.
`key_hash` is the same function in plain Python.
"""

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.schema.model import (Feature, FeatureType, Schema,
                                         SplitKind, SplitRule)

__all__ = ["SplitAssigner", "key_hash", "hash_columns", "split_fraction",
           "producible_splits",
           "key_types"]

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1
_SEPARATOR = 0x1F
_MISSING = 0x1E


def _mix(h: int) -> int:
  h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
  h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK
  return h ^ (h >> 31)


def key_hash(values: Sequence[Optional[bytes]]) -> int:
  """The split hash of one key (each key column's text bytes, None if
  missing)."""
  h = _FNV_OFFSET
  for i, value in enumerate(values):
    data = bytes([_MISSING]) if value is None else value
    if i:
      data = bytes([_SEPARATOR]) + data
    for b in data:
      h = ((h ^ b) * _FNV_PRIME) & _MASK
  return _mix(h)


def key_text(value: Any) -> Optional[bytes]:
  """The text a split key value is hashed / compared as (None: missing).

  The same value gives the same text whatever the Arrow type of the batch
  it came in: integers in decimal, floats that are whole numbers as
  integers (JSON's 1 and 1.0 are one key), other floats as Python's
  shortest repr, booleans as true / false, text as UTF-8, bytes as they
  are, dates in ISO form, lists and objects as sorted compact JSON.
  """
  if value is None:
    return None
  if isinstance(value, bool):
    return b"true" if value else b"false"
  if isinstance(value, int):
    return str(value).encode("ascii")
  if isinstance(value, float):
    if value.is_integer() and abs(value) < 2**53:
      return str(int(value)).encode("ascii")
    return repr(value).encode("ascii")
  if isinstance(value, str):
    return value.encode("utf-8", "surrogatepass")
  if isinstance(value, bytes):
    return value
  if hasattr(value, "isoformat"):
    return value.isoformat().encode("ascii")
  import json
  return json.dumps(value, sort_keys=True, ensure_ascii=False,
                    separators=(",", ":"), default=str).encode("utf-8")


def _text(array: Any) -> pa.Array:
  """The key text of every value (see key_text), as large_binary."""
  if isinstance(array, pa.ChunkedArray):
    array = array.combine_chunks()
  if isinstance(array, pa.Array) and pa.types.is_dictionary(array.type):
    array = array.dictionary_decode()
  if isinstance(array, pa.Array):
    t = array.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or \
        pa.types.is_binary(t) or pa.types.is_large_binary(t):
      return pc.cast(array, pa.large_binary())
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
      return pc.cast(pc.cast(array, pa.large_string()), pa.large_binary())
    from beam_tfrecords.encoding.columns import python_values
    array = python_values(array)
  return pa.array([key_text(v) for v in array], pa.large_binary())


def _fnv_update(h: np.ndarray, array: pa.Array, first: bool) -> np.ndarray:
  """Feeds one column (key text, or missing) into the running hashes."""
  text = _text(array)
  valid = text.is_valid().to_numpy(zero_copy_only=False)
  _, offsets_buf, data_buf = text.buffers()
  offsets = np.frombuffer(offsets_buf, dtype=np.int64)[
      text.offset:text.offset + len(text) + 1]
  data = (np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None
          else np.empty(0, dtype=np.uint8))
  lengths = np.where(valid, np.diff(offsets), 0)
  prime = np.uint64(_FNV_PRIME)
  with np.errstate(over="ignore"):
    if not first:
      h = (h ^ np.uint64(_SEPARATOR)) * prime
    missing = ~valid
    if missing.any():
      h[missing] = (h[missing] ^ np.uint64(_MISSING)) * prime
    starts = offsets[:-1]
    for k in range(int(lengths.max()) if len(lengths) else 0):
      rows = np.nonzero(lengths > k)[0]
      h[rows] = (h[rows] ^ data[starts[rows] + k].astype(np.uint64)) * prime
  return h


def _mix_array(h: np.ndarray) -> np.ndarray:
  with np.errstate(over="ignore"):
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def hash_columns(arrays: Sequence[pa.Array], n: int) -> np.ndarray:
  """`key_hash` of every row of the key columns, vectorized (uint64)."""
  h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
  for i, array in enumerate(arrays):
    h = _fnv_update(h, array, first=i == 0)
  return _mix_array(h)


def _thresholds(weights: Sequence[float]) -> np.ndarray:
  """Upper bounds (exclusive) in [0, 2**32) of each split's hash range."""
  total = float(sum(weights))
  cumulative = np.cumsum(np.asarray(weights, dtype=np.float64)) / total
  bounds = np.floor(cumulative * 2.0**32).astype(np.uint64)
  bounds[-1] = np.uint64(2**32)
  return bounds


def split_fraction(rule: SplitRule) -> Dict[str, float]:
  """The expected share of each split under a hash rule (else {})."""
  if rule.kind is not SplitKind.HASH:
    return {}
  total = float(sum(rule.weights))
  return {name: w / total for name, w in zip(rule.names, rule.weights)}


def producible_splits(rule: SplitRule) -> List[str]:
  """The splits the rule can give rows to (a hash weight of 0 gives
  none)."""
  if rule.kind is SplitKind.HASH:
    return [n for n, w in zip(rule.names, rule.weights) if w > 0]
  return list(rule.names)


def key_types(schema: Schema) -> Dict[str, FeatureType]:
  """How the split columns' values are read: as the group_by key type, or
  as the type of a scalar feature reading the column (so "07" and "7" are
  one int64 key); columns with neither are read as their text."""
  out: Dict[str, FeatureType] = {}
  for column in schema.splits.columns:
    for c, t in schema.group_by:
      if c == column:
        out[column] = t
    if column not in out:
      for f in schema.all_features:
        if f.column == column and f.is_scalar and f.derive is None:
          out[column] = f.type
          break
  return out


class SplitAssigner:
  """Assigns rows to splits as a SplitRule says.

  Args:
    rule: the schema's split rule.
    types: column -> FeatureType for split columns read as typed values
      (see key_types); others are read as text.
  """

  def __init__(self, rule: SplitRule,
               types: Optional[Mapping[str, FeatureType]] = None):
    self._rule = rule
    self._types = dict(types or {})
    if rule.kind is SplitKind.HASH:
      self._bounds = _thresholds(rule.weights)
    if rule.kind is SplitKind.VALUES:
      self._value_set = pa.array([v for v, _ in rule.values], pa.large_binary())
      self._value_split = np.array([rule.names.index(s) for _, s in rule.values],
                                   dtype=np.int32)

  @property
  def rule(self) -> SplitRule:
    return self._rule

  def assign(self, columns: Mapping[str, Any], n: int
             ) -> Tuple[np.ndarray, Dict[int, str]]:
    """(split index per row, {row: reason} for rows with no split)."""
    rule = self._rule
    if rule.kind is SplitKind.NONE:
      return np.zeros(n, dtype=np.int32), {}
    problems: Dict[int, str] = {}
    arrays = [self._typed(c, columns.get(c), n, problems)
              for c in rule.columns]
    if rule.kind is SplitKind.HASH:
      top = hash_columns(arrays, n) >> np.uint64(32)
      # A key with no value at all would send all such rows to one split.
      keyless = ~np.logical_or.reduce([_valid(a, n) for a in arrays])
      for row in np.nonzero(keyless)[0].tolist():
        problems.setdefault(row, (
            f"the split key ({', '.join(rule.columns)}) has no value; every "
            "row needs one to be assigned a split (is the column missing "
            "from the input?)"))
      return np.searchsorted(self._bounds, top, side="right").astype(
          np.int32), problems
    if rule.kind is SplitKind.VALUES:
      split, more = self._by_value(arrays[0], n)
    else:
      split, more = self._by_bounds(arrays[0], n)
    for row, reason in more.items():
      problems.setdefault(row, reason)
    return split, problems

  def _typed(self, column: str, values: Any, n: int,
             problems: Dict[int, str]) -> pa.Array:
    """The column's values as the key type says (see key_types); rows whose
    value does not convert are problems (and null here)."""
    from beam_tfrecords.encoding import columns as col  # no cycle at import
    ftype = self._types.get(column)
    if ftype is None or values is None:
      return _as_arrow(values, n)
    array = values if isinstance(values, list) else _as_arrow(values, n)
    feature = Feature(name=f"split key {column}", type=ftype, source=column)
    lists, errors = (col.convert_cells(feature, array)
                     if isinstance(array, list)
                     else col.convert_column(feature, array, n))
    for row, reason in errors.items():
      problems.setdefault(row, f'the split column "{column}": {reason}')
    return pc.list_element(lists, 0) if len(lists) else \
        pa.nulls(0, col.VALUE_TYPES[ftype])

  def _by_value(self, array: pa.Array, n: int):
    rule = self._rule
    text = _text(array)
    index = pc.fill_null(pc.index_in(text, value_set=self._value_set),
                         -1).to_numpy(zero_copy_only=False).astype(np.int64)
    found = index >= 0
    out = np.zeros(n, dtype=np.int32)
    out[found] = self._value_split[index[found]]
    errors = {}
    if not found.all():
      allowed = ", ".join(repr(v.decode("utf-8", "replace"))
                          for v, _ in rule.values[:10])
      for row in np.nonzero(~found)[0].tolist():
        value = text[row].as_py()
        if value is None:
          errors[row] = (f'the split column "{rule.columns[0]}" has no value; '
                         "every row needs one")
        else:
          shown = value.decode("utf-8", "replace")[:60]
          errors[row] = (f'the split column "{rule.columns[0]}" holds '
                         f"{shown!r}, which names no split; allowed: "
                         f"{allowed}")
    return out, errors

  def _by_bounds(self, array: pa.Array, n: int):
    rule = self._rule
    numeric = all(isinstance(b, (int, float)) for b in rule.bounds)
    errors: Dict[int, str] = {}
    column = rule.columns[0]
    if isinstance(array, pa.ChunkedArray):
      array = array.combine_chunks()
    if isinstance(array, pa.Array) and pa.types.is_dictionary(array.type):
      array = array.dictionary_decode()
    if numeric:
      values, bad = _numbers(array, n)
      for row in bad:
        errors[row] = (f'the split column "{column}" holds '
                       f"{_show(array, row)}, not a number; the split bounds "
                       "are numbers")
    else:
      values = _text(array)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    rest = len(rule.bounds)
    out = np.full(n, rest, dtype=np.int32)
    for i in range(len(rule.bounds) - 1, -1, -1):
      bound = pa.scalar(rule.bounds[i], values.type) if numeric else \
          pa.scalar(str(rule.bounds[i]).encode("utf-8"), pa.large_binary())
      below = pc.fill_null(pc.less(values, bound), False).to_numpy(
          zero_copy_only=False)
      out[below] = i
    for row in np.nonzero(~valid)[0].tolist():
      errors.setdefault(row, f'the split column "{column}" has no value; '
                        "every row needs one")
    if rule.rest is None:
      last = rule.bounds[-1]
      for row in np.nonzero((out == rest) & valid)[0].tolist():
        errors.setdefault(row, f'the split column "{column}" holds '
                          f"{_show(array, row)}, not below the last bound "
                          f"{last!r}; add `rest: <split>` for such rows")
    return out, errors


def _numbers(array: pa.Array, n: int) -> Tuple[pa.Array, List[int]]:
  """float64 values; rows that are not numbers become null (and listed)."""
  if isinstance(array, pa.Array) and (pa.types.is_integer(array.type)
                                      or pa.types.is_floating(array.type)):
    return pc.cast(array, pa.float64()), []
  text = _text(array)
  try:
    return pc.cast(pc.utf8_trim_whitespace(pc.cast(text, pa.large_string())),
                   pa.float64()), []
  except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
    pass
  out: List[Optional[float]] = []
  bad: List[int] = []
  for row, value in enumerate(text.to_pylist()):
    if value is None:
      out.append(None)
      continue
    try:
      out.append(float(value.decode("utf-8").strip()))
    except (ValueError, UnicodeDecodeError):
      out.append(None)
      bad.append(row)
  return pa.array(out, pa.float64()), bad


def _show(array: Any, row: int) -> str:
  value = array[row]
  if isinstance(value, pa.Scalar):
    from beam_tfrecords.encoding.columns import python_values
    value = python_values(array.slice(row, 1))[0]
  if isinstance(value, bytes):
    value = value.decode("utf-8", "replace")
  return repr(value)[:60]


def _valid(values: Any, n: int) -> np.ndarray:
  """Which rows of a key column (Arrow array or Python list) have a value."""
  if isinstance(values, list):
    return np.array([v is not None for v in values], dtype=bool).reshape(n)
  return values.is_valid().to_numpy(zero_copy_only=False).astype(bool)


def _as_arrow(values: Any, n: int) -> Any:
  """A column as given (Arrow array, or a Python list of mixed values),
  or all missing when absent."""
  if values is None:
    return pa.nulls(n, pa.large_binary())
  return values

"""Applies a schema to Arrow columns: casts, list splitting, defaults, checks.

`convert_column(feature, array)` turns one input column (any Arrow type: the
strings of a CSV, the typed columns of Parquet, JSON values) into a
`pa.LargeListArray` of the stored type, null where the value is missing, plus
the rows that cannot be encoded with their reasons.

The fast path is pyarrow compute over the whole column. Whenever it meets
something it cannot decide (a value that does not parse, an overflow, a JSON
list inside a CSV cell, a nested list) it hands the column to the reference
rules in `beam_tfrecords.schema.values`, value by value, which also produce
the per-row reasons. Both give the same arrays
(tests/unit/encoding/test_example.py::test_arrow_path_equals_reference_path).
"""

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.core import native
from beam_tfrecords.encoding.ragged import offsets_of
from beam_tfrecords.schema import values as value_rules
from beam_tfrecords.schema.model import Feature, FeatureType

__all__ = ["VALUE_TYPES", "RowErrors", "list_type", "batch_columns", "input_of",
           "convert_input", "convert_column", "convert_cells", "apply_missing",
           "python_values", "is_text", "is_list", "as_utf8"]

# The Arrow type a feature's values are held in before serialization.
VALUE_TYPES = {
    FeatureType.INT64: pa.int64(),
    FeatureType.FLOAT: pa.float32(),
    FeatureType.STRING: pa.large_binary(),
    FeatureType.BYTES: pa.large_binary(),
}

# row index -> reason
RowErrors = Dict[int, str]


class _Fallback(Exception):
  """The fast path cannot decide; use the per-value rules."""


def list_type(feature: Feature) -> pa.DataType:
  return pa.large_list(VALUE_TYPES[feature.type])


def convert_cells(feature: Feature, cells: Sequence[Any]
                  ) -> Tuple[pa.LargeListArray, RowErrors]:
  """The reference path: converts Python cells one by one."""
  out: List[Optional[list]] = []
  errors: RowErrors = {}
  for row, cell in enumerate(cells):
    try:
      out.append(value_rules.convert_cell(feature, cell))
    except ValueError as e:
      errors[row] = str(e)
      out.append(None)
  return pa.array(out, type=list_type(feature)), errors


def batch_columns(batch: Any) -> Dict[str, Any]:
  """An Arrow RecordBatch's (or Table's) columns by name."""
  return {name: batch.column(i) for i, name in enumerate(batch.schema.names)}


def input_of(feature: Feature, columns: Mapping[str, Any]) -> Any:
  """What `feature` reads from `columns` (column name -> values): None
  when the column is absent or the feature is computed (no column)."""
  return None if feature.column is None else columns.get(feature.column)


def convert_input(feature: Feature, columns: Mapping[str, Any], num_rows: int
                  ) -> Tuple[pa.LargeListArray, RowErrors]:
  """Converts the column `feature` reads: Python cells (a list) value by
  value, an Arrow column by `convert_column`."""
  array = input_of(feature, columns)
  if isinstance(array, list):
    return convert_cells(feature, array)
  return convert_column(feature, array, num_rows)


def convert_column(feature: Feature, array: Optional[pa.Array],
                   num_rows: int) -> Tuple[pa.LargeListArray, RowErrors]:
  """Converts one input column (None: the column is absent, all missing)."""
  if array is None:
    return pa.nulls(num_rows, list_type(feature)), {}
  if isinstance(array, pa.ChunkedArray):
    array = array.combine_chunks()
  try:
    return _fast_column(feature, array), {}
  except (_Fallback, pa.ArrowInvalid, pa.ArrowNotImplementedError,
          pa.ArrowTypeError):
    pass
  good = _fast_rows(feature, array)
  if good is None or not good.any():
    return convert_cells(feature, python_values(array))
  # Most rows are fine: the fast path takes them, the reference path the
  # rest (a few bad cells should not send a whole batch through Python).
  fast_rows = np.nonzero(good)[0]
  slow_rows = np.nonzero(~good)[0]
  try:
    fast = _fast_column(feature, array.filter(pa.array(good)))
  except (_Fallback, pa.ArrowInvalid, pa.ArrowNotImplementedError,
          pa.ArrowTypeError):
    return convert_cells(feature, python_values(array))
  slow, slow_errors = convert_cells(
      feature, python_values(array.filter(pa.array(~good))))
  order = np.concatenate([fast_rows, slow_rows])
  merged = pa.concat_arrays([fast, slow]).take(pa.array(np.argsort(order)))
  return merged, {int(slow_rows[i]): reason
                  for i, reason in slow_errors.items()}


def _fast_rows(feature: Feature, array: pa.Array) -> Optional[np.ndarray]:
  """For a scalar number feature read from text: the rows whose text the
  fast path converts exactly as the reference rules do (None: no such
  split applies)."""
  if not feature.is_scalar or feature.type not in (FeatureType.INT64,
                                                   FeatureType.FLOAT):
    return None
  if not isinstance(array, pa.Array) or not is_text(array.type):
    return None
  try:
    text = as_utf8(array)
  except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
    return None  # not UTF-8: the reference rules say which row
  pattern = (value_rules.INT_TEXT if feature.type is FeatureType.INT64
             else value_rules.FLOAT_TEXT)
  matches = pc.match_substring_regex(pc.utf8_trim_whitespace(text), pattern)
  return pc.fill_null(matches, True).to_numpy(zero_copy_only=False)


def _retyped(t: pa.DataType, leaf) -> pa.DataType:
  """`t` with each leaf type replaced by leaf(type) (lists kept)."""
  if pa.types.is_large_list(t):
    return pa.large_list(_retyped(t.value_type, leaf))
  if pa.types.is_list(t) or pa.types.is_fixed_size_list(t):
    return pa.list_(_retyped(t.value_type, leaf))
  return leaf(t)


def _date_text(t: pa.DataType) -> pa.DataType:
  return pa.large_string() if pa.types.is_date(t) else t


def _text_bytes(t: pa.DataType) -> pa.DataType:
  if pa.types.is_string(t):
    return pa.binary()
  return pa.large_binary() if pa.types.is_large_string(t) else t


def python_values(array: pa.Array) -> list:
  """array.to_pylist(), with two repairs: dates outside years 1-9999,
  which Python cannot hold, come as Arrow's ISO text (as the fast path
  writes them); text that is not UTF-8 comes as bytes (the value rules
  then say which row)."""
  try:
    return array.to_pylist()
  except OverflowError:
    return pc.cast(array, _retyped(array.type, _date_text)).to_pylist()
  except UnicodeDecodeError:
    return pc.cast(array, _retyped(array.type, _text_bytes)).to_pylist()


def apply_missing(feature: Feature, lists: pa.LargeListArray,
                  errors: RowErrors) -> pa.LargeListArray:
  """Fills defaults and flags missing required values (adds to `errors`)."""
  if lists.null_count == 0:
    return lists
  if feature.required:
    for row in np.nonzero(lists.is_null().to_numpy(zero_copy_only=False))[0]:
      errors.setdefault(int(row), f'required value is missing (column '
                        f'"{feature.column}" has no value)')
    return lists
  if feature.default is not None:
    filled = _filled_numbers(feature, lists)
    if filled is not None:
      return filled
    default = pa.scalar(list(feature.default), type=list_type(feature))
    return pc.fill_null(lists, default)
  return lists


def _filled_numbers(feature: Feature, lists: pa.LargeListArray
                    ) -> Optional[pa.LargeListArray]:
  """pc.fill_null(lists, the feature's default) for int64 and float
  features, by numpy: Arrow's fill_null of a list array with a list
  takes 3 ms per 90,000 rows, a sixth of a grouped build's step
  encoding. None for other types, or values with nulls of their own."""
  if feature.default is None or feature.type not in (FeatureType.INT64,
                                                     FeatureType.FLOAT):
    return None
  flat = lists.flatten()
  if flat.null_count:
    return None
  kind = lists.type.value_type
  default = pa.array(list(feature.default), type=kind).to_numpy(
      zero_copy_only=False)
  valid = lists.is_valid().to_numpy(zero_copy_only=False)
  lengths = np.where(valid, pc.fill_null(pc.list_value_length(lists), 0)
                     .to_numpy(zero_copy_only=False), len(default))
  offsets = offsets_of(lengths)
  values = np.empty(int(offsets[-1]), dtype=default.dtype)
  given = np.repeat(valid, lengths)
  values[given] = flat.to_numpy(zero_copy_only=False)
  values[~given] = np.tile(default, int(len(lists) - valid.sum()))
  return pa.LargeListArray.from_arrays(pa.array(offsets),
                                       pa.array(values, type=kind),
                                       type=lists.type)


# ---------------------------------------------------------------------------
# The fast path.


def is_text(t: pa.DataType) -> bool:
  return (pa.types.is_string(t) or pa.types.is_large_string(t)
          or pa.types.is_binary(t) or pa.types.is_large_binary(t))


def is_list(t: pa.DataType) -> bool:
  return (pa.types.is_list(t) or pa.types.is_large_list(t)
          or pa.types.is_fixed_size_list(t))


def as_utf8(array: pa.Array) -> pa.Array:
  if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
    return pc.cast(array, pa.large_string())  # raises on invalid UTF-8
  return array


def _all_match(text: pa.Array, pattern: str) -> bool:
  matches = pc.match_substring_regex(text, pattern)
  return matches.null_count == len(matches) or pc.all(matches).as_py()


def _to_float32(f64: pa.Array, text: Optional[pa.Array] = None
                ) -> pa.Array:
  """float64 -> float32; a value that would become inf though its input
  does not say inf (3.4e39, or `text` such as "1e309" that float64 already
  reads as inf) goes to the reference rules, which refuse it."""
  f32 = pc.cast(f64, pa.float32(), safe=False)
  overflow = pc.and_(pc.is_finite(f64), pc.is_inf(f32))
  if text is not None and pc.any(pc.is_inf(f64)).as_py():
    written_inf = pc.match_substring_regex(
        text, value_rules.SPECIAL_FLOAT_TEXT)
    overflow = pc.or_(overflow, pc.and_(pc.is_inf(f64),
                                        pc.invert(written_inf)))
  if pc.any(overflow).as_py():
    raise _Fallback()
  return f32


# The bytes of a plain integer's text (no space, sign "+" or fraction).
_DIGITS = b"0123456789-"
_AS_TEXT = {pa.binary(): pa.string(), pa.large_binary(): pa.large_string(),
            pa.string(): pa.string(), pa.large_string(): pa.large_string()}


def _plain_numbers(ftype: FeatureType, array: pa.Array
                   ) -> Optional[pa.Array]:
  """Plain number text as VALUE_TYPES[ftype]; None for anything else,
  which the rules of the general path then judge. The native core, where
  it runs, reads int64 and float text in one pass (`_native_numbers`).
  Without it, integers whose every value byte is a digit or "-" (most
  integer columns) are cast at once; spaces, "+4", "4.00", "4-", a
  number past int64... are not, and floats are not."""
  text_type = _AS_TEXT.get(array.type)
  buffers = array.buffers()
  if text_type is None or buffers[2] is None:
    return None
  module = native.core()
  if module is not None:
    return _native_numbers(module, array, ftype)
  if ftype is not FeatureType.INT64:
    return None
  wide = np.int64 if text_type == pa.large_string() else np.int32
  offsets = np.frombuffer(buffers[1], dtype=wide)
  first, last = array.offset, array.offset + len(array)
  data = memoryview(buffers[2])[int(offsets[first]):int(offsets[last])]
  if bytes(data).translate(None, _DIGITS):  # a byte that is not a digit
    return None
  try:
    return pc.cast(array.view(text_type), pa.int64())
  except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
    return None


def _native_numbers(module, array: pa.Array, ftype: FeatureType
                    ) -> Optional[pa.Array]:
  """Number text as VALUE_TYPES[ftype] by the native core, in one pass:
  int64 where every present value is `-?[0-9]+` within int64, float32
  where every one is float text without spaces, nan or inf that float32
  holds; else None, and the rules of the general path judge the column.
  `array` is text with a data buffer (_AS_TEXT). Buffers the core does
  not take (offsets not aligned to their size, as a buffer read from
  a file at any byte may be; too few of them) go to the general path
  too."""
  buffers = array.buffers()
  wide = _AS_TEXT[array.type] == pa.large_string()
  if buffers[1] is None or buffers[1].address % (8 if wide else 4):
    return None
  offsets = np.frombuffer(buffers[1], dtype=np.int64 if wide else np.int32)
  offsets = offsets[array.offset:array.offset + len(array) + 1]
  if len(offsets) != len(array) + 1:
    return None
  valid = buffers[0] if array.null_count else None
  try:
    got = module.parse_numbers(buffers[2], offsets, wide, valid,
                               array.offset, ftype is FeatureType.FLOAT)
  except ValueError:  # (what the core refuses: the general path judges)
    return None
  if got is None:
    return None
  values, bits = got
  return pa.Array.from_buffers(
      VALUE_TYPES[ftype], len(array),
      [None if bits is None else pa.py_buffer(bits), pa.py_buffer(values)],
      null_count=array.null_count)


def _fast_values(ftype: FeatureType, array: pa.Array) -> pa.Array:
  """Converts flat values (nulls kept) to VALUE_TYPES[ftype], or raises."""
  t = array.type
  if pa.types.is_dictionary(t):
    array = array.dictionary_decode()
    t = array.type
  if pa.types.is_null(t):
    return pa.nulls(len(array), VALUE_TYPES[ftype])
  if ftype in (FeatureType.INT64, FeatureType.FLOAT):
    if is_text(t):
      plain = _plain_numbers(ftype, array)
      if plain is not None:
        return plain
    if is_text(t):
      text = pc.utf8_trim_whitespace(as_utf8(array))
      pattern = (value_rules.INT_TEXT if ftype is FeatureType.INT64
                 else value_rules.FLOAT_TEXT)
      if not _all_match(text, pattern):
        raise _Fallback()
      if ftype is FeatureType.INT64:
        # "+4.00" -> "4": Arrow's cast takes neither the sign nor ".00".
        text = pc.replace_substring_regex(
            text, value_rules.PLUS_SIGN + "|" + value_rules.ZERO_FRACTION, "")
      else:
        return _to_float32(pc.cast(text, pa.float64()), text)
      array = text
    elif not (pa.types.is_integer(t) or pa.types.is_floating(t)
              or pa.types.is_boolean(t) or pa.types.is_decimal(t)):
      raise _Fallback()
    if ftype is FeatureType.INT64:
      if pa.types.is_floating(array.type) and pc.any(
          pc.invert(pc.is_finite(array))).as_py():
        raise _Fallback()
      return pc.cast(array, pa.int64())  # safe: raises on overflow/fractions
    return _to_float32(pc.cast(array, pa.float64()))
  if is_text(t):
    if ftype is FeatureType.STRING:
      array = as_utf8(array)
    return pc.cast(array, pa.large_binary())
  if ftype is FeatureType.STRING and (pa.types.is_integer(t)
                                      or pa.types.is_date(t)):
    # Dates as ISO 8601 text, "2026-11-05" (values.py's rule too).
    return pc.cast(pc.cast(array, pa.large_string()), pa.large_binary())
  raise _Fallback()


def _wrap_scalars(values: pa.Array) -> pa.LargeListArray:
  """One-element lists, null where the value is null."""
  valid = values.is_valid().to_numpy(zero_copy_only=False)
  offsets = np.zeros(len(values) + 1, dtype=np.int64)
  np.cumsum(valid, out=offsets[1:])
  mask = pa.array(~valid) if values.null_count else None
  return pa.LargeListArray.from_arrays(
      pa.array(offsets), values.drop_null(), mask=mask)


def _check_length(feature: Feature, lists: pa.LargeListArray) -> None:
  expected = feature.num_values
  if expected is None or lists.null_count == len(lists):
    return
  lengths = pc.list_value_length(lists)
  if not pc.all(pc.equal(lengths, expected)).as_py():
    raise _Fallback()


def _fast_lists(feature: Feature, array: pa.Array) -> pa.LargeListArray:
  """Converts a list column (Arrow lists) value by value."""
  if pa.types.is_fixed_size_list(array.type):
    array = pc.cast(array, pa.large_list(array.type.value_type))
  if is_list(array.type.value_type):
    raise _Fallback()  # nested lists: flattening rules live in values.py
  offsets = np.asarray(array.offsets, dtype=np.int64)
  start, end = int(offsets[0]), int(offsets[-1])
  valid = array.is_valid().to_numpy(zero_copy_only=False)
  if array.null_count and np.any(np.diff(offsets)[~valid]):
    raise _Fallback()  # null rows that still own values: let values.py judge
  values = _fast_values(feature.type, array.values.slice(start, end - start))
  if values.null_count:
    raise _Fallback()  # a null inside a list is an error with a reason
  mask = pa.array(~valid) if array.null_count else None
  return pa.LargeListArray.from_arrays(pa.array(offsets - start), values,
                                       mask=mask)


def _fast_split(feature: Feature, array: pa.Array) -> pa.LargeListArray:
  """Splits delimited text cells ("" is the empty list)."""
  if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
    if feature.type is not FeatureType.BYTES:
      array = as_utf8(array)
  if pc.any(pc.equal(pc.binary_length(array), 0)).as_py():
    raise _Fallback()
  return _fast_lists(feature, pc.split_pattern(array, feature.separator))


def _fast_column(feature: Feature, array: pa.Array) -> pa.LargeListArray:
  t = array.type
  if pa.types.is_dictionary(t):
    array = array.dictionary_decode()
    t = array.type
  if feature.is_scalar:
    if is_list(t):
      raise _Fallback()
    return _wrap_scalars(_fast_values(feature.type, array))
  if is_list(t):
    lists = _fast_lists(feature, array)
  elif is_text(t) and feature.separator is not None:
    lists = _fast_split(feature, array)
  elif is_text(t):
    # A cell holding a JSON list, or an empty cell, follows the text rules.
    if pc.any(pc.starts_with(as_utf8(array), "[")).as_py() or pc.any(
        pc.equal(pc.binary_length(array), 0)).as_py():
      raise _Fallback()
    lists = _wrap_scalars(_fast_values(feature.type, array))
  else:
    lists = _wrap_scalars(_fast_values(feature.type, array))
  _check_length(feature, lists)
  return lists

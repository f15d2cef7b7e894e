"""Tensor features: cells -> numeric arrays of the declared dtype and shape.

A tensor is read from one of three places (schema `from`):

* list cells of one column: nested lists (nested exactly as the shape),
  flat lists (row-major), JSON list text, or text split by `separator`
  (by commas / whitespace without one);
* several numeric columns, one value each, in source order;
* .npy files (the file's bytes go through `npy_array`; the fetch that
  encoding.media is given reads them).

Integer dtypes take whole numbers only, read exactly (text as a decimal,
never through a float) and range-checked; float16 / float32 refuse finite
values that overflow. The arrays are stored (`tensor_columns`) as raw
little-endian bytes plus a shape (storage: bytes) or as a flat int64 /
float32 list (storage: list). A row whose value cannot be stored gets a
problem with its reason and stores nothing.
"""

import decimal
import io
import json
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.encoding.media_cells import (MediaError, Problems,
                                                 add_problem, binary_array,
                                                 cells, text)
from beam_tfrecords.schema.model import Media, made_column

__all__ = ["npy_array", "gathered_rows", "listed_rows", "tensor_columns"]

Shape = Tuple[int, ...]
# Per row: an array, or None (missing, or the row has a problem).
Rows = List[Optional[np.ndarray]]


def npy_array(data: bytes, path: str, dtype: np.dtype,
              shape: Shape) -> np.ndarray:
  """The array a .npy file holds, as `dtype`, if its shape is `shape` (-1:
  any size) and its values fit `dtype` without loss.

  Raises:
    MediaError: not one .npy array, another shape, or values that do not
      fit; the message starts with the path.
  """
  try:
    loaded = np.load(io.BytesIO(data), allow_pickle=False)
  except Exception as e:  # pylint: disable=broad-except
    raise MediaError(f"{path}: not a .npy array ({e})") from None
  if not isinstance(loaded, np.ndarray):
    raise MediaError(f"{path}: holds several arrays (.npz); give one "
                     ".npy file per row")
  return _checked(loaded, dtype, shape, path)


def gathered_rows(m: Media, arrays: Mapping[str, Any], n: int,
                  dtype: np.dtype, problems: Problems) -> Rows:
  """Several numeric columns -> one array per row (in source order)."""
  matrix = np.zeros((n, len(m.sources)), dtype=np.float64 if
                   dtype.kind == "f" else np.int64)
  present = np.zeros((n, len(m.sources)), dtype=bool)
  for j, c in enumerate(m.sources):
    values, valid, errors = _numbers(arrays[c], n, dtype.kind == "f")
    matrix[:, j] = values
    present[:, j] = valid
    for row, reason in errors.items():
      add_problem(problems, row, m.name, f'column "{c}": {reason}')
  shape = tuple(m.options["shape"])
  out: List[Any] = []
  for row in range(n):
    if not present[row].any():
      out.append(None)
      continue
    if not present[row].all():
      missing = [c for c, p in zip(m.sources, present[row]) if not p]
      add_problem(problems, row, m.name,
                  f"column(s) {', '.join(missing[:5])} have no value; "
                  "every column of a tensor needs one")
      out.append(None)
      continue
    out.append(matrix[row])
  return _cast_rows(m, out, dtype, shape, problems)


def listed_rows(m: Media, array: Any, n: int, dtype: np.dtype, shape: Shape,
                problems: Problems) -> Rows:
  """List cells (nested lists, or text split by `separator`) -> arrays."""
  sep = m.options.get("separator")
  is_float = dtype.kind == "f"
  out: List[Any] = []
  for row, cell in enumerate(cells(array, n)):
    if cell is None:
      out.append(None)
      continue
    try:
      if isinstance(cell, (bytes, str)) and not (
          sep is None and str(text(cell)).lstrip().startswith("[")):
        line = str(text(cell))
        words = line.split(sep) if sep else line.replace(",", " ").split()
        values = [_parse_number(w.strip(), is_float)
                  for w in words if w.strip()]
      else:
        if isinstance(cell, (bytes, str)):  # JSON list text
          try:
            cell = json.loads(str(text(cell)))
          except ValueError as e:
            raise ValueError(f"not a JSON list ({e})") from None
          except RecursionError:  # "[[[[..." thousands deep
            raise ValueError("a JSON list nested too deep to read") from None
        if not isinstance(cell, (list, tuple)):
          cell = [cell]
        values = [_parse_number(v, is_float)
                  for v in _list_values(list(cell), shape)]
    except (ValueError, TypeError, OverflowError) as e:
      add_problem(problems, row, m.name, str(e))
      out.append(None)
      continue
    out.append(np.array(values, dtype=np.float64 if is_float else object))
  return _cast_rows(m, out, dtype, shape, problems)


def tensor_columns(m: Media, values: Sequence[Union[np.ndarray, None]],
                   required: bool, problems: Problems
                   ) -> Dict[str, pa.Array]:
  """The made columns of a tensor feature from its rows' arrays (None:
  missing); a missing required value, or a float that float32 storage
  cannot keep, adds a problem and stores nothing for the row."""
  o = m.options
  dtype = np.dtype(o["dtype"])
  shape = tuple(o["shape"])
  for row, v in enumerate(values):
    if v is None and required and row not in problems:
      add_problem(problems, row, m.name,
                  f"required tensor is missing (column(s) "
                  f"{', '.join(m.sources)} have no value)")
  good = [v if isinstance(v, np.ndarray) and row not in problems else None
          for row, v in enumerate(values)]
  if o["storage"] == "bytes":
    little = dtype.newbyteorder("<")
    return {
        made_column(m.name, "bytes"): binary_array(
            [None if v is None else v.astype(little).tobytes()
             for v in good]),
        made_column(m.name, "shape"): pa.array(
            [None if v is None else list(v.shape) for v in good],
            type=pa.large_list(pa.int64())),
    }
  size = int(np.prod(shape))
  valid = np.array([v is not None for v in good], dtype=bool)
  is_float = dtype.kind == "f"
  flat = (np.concatenate([v.reshape(-1) for v in good if v is not None])
          if valid.any() else np.zeros(0))
  if is_float:
    big = np.abs(flat.astype(np.float64)) > np.finfo(np.float32).max
    big &= np.isfinite(flat.astype(np.float64))
    if big.any():
      rows = np.nonzero(valid)[0][np.nonzero(big)[0] // size]
      for row in sorted(set(rows.tolist())):
        add_problem(problems, row, m.name,
                    "a value does not fit float32 (storage: list keeps "
                    "float32); use storage: bytes")
      keep = valid.copy()
      keep[rows] = False
      flat = flat.reshape(-1, size)[keep[valid]].reshape(-1)
      valid = keep
  return {made_column(m.name, "values"): _fixed_lists(
      flat.astype(np.float32 if is_float else np.int64), size, valid,
      pa.float32() if is_float else pa.int64())}


def _fixed_lists(flat: np.ndarray, per_row: int, valid: np.ndarray,
                 value_type: pa.DataType) -> pa.Array:
  """Rows of `per_row` values (flat holds the valid rows' values only)."""
  counts = np.where(valid, per_row, 0).astype(np.int64)
  offsets = np.zeros(len(valid) + 1, dtype=np.int64)
  np.cumsum(counts, out=offsets[1:])
  return pa.LargeListArray.from_arrays(
      pa.array(offsets), pa.array(flat, type=value_type),
      mask=pa.array(~valid))


def _parse_number(value: Any, is_float: bool) -> Union[int, float]:
  """A number from a cell value; for integer dtypes only whole numbers
  (exactly: text is read as a decimal, not through a float)."""
  if isinstance(value, bool):
    return int(value)
  if isinstance(value, int):
    return value
  if isinstance(value, float):
    if is_float:
      return value
    if not math.isfinite(value) or not value.is_integer():
      raise ValueError(f"{value!r} is not a whole number")
    return int(value)
  if isinstance(value, (bytes, str)):
    line = str(text(value)).strip()
    try:
      return float(line) if is_float else int(line)
    except ValueError:
      pass
    try:
      number = decimal.Decimal(line)
    except decimal.InvalidOperation:
      raise ValueError(f"{line[:40]!r} is not a number") from None
    if not number.is_finite() or number != number.to_integral_value():
      raise ValueError(f"{line[:40]!r} is not a whole number")
    return int(number)
  raise ValueError(f"{str(value)[:40]!r} is not a number")


def _list_values(cell: list, shape: Shape) -> list:
  """The values of a list cell: flat (row-major) or nested as `shape`."""
  if not any(isinstance(v, (list, tuple)) for v in cell):
    return list(cell)
  nested = np.asarray(cell, dtype=object)
  if nested.shape != tuple(shape) or any(
      isinstance(v, (list, tuple)) for v in nested.reshape(-1).tolist()):
    raise ValueError(f"the lists are nested as {list(nested.shape)} (or "
                     f"ragged), not as the shape {list(shape)}")
  return nested.reshape(-1).tolist()


def _numbers(array: Any, n: int, is_float: bool
             ) -> Tuple[np.ndarray, np.ndarray, Dict[int, str]]:
  """(values, valid, {row: reason}) of one numeric column."""
  values = np.zeros(n, dtype=np.float64 if is_float else np.int64)
  valid = np.zeros(n, dtype=bool)
  errors: Dict[int, str] = {}
  if array is None:
    return values, valid, errors
  target = pa.float64() if is_float else pa.int64()
  if isinstance(array, (pa.Array, pa.ChunkedArray)):
    arr = array.combine_chunks() if isinstance(array, pa.ChunkedArray) \
        else array
    if pa.types.is_dictionary(arr.type):
      arr = arr.dictionary_decode()
    try:
      if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        arr = pc.utf8_trim_whitespace(arr)
        arr = pc.if_else(pc.equal(arr, ""), pa.scalar(None, arr.type), arr)
      cast = pc.cast(arr, target)
      valid = cast.is_valid().to_numpy(zero_copy_only=False)
      values = cast.fill_null(0).to_numpy(zero_copy_only=False)
      return values, valid, errors
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
      pass
  for row, cell in enumerate(cells(array, n)):
    if cell is None or (isinstance(cell, (str, bytes)) and
                        not str(text(cell)).strip()):
      continue
    try:
      values[row] = _parse_number(cell, is_float)
      valid[row] = True
    except (ValueError, TypeError, OverflowError) as e:
      errors[row] = str(e)
  return values, valid, errors


def _cast_rows(m: Media, rows: Sequence[Any], dtype: np.dtype, shape: Shape,
               problems: Problems) -> Rows:
  out: Rows = []
  for row, v in enumerate(rows):
    if v is None or row in problems:
      out.append(None)
      continue
    try:
      out.append(_checked(np.asarray(v), dtype, shape, None))
    except (MediaError, ValueError, TypeError, OverflowError) as e:
      add_problem(problems, row, m.name, str(e))
      out.append(None)
  return out


def _checked(array: np.ndarray, dtype: np.dtype, shape: Shape,
             path: Optional[str]) -> np.ndarray:
  """The array as `dtype` and `shape` (-1: any size), or MediaError."""
  where = f"{path}: " if path else ""
  if path is not None:  # a loaded array keeps its shape
    if array.ndim != len(shape) or any(
        d != -1 and d != s for d, s in zip(shape, array.shape)):
      raise MediaError(f"{where}the array has shape {list(array.shape)}, "
                       f"not {list(shape)}")
    if array.dtype == dtype:
      return array
    if np.can_cast(array.dtype, dtype, casting="safe"):
      converted = array.astype(dtype)
      # NumPy calls int64 -> float64 safe; past 2**53 it is not exact.
      if array.dtype.kind in "iu" and dtype.kind == "f" and not \
          np.array_equal(converted.astype(array.dtype), array):
        raise MediaError(f"{where}the {array.dtype} values do not all fit "
                         f"{dtype} exactly; declare dtype: {array.dtype}")
      return converted
    raise MediaError(f"{where}the array holds {array.dtype}, which does not "
                     f"fit {dtype} without loss; declare dtype: "
                     f"{array.dtype}")
  size = int(np.prod(shape))
  flat = array.reshape(-1)
  if flat.size != size:
    raise MediaError(f"{flat.size} values, but shape {list(shape)} takes "
                     f"{size}")
  if dtype.kind in "iu":
    info = np.iinfo(dtype)
    ints = [_parse_number(v, False) for v in flat.tolist()]
    bad = [v for v in ints if not info.min <= v <= info.max]
    if bad:
      raise MediaError(f"{bad[0]} is outside the range of {dtype} "
                       f"({info.min}..{info.max})")
    return np.array(ints, dtype=dtype).reshape(shape)
  values = flat.astype(np.float64)
  if dtype != np.float64:  # float16 / float32: finite values that overflow
    big = np.isfinite(values) & (np.abs(values) > np.finfo(dtype).max)
    if big.any():
      raise MediaError(f"{values[big][0]} does not fit {dtype}")
  return values.astype(dtype).reshape(shape)

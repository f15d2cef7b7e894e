"""Reading paths (schema.field_paths) out of nested columns: Arrow struct field
access and list flattening, with a per-row Python walk for JSON columns
that Arrow cannot type (values of mixed types).

    resolve(column, parse_path("ratings[].movie_id"))
    # -> one list per row: the movie_id of every element of ratings

Without `[]` a path gives one value per row; with, one list per row (all
`[]` levels flattened in order). A missing key or a null anywhere on the
way is a missing value: before the first `[]`, the row's value is
missing; inside a list, a missing field is a null element (so lists read
from the same `X[]` stay aligned) and a missing list adds no elements. A step that meets a
value that is not an object (`.name`) or not a list (`[]`) is a
PathError naming the path and the value met.
"""

from typing import Any, List, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.schema.field_paths import Path

__all__ = ["resolve", "PathError", "check_type"]


class PathError(ValueError):
  """A path meets a value of the wrong kind; `row`: the row of the column
  it met it in (counted from 0), or None for a column's type."""

  def __init__(self, message: str, row: Optional[int] = None):
    super().__init__(message)
    self.row = row


def _where(path: Path, upto: int) -> str:
  text = path.root
  for kind, name in path.steps[:upto]:
    text += "[]" if kind == "each" else f".{name}"
  return text


def _kind(t: pa.DataType) -> str:
  if pa.types.is_struct(t):
    return "an object"
  if pa.types.is_list(t) or pa.types.is_large_list(t):
    return "a list"
  return f"a {t} value"


def check_type(path: Path, t: pa.DataType) -> pa.DataType:
  """The Arrow type at the end of `path` from a column of type `t` (the
  element type for paths with `[]`).

  Raises:
    PathError: a step meets the wrong kind of value.
  """
  for i, (kind, name) in enumerate(path.steps):
    if pa.types.is_null(t):
      return t
    if kind == "field":
      if not pa.types.is_struct(t):
        raise PathError(f"the path {path.text!r} reads .{name} of "
                        f"{_where(path, i)}, which is {_kind(t)}, not an "
                        "object")
      index = t.get_field_index(name)
      t = t.field(index).type if index >= 0 else pa.null()
    else:
      if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        raise PathError(f"the path {path.text!r} takes every element of "
                        f"{_where(path, i)}, which is {_kind(t)}, not a "
                        "list")
      t = t.value_type
  return t


def resolve(column: Union[pa.Array, pa.ChunkedArray, Sequence[Any]],
            path: Path) -> Union[pa.Array, List[Any]]:
  """The values at `path` of each row of `column`.

  Raises:
    PathError: a step meets the wrong kind of value (for Python values:
      naming the row, counted from 0 in this column, and the value).
  """
  if isinstance(column, pa.ChunkedArray):
    column = column.combine_chunks()
  if not isinstance(column, pa.Array):
    return _resolve_python(list(column), path)
  check_type(path, column.type)
  values: pa.Array = column
  offsets: Optional[np.ndarray] = None  # row r: values[offsets[r]:...[r+1]]
  valid: Optional[np.ndarray] = None
  for kind, name in path.steps:
    if pa.types.is_null(values.type):
      break
    if kind == "field":
      index = values.type.get_field_index(name)
      values = pc.struct_field(values, [index]) if index >= 0 else \
          pa.nulls(len(values))
      continue
    lengths = pc.fill_null(pc.list_value_length(values), 0).to_numpy(
        zero_copy_only=False).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    if offsets is None:
      valid = values.is_valid().to_numpy(zero_copy_only=False)
      offsets = starts
    else:
      offsets = starts[offsets]
    values = pc.list_flatten(values)
  if offsets is None:
    if valid is None and pa.types.is_null(values.type) and path.lists:
      return pa.nulls(len(column), pa.large_list(pa.null()))
    return values
  if pa.types.is_null(values.type) and len(values) == 0:
    values = pa.array([], pa.null())
  mask = pa.array(~valid) if valid is not None and not valid.all() else None
  return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), values,
                                       mask=mask)


def _resolve_python(rows: List[Any], path: Path) -> Union[pa.Array, list]:
  out = []
  for r, value in enumerate(rows):
    out.append(_walk(value, path, 0, r, top=True))
  try:
    return pa.array(out)
  except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
    return out


def _walk(value, path: Path, step: int, row: int, top: bool):
  """The value(s) at path.steps[step:] of `value`: a value, or a list of
  values once a `[]` was crossed (`top`: not yet)."""
  for i in range(step, len(path.steps)):
    kind, name = path.steps[i]
    if value is None:
      if top:
        return None
      return [] if _crosses(path, i) else None
    if kind == "field":
      if not isinstance(value, dict):
        raise PathError(
            f"the path {path.text!r} reads .{name} of "
            f"{_where(path, i)}, which is {_preview(value)}, not an object",
            row)
      value = value.get(name)
      continue
    if not isinstance(value, list):
      raise PathError(
          f"the path {path.text!r} takes every element of "
          f"{_where(path, i)}, which is {_preview(value)}, not a list", row)
    flat = []
    for item in value:
      got = _walk(item, path, i + 1, row, top=False)
      if isinstance(got, list) and _crosses(path, i + 1):
        flat.extend(got)
      else:
        flat.append(got)
    return flat
  return value


def _crosses(path: Path, step: int) -> bool:
  return any(kind == "each" for kind, _ in path.steps[step:])


def _preview(value) -> str:
  text = repr(value)
  return f"{type(value).__name__} {text[:60]}" + ("…" if len(text) > 60
                                                  else "")

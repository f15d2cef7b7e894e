"""Columns whose cells are lists of steps -> the steps, converted.

A SequenceExample schema without `group_by` reads each sequence feature
from one cell per row holding all of the row's steps: a JSON or Parquet
list, a list of lists, JSON text, or text split by the feature's
`separator`. `convert_steps` flattens the cells into one column of steps
and converts each step like an Example cell (`encoding.columns`), so that
`encoding.list_sequences` can cut the steps into sequences with numpy.
"""

import dataclasses
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.encoding import columns as col
from beam_tfrecords.schema.model import Feature, FeatureType

__all__ = ["Steps", "convert_steps"]


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
        parsed = json.loads(text)
      except ValueError as e:
        raise ValueError(f"could not parse {text[:60]!r} as a JSON list of "
                         f"steps: {e}") from None
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

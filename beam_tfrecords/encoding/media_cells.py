"""What the media modules share: a column's cells as Python values, the
Arrow columns they make, and MediaError, the reason a row is rejected.

encoding.media (images, vocabularies), encoding.media_paths and
encoding.tensors all read cells this way and report problems this way.
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa

from beam_tfrecords.encoding import columns as col

__all__ = ["MediaError", "Problems", "add_problem", "cells", "text",
           "binary_array", "int_array"]

# {row: [(feature, reason)]}: the rows a batch rejects, and why.
Problems = Dict[int, List[Tuple[str, str]]]


class MediaError(ValueError):
  """Why one row's file or value cannot be stored (a reason for a person)."""


def add_problem(problems: Problems, row: int, feature: str,
                reason: str) -> None:
  problems.setdefault(row, []).append((feature, reason))


def cells(array: Any, n: int) -> list:
  """Python values of a column (Arrow array or list); n Nones for a
  column the batch does not have (None)."""
  if array is None:
    return [None] * n
  if isinstance(array, list):
    return array
  return col.python_values(array)


def text(value: Any) -> Optional[str]:
  """A cell as text (bytes read as UTF-8); None stays None."""
  if value is None:
    return None
  if isinstance(value, bytes):
    return value.decode("utf-8", "replace")
  return str(value)


def binary_array(values: Sequence[Optional[bytes]]) -> pa.Array:
  return pa.array(values, type=pa.large_binary())


def int_array(values: Sequence[Optional[int]]) -> pa.Array:
  return pa.array(values, type=pa.int64())

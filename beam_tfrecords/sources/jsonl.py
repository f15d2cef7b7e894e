"""JSON lines (one object per line) and JSON array files -> column batches.

Lines are parsed with the standard json module so that each bad line is a
dead-letter row with its line number, and values keep their JSON types (a
column mixing numbers and text is passed on as Python values; the schema's
rules judge each one). A key absent from a line is a missing value.

A line (or an element of a JSON array) nested deeper than MAX_DEPTH levels
is a dead-letter row too, with that reason; a number past float64 ("1e309")
is read as its exact Decimal, which the float rule refuses, not as inf.
"""

import json
from typing import Any, Iterator, Optional, Sequence

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.schema.values import parse_json
from beam_tfrecords.sources import files as file_io
from beam_tfrecords.sources.base import (Format, ReadError, ReadUnit,
                                         SourceBatch, register_format,
                                         row_columns)

__all__ = ["JsonLinesFormat", "JsonArrayFormat", "MAX_DEPTH"]

# Rows per batch handed to the encoder.
BATCH_ROWS = 8192

# Levels of arrays and objects a row may nest, its own object included.
# Deeper rows would fail later steps, not be judged: the pickling of a row
# between Beam steps passes Python's recursion limit at about 500 levels
# (json itself at about 1,000), and Arrow's IPC format (Arrow batches read
# from a PCollection, transforms.elements) takes a column 63 levels deep
# at most. No feature reads values anywhere near this deep.
MAX_DEPTH = 64

_TOO_DEEP = (f"nested deeper than {MAX_DEPTH} levels of arrays and objects "
             "(the most a row may have): flatten the value, or leave the "
             "row out of the input")


def _deeper_than(value: Any, limit: int) -> bool:
  """Whether arrays and objects nest more than `limit` levels in `value`
  (itself one level), walked level by level: no recursion."""
  level, containers = 0, [value]
  while containers:
    level += 1
    if level > limit:
      return True
    inner = []
    for c in containers:
      for v in (c.values() if isinstance(c, dict) else c):
        if isinstance(v, (dict, list)):
          inner.append(v)
    containers = inner
  return False


def _may_be_too_deep(text: bytes) -> bool:
  """False when `text` cannot nest past MAX_DEPTH: it opens no more
  arrays and objects than that (a count, quick for any line)."""
  return text.count(b"[") + text.count(b"{") > MAX_DEPTH


def _batches(path: str, items, columns: Optional[Sequence[str]]
             ) -> Iterator[SourceBatch]:
  """Groups (line_number, raw, parsed-or-error) into SourceBatches.

  Every row of a batch comes from consecutive lines, so a batch's row
  numbers are exact only when no line was skipped; rows are therefore
  numbered by their line (SourceBatch.numbers).
  """
  rows, lines, errors = [], [], []
  for line_no, raw, obj, reason in items:
    if reason is not None:
      errors.append(ReadError(row=line_no, raw=raw, reason=reason))
    else:
      rows.append(obj)
      lines.append(line_no)
    if len(rows) >= BATCH_ROWS:
      yield _batch(path, rows, lines, errors, columns)
      rows, lines, errors = [], [], []
  if rows or errors:
    yield _batch(path, rows, lines, errors, columns)


def _batch(path, rows, lines, errors, columns):
  return SourceBatch(path=path, first_row=lines[0] if lines else None,
                     columns=row_columns(rows, columns), num_rows=len(rows),
                     errors=list(errors), numbers=list(lines))


def _parse_lines(data: bytes, first_line: int):
  for offset, raw in enumerate(data.split(b"\n")):
    line_no = first_line + offset
    text = raw.strip()
    if not text:
      continue
    try:
      obj = parse_json(text)
    except UnicodeDecodeError as e:
      yield line_no, raw.decode("utf-8", "replace"), None, \
          f"the line is not valid UTF-8 (byte {e.start})"
      continue
    except ValueError as e:
      yield line_no, raw.decode("utf-8", "replace"), None, \
          f"not valid JSON: {e}"
      continue
    except RecursionError:
      yield line_no, raw.decode("utf-8", "replace"), None, _TOO_DEEP
      continue
    if _may_be_too_deep(text) and _deeper_than(obj, MAX_DEPTH):
      yield line_no, raw.decode("utf-8", "replace"), None, _TOO_DEEP
      continue
    if not isinstance(obj, dict):
      yield line_no, raw.decode("utf-8", "replace"), None, \
          f"expected a JSON object per line, got {type(obj).__name__}"
      continue
    yield line_no, None, obj, None


class JsonLinesFormat(Format):
  name = "jsonl"
  extensions = (".jsonl", ".ndjson")

  def read(self, unit: ReadUnit, columns: Optional[Sequence[str]]
           ) -> Iterator[SourceBatch]:
    if unit.end is None:
      with file_io.open_input(unit.path) as f:
        try:
          data = f.read()
        except InputError:
          raise
        except Exception as e:
          raise InputError(f"{unit.path}: cannot read the file: {e}") from None
      first = 1
    else:
      data, offset = file_io.read_range(unit.path, unit.start, unit.end)
      first = (file_io.count_lines_before(unit.path, offset) + 1
               if offset else 1)
    yield from _batches(unit.path, _parse_lines(data, first), columns)


class JsonArrayFormat(Format):
  """A .json file: a JSON array of objects, or JSON lines."""
  name = "json"
  extensions = (".json",)
  chunkable = False

  def read(self, unit: ReadUnit, columns: Optional[Sequence[str]]
           ) -> Iterator[SourceBatch]:
    with file_io.open_input(unit.path) as f:
      data = f.read()
    if not data.lstrip().startswith(b"["):
      yield from _batches(unit.path, _parse_lines(data, 1), columns)
      return
    try:
      items = parse_json(data)
    except ValueError as e:
      raise InputError(f"{unit.path}: not valid JSON: {e}") from None
    except RecursionError:
      # The whole array is one parse: no element can be told apart.
      raise InputError(
          f"{unit.path}: an element of the JSON array is nested deeper "
          "than Python's JSON parser can follow (about 1,000 levels; a "
          f"row may have {MAX_DEPTH}), so no row of the file can be read; "
          "fix that element, or write the file as JSON lines, where such "
          "a line is one rejected row") from None
    deep = _may_be_too_deep(data)

    def parsed():
      for i, obj in enumerate(items, start=1):
        if not isinstance(obj, dict):
          yield i, _dumps(obj), None, \
              f"expected a JSON object, got {type(obj).__name__}"
        elif deep and _deeper_than(obj, MAX_DEPTH):
          yield i, _dumps(obj), None, _TOO_DEEP
        else:
          yield i, None, obj, None
    yield from _batches(unit.path, parsed(), columns)


def _dumps(value: Any) -> str:
  """A rejected element's text for errors/ (one too deep for json.dumps
  is said as such)."""
  try:
    return json.dumps(value, default=str)
  except (RecursionError, ValueError):
    return "(nested too deep to show)"


register_format(JsonLinesFormat())
register_format(JsonArrayFormat())

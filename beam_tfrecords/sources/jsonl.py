"""JSON lines (one object per line) and JSON array files -> column batches.

Lines are parsed with the standard json module so that each bad line is a
dead-letter row with its line number, and values keep their JSON types (a
column mixing numbers and text is passed on as Python values; the schema's
rules judge each one). A key absent from a line is a missing value.
"""

import json
from typing import Iterator, Optional, Sequence

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.sources import files as file_io
from beam_tfrecords.sources.base import (Format, ReadError, ReadUnit,
                                         SourceBatch, register_format,
                                         row_columns)

__all__ = ["JsonLinesFormat", "JsonArrayFormat"]

# Rows per batch handed to the encoder.
BATCH_ROWS = 8192




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
      obj = json.loads(text)
    except UnicodeDecodeError as e:
      yield line_no, raw.decode("utf-8", "replace"), None, \
          f"the line is not valid UTF-8 (byte {e.start})"
      continue
    except ValueError as e:
      yield line_no, raw.decode("utf-8", "replace"), None, \
          f"not valid JSON: {e}"
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
      items = json.loads(data)
    except ValueError as e:
      raise InputError(f"{unit.path}: not valid JSON: {e}") from None

    def parsed():
      for i, obj in enumerate(items, start=1):
        if isinstance(obj, dict):
          yield i, None, obj, None
        else:
          yield i, json.dumps(obj), None, \
              f"expected a JSON object, got {type(obj).__name__}"
    yield from _batches(unit.path, parsed(), columns)


register_format(JsonLinesFormat())
register_format(JsonArrayFormat())

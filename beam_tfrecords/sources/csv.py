"""CSV (and other delimited text) -> Arrow batches of string columns.

Every column is read as text; the schema decides types, so "007" stays
"007" for a string feature and a bad number becomes a dead-letter row with
its reason instead of failing a whole block. An unquoted empty cell is
missing (null); a quoted empty cell ("") is the empty string.

Uncompressed files larger than SPLIT_BYTES are read as newline-aligned byte
ranges in parallel. That is only correct when no quoted value holds a line
break, which is pyarrow's default assumption too; `newlines_in_values: true`
reads each file whole and allows them.
"""

import csv
import dataclasses
import functools
import io
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

import pyarrow as pa
import pyarrow.csv as pacsv

from beam_tfrecords.errors import InputError
from beam_tfrecords.sources import files as file_io
from beam_tfrecords.sources.base import (Format, InputFile, ReadError, ReadUnit,
                                         SourceBatch, register_format)

__all__ = ["CsvFormat", "CSV_DEFAULTS"]

CSV_DEFAULTS = {
    "delimiter": ",",
    "quote_char": '"',
    "header": True,
    "column_names": None,
    "encoding": "utf-8",
    "newlines_in_values": False,
    # pyarrow parses this many bytes per block: ~13k rows of 300 bytes.
    "block_size": 4 << 20,
}


def _header(path: str, opts: Mapping[str, Any]) -> List[str]:
  line = file_io.first_line(path)
  try:
    text = line.decode(opts["encoding"])
  except (UnicodeDecodeError, LookupError) as e:
    raise InputError(f"{path}: the header is not {opts['encoding']} text "
                     f"({e}); pass the file's encoding") from None
  text = text.lstrip("\ufeff")  # a UTF-8 byte order mark
  rows = list(csv.reader([text], delimiter=opts["delimiter"],
                         quotechar=opts["quote_char"]))
  return rows[0] if rows else []


class CsvFormat(Format):
  name = "csv"
  extensions = (".csv", ".tsv", ".txt")

  def check(self, files: Sequence[InputFile], columns: Sequence[str],
            options: Mapping[str, Any]) -> Dict[str, Any]:
    opts = {**CSV_DEFAULTS, **{k: v for k, v in options.items()
                               if v is not None}}
    names = list(opts["column_names"]) if opts["column_names"] else None
    first = None
    for f in files:
      if f.size == 0:
        continue  # an empty file has no header and no rows
      if opts["header"]:
        header = _header(f.path, opts)
        if first is None:
          first = (f.path, header)
        elif header != first[1]:
          raise InputError(
              f"CSV headers differ: {f.path} has {header} but {first[0]} has "
              f"{first[1]}; every file of one build must have the same "
              "columns in the same order")
    if names is None:
      if first is None and opts["header"]:
        names = []
      elif first is not None:
        names = first[1]
      else:
        raise InputError("CSV without a header needs column_names "
                         "(--csv-column-names a,b,c)")
    if names and len(set(names)) != len(names):
      dupes = sorted({n for n in names if names.count(n) > 1})
      raise InputError(f"CSV columns {dupes} appear more than once in "
                       f"{first[0] if first else 'column_names'}")
    opts["column_names"] = tuple(names)
    return opts

  def splittable_with(self, options):
    return not options.get("newlines_in_values")

  def columns(self, options: Mapping[str, Any]) -> List[str]:
    return list(options["column_names"])

  def read(self, unit: ReadUnit, columns: Sequence[str]
           ) -> Iterator[SourceBatch]:
    opts = unit.option_dict
    names = list(opts["column_names"])
    if not names:
      return
    block = int(opts["block_size"])
    done = 0  # records (good or malformed) already handed on
    while True:
      try:
        for batch in self._read(unit, columns, block, skip=done):
          done += batch.num_rows + len(batch.errors)
          yield batch
        return
      except _BlockTooSmall:
        if block >= _MAX_BLOCK:
          raise InputError(
              f"{unit.path}: a row after data row {done} is larger than "
              f"{_MAX_BLOCK >> 20} MiB; such a value cannot be read as "
              "CSV here (store it in Parquet or a separate file)") from None
        block *= 4  # read the unit again; records already handed on skipped

  def _read(self, unit: ReadUnit, columns: Sequence[str], block: int,
            skip: int) -> Iterator[SourceBatch]:
    """Batches of a unit, the first `skip` records left out."""
    opts = unit.option_dict
    names = list(opts["column_names"])
    wanted = [c for c in columns if c in names]
    whole = unit.end is None
    skip_header = 1 if opts["header"] and unit.start == 0 else 0
    invalid: List[ReadError] = []

    def on_invalid_row(row):
      invalid.append(ReadError(
          row=None, raw=row.text,
          reason=f"expected {row.expected_columns} columns, got "
                 f"{row.actual_columns} (unbalanced quotes or a stray "
                 "delimiter?)"))
      return "skip"

    read_options = pacsv.ReadOptions(
        column_names=names, skip_rows=skip_header, block_size=block,
        encoding=opts["encoding"])
    parse_options = pacsv.ParseOptions(
        delimiter=opts["delimiter"], quote_char=opts["quote_char"] or False,
        newlines_in_values=bool(opts["newlines_in_values"]),
        invalid_row_handler=on_invalid_row)
    # Binary, not string: a value that is not UTF-8 is judged by its
    # feature (an error row for `string`, kept as is for `bytes`) instead
    # of failing the whole block.
    convert_options = pacsv.ConvertOptions(
        column_types={c: pa.binary() for c in names}, include_columns=wanted,
        strings_can_be_null=True, quoted_strings_can_be_null=False,
        null_values=[""])
    if whole:
      stream = file_io.open_input(unit.path)
      locate = None
      first_row = 1
    else:
      data, offset = file_io.read_range(unit.path, unit.start, unit.end)
      stream = io.BytesIO(data)
      locate = functools.partial(_first_row, unit.path, offset,
                                 1 if opts["header"] else 0)
      first_row = 1 if unit.start == 0 else None
    positions = _Positions(unit, opts, len(names))
    with stream:
      try:
        reader = pacsv.open_csv(stream, read_options=read_options,
                                parse_options=parse_options,
                                convert_options=convert_options)
      except pa.ArrowInvalid as e:
        if "Empty CSV file" in str(e):
          return
        _raise_read_error(unit.path, 0, e)
      done = 0
      while True:
        try:
          batch = reader.read_next_batch()
        except StopIteration:
          break
        except (pa.ArrowInvalid, UnicodeDecodeError) as e:
          _raise_read_error(unit.path, done, e)
        errors, invalid[:] = list(invalid), []
        columns_ = {name: batch.column(i)
                    for i, name in enumerate(batch.schema.names)}
        out = self._batch(unit.path, first_row, locate, positions, done,
                          columns_, batch.num_rows, errors, skip)
        total = batch.num_rows + len(errors)
        done += total
        skip = max(0, skip - total)
        if out is not None:
          yield out
      if invalid:
        out = self._batch(unit.path, first_row, locate, positions, done,
                          {c: pa.array([], pa.binary()) for c in wanted}, 0,
                          list(invalid), skip)
        if out is not None:
          yield out

  @staticmethod
  def _batch(path, first_row, locate, positions, done, columns, n, errors,
             skip) -> Optional[SourceBatch]:
    """A SourceBatch of n rows and the malformed `errors` among them (the
    records from record `done` on), without its first `skip` records;
    rows and malformed rows carry their numbers."""
    total = n + len(errors)
    if skip >= total:
      return None
    batch = SourceBatch(
        path=path, first_row=None if first_row is None else first_row + done,
        columns=columns, num_rows=n, errors=errors,
        locate=None if locate is None else functools.partial(_offset, locate,
                                                             done))
    # Which records are the malformed ones: pyarrow does not say, so ask
    # the record structure (only when there are any); unknown: last.
    bad = positions.malformed(done, total) if errors else []
    if bad is None or len(bad) != len(errors):
      bad = list(range(n, total))
    elif errors:
      base = batch.row_number(0)
      if base is not None:
        batch.errors = [dataclasses.replace(e, row=base + k)
                        for e, k in zip(errors, bad)]
        bad_set = set(bad)
        batch.numbers = [base + k for k in range(total) if k not in bad_set]
    if skip <= 0:
      return batch
    # After a retry with a bigger block: drop the records handed on before.
    bad_skipped = sum(1 for k in bad if k < skip)
    good_skipped = skip - bad_skipped
    numbers = [batch.row_number(i) for i in range(n)]
    out = SourceBatch(
        path=path, first_row=None, num_rows=n - good_skipped,
        columns={c: a.slice(good_skipped) for c, a in columns.items()},
        errors=batch.errors[bad_skipped:])
    out.numbers = numbers[good_skipped:]
    return out


class _BlockTooSmall(Exception):
  """A row is longer than pyarrow's block size."""


# Block sizes grow from 4 MiB up to this when a row does not fit.
_MAX_BLOCK = 1 << 30


def _raise_read_error(path: str, done: int, e: Exception):
  if "straddling object straddles two block boundaries" in str(e):
    raise _BlockTooSmall() from None
  raise InputError(f"{path}: cannot read as CSV after data row {done}: "
                   f"{e}") from None


class _Positions:
  """Which records of a unit are malformed, by Python's csv module.

  Parsed once, only for units that have malformed rows.
  """

  def __init__(self, unit: ReadUnit, opts: Mapping[str, Any], expected: int):
    self._unit = unit
    self._opts = opts
    self._expected = expected
    self._counts = None

  def malformed(self, start: int, total: int):
    """Indexes (relative to `start`) of the malformed records among the
    `total` records from record `start`, or None if unsure."""
    if self._counts is None:
      try:
        self._counts = self._field_counts()
      except Exception:  # pylint: disable=broad-except
        self._counts = []
    span = self._counts[start:start + total]
    if len(span) != total:
      return None
    return [k for k, c in enumerate(span) if c != self._expected]

  def _field_counts(self) -> List[int]:
    unit, opts = self._unit, self._opts
    if unit.end is None:
      with file_io.open_input(unit.path) as f:
        data = f.read()
    else:
      data, _ = file_io.read_range(unit.path, unit.start, unit.end)
    text = data.decode(opts["encoding"], "replace")
    csv.field_size_limit(max(csv.field_size_limit(), _MAX_BLOCK))
    rows = csv.reader(io.StringIO(text, newline=""),
                      delimiter=opts["delimiter"],
                      quotechar=opts["quote_char"] or None)
    counts = [len(r) for r in rows if r]  # pyarrow skips empty lines
    if opts["header"] and unit.start == 0:
      counts = counts[1:]
    return counts


def _first_row(path: str, start: int, header_lines: int) -> int:
  return file_io.count_lines_before(path, start) - header_lines + 1


def _offset(locate, done: int) -> int:
  return locate() + done


register_format(CsvFormat())

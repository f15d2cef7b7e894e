"""CSV (and other delimited text) -> Arrow batches of string columns.

Every column is read as text; the schema decides types, so "007" stays
"007" for a string feature and a bad number becomes a dead-letter row with
its reason instead of failing a whole block. An unquoted empty cell is
missing (null); a quoted empty cell ("") is the empty string.

Uncompressed files larger than CHUNK_BYTES are read as newline-aligned byte
ranges in parallel. That is only correct when no quoted value holds a line
break, which is pyarrow's default assumption too; `newlines_in_values: true`
reads each file whole and allows them.
"""

import csv
import dataclasses
import functools
import io
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.sources import files as file_io
from beam_tfrecords.sources.base import (Format, InputFile, ReadError, ReadUnit,
                                         SourceBatch, register_format)

__all__ = ["CsvFormat", "CSV_DEFAULTS", "TRANSFORM_BLOCK_SIZE", "MAX_BLOCK",
           "RowNumbering", "first_row", "row_at"]


# Row numbers of a CSV read unit, for the dead-letter rows.

# Block sizes grow from 4 MiB up to this when a row does not fit.
MAX_BLOCK = 1 << 30


class RowNumbering:
  """Row numbers of a unit's good and malformed records.

  Consecutive while no malformed record has been seen. After the first
  one, the unit is parsed once with Python's csv module to find which
  records are malformed; good row g is then the g-th record that is not.
  If the two parsers disagree on the count, malformed rows get no number.
  """

  def __init__(self, unit: ReadUnit, opts: Mapping[str, Any], expected: int,
               first_row):
    self._unit = unit
    self._opts = opts
    self._expected = expected
    self._first_row = first_row  # callable: the unit's first row number
    self._base = None
    # sorted record indexes of malformed records
    self._bad: Optional[List[int]] = None
    self._walk = (0, 0, 0)  # (good rows, malformed rows, records) passed

  @property
  def irregular(self) -> bool:
    """Whether malformed records make the good rows' numbers skip."""
    return bool(self._bad)

  @property
  def base(self) -> Optional[int]:
    if self._base is None:
      self._base = self._first_row()
    return self._base

  def saw_malformed(self, count: int) -> None:
    if count and self._bad is None:
      try:
        counts = self._field_counts()
        self._bad = [k for k, c in enumerate(counts) if c != self._expected]
      except Exception:  # pylint: disable=broad-except
        self._bad = []

  def malformed_row(self, k: int) -> Optional[int]:
    if self._bad is None or k >= len(self._bad) or self.base is None:
      return None
    return self.base + self._bad[k]

  def good_rows(self, start: int, n: int) -> List[Optional[int]]:
    """Row numbers of good rows start .. start + n - 1 of the unit."""
    if n == 0:
      return []
    if not self._bad:  # None or [] (unknown: consecutive)
      base = self.base
      return ([None] * n if base is None
              else list(range(base + start, base + start + n)))
    base = self.base
    # Walk records, skipping malformed ones; calls come in order, so the
    # walk goes on from where the last one stopped.
    g, b, record = self._walk if self._walk[0] <= start else (0, 0, 0)
    bad = self._bad
    out = []
    while g < start + n:
      if b < len(bad) and bad[b] == record:
        b += 1
      else:
        if g >= start:
          out.append(None if base is None else base + record)
        g += 1
      record += 1
    self._walk = (g, b, record)
    return out

  def _field_counts(self) -> List[int]:
    unit, opts = self._unit, self._opts
    if unit.end is None:
      with file_io.open_input(unit.path) as f:
        data = f.read()
    else:
      data, _ = file_io.read_range(unit.path, unit.start, unit.end)
    text = data.decode(opts["encoding"], "replace")
    csv.field_size_limit(max(csv.field_size_limit(), MAX_BLOCK))
    quote = opts["quote_char"] or None
    rows = csv.reader(io.StringIO(text, newline=""),
                      delimiter=opts["delimiter"], quotechar=quote,
                      quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE)
    counts = [len(r) for r in rows if r]  # pyarrow skips empty lines
    if opts["header"] and unit.start == 0:
      counts = counts[1:]
    return counts


def row_at(numbering: RowNumbering, good: int) -> Optional[int]:
  """The row number of good row `good` of a unit whose rows are
  consecutive (None: unknown)."""
  base = numbering.base
  return None if base is None else base + good


def first_row(path: str, start: int, header_lines: int) -> int:
  """The data row number of the first record at or after byte `start`."""
  if start == 0:
    return 1  # the header, if any, is skipped by the reader
  # Records, like pyarrow counts them: empty lines do not count.
  return file_io.count_records_before(path, start) - header_lines + 1


CSV_DEFAULTS = {
    "delimiter": ",",
    "quote_char": '"',
    "header": True,
    "column_names": None,
    "encoding": "utf-8",
    "newlines_in_values": False,
    # pyarrow parses this many bytes per block, and a block is a batch:
    # ~22k rows of 90 bytes. What a worker holds grows with it; two
    # encoding threads lose time to smaller ones (more GIL handoffs per
    # row). 1M flights rows, 2 cores: 4 MB blocks 5.0 s and 720 MB peak,
    # 2 MB 5.0 s and 550 MB, 1 MB 5.6 s and 425 MB (issue 33).
    "block_size": 2 << 20,
}
# The block of a build that transforms (building passes it): its process
# holds TensorFlow (~730 MB) and encodes on one thread, where 1 MB blocks
# cost no time. 1M flights rows, 4 analyzers: 990 -> 905 MB.
TRANSFORM_BLOCK_SIZE = 1 << 20


# The longest column name a header may hold: the csv module's default
# field limit. Checked here, not by csv.field_size_limit(), which is
# process-wide and raised by the reader (RowNumbering) to read huge data
# cells: a header must not pass or fail by what ran before it.
MAX_COLUMN_NAME = 131_072


def _header(path: str, opts: Mapping[str, Any]) -> List[str]:
  line = file_io.first_line(path)
  try:
    text = line.decode(opts["encoding"])
  except (UnicodeDecodeError, LookupError) as e:
    raise InputError(f"{path}: the header is not {opts['encoding']} text "
                     f"({e}); pass the file's encoding") from None
  text = text.lstrip("\ufeff")  # a UTF-8 byte order mark
  csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
  quote = opts["quote_char"] or None  # "": values are never quoted
  try:
    rows = list(csv.reader([text], delimiter=opts["delimiter"],
                           quotechar=quote, quoting=csv.QUOTE_MINIMAL
                           if quote else csv.QUOTE_NONE))
  except csv.Error as e:
    raise InputError(f"{path}: the header (first line) cannot be read as "
                     f"CSV: {e}") from None
  names = rows[0] if rows else []
  longest = max(names, key=len, default="")
  if len(longest) > MAX_COLUMN_NAME:  # a wrong delimiter, a stray quote
    raise InputError(
        f"{path}: the header (first line, {len(text):,} characters) holds "
        f"a column name of {len(longest):,} characters, more than "
        f"{MAX_COLUMN_NAME:,}; is it a CSV file with a header line? Check "
        "--csv-delimiter / --csv-quote-char, or give --csv-no-header "
        "--csv-column-names a,b,c")
  return names


def _check_options(opts: Mapping[str, Any]) -> None:
  """The delimiter and quote are single characters (Python's csv module and
  pyarrow both take no more)."""
  if not isinstance(opts["delimiter"], str) or len(opts["delimiter"]) != 1:
    raise InputError("the CSV delimiter must be one character, such as ; "
                     f"or a tab ($'\\t' in bash); got {opts['delimiter']!r}")
  quote = opts["quote_char"]
  if quote and (not isinstance(quote, str) or len(quote) != 1):
    raise InputError("the CSV quote character must be one character (or "
                     f"empty: values are never quoted); got {quote!r}")


class CsvFormat(Format):
  name = "csv"
  extensions = (".csv", ".tsv", ".txt")

  def check(self, files: Sequence[InputFile], columns: Sequence[str],
            format_options: Mapping[str, Any]) -> Dict[str, Any]:
    opts = {**CSV_DEFAULTS, **{k: v for k, v in format_options.items()
                               if v is not None}}
    _check_options(opts)
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

  def chunkable_with(self, format_options):
    return not format_options.get("newlines_in_values")

  def columns(self, format_options: Mapping[str, Any]) -> List[str]:
    return list(format_options["column_names"])

  def read(self, unit: ReadUnit, columns: Optional[Sequence[str]]
           ) -> Iterator[SourceBatch]:
    opts = unit.option_dict
    if not opts["column_names"]:
      return
    block_size = int(opts["block_size"])
    done = [0, 0]  # good rows, malformed rows already handed on
    while True:
      try:
        yield from self._read(unit, columns, block_size, done)
        return
      except _BlockTooSmall:
        if block_size >= MAX_BLOCK:
          raise InputError(
              f"{unit.path}: a row after data row {sum(done)} is larger "
              f"than {MAX_BLOCK >> 20} MiB; such a value cannot be read as "
              "CSV here (store it in Parquet or a separate file)") from None
        block_size *= 4  # read again; what was handed on is skipped

  def _read(self, unit: ReadUnit, columns: Optional[Sequence[str]],
            block_size: int, done: List[int]) -> Iterator[SourceBatch]:
    """The unit's batches, leaving out the first done[0] good rows and
    done[1] malformed rows (handed on by an earlier attempt); updates
    `done` as batches are handed on."""
    opts = unit.option_dict
    names = list(opts["column_names"])
    wanted = names if columns is None else [c for c in columns
                                            if c in names]
    skip_header = 1 if opts["header"] and unit.start == 0 else 0
    invalid: List[ReadError] = []

    def on_invalid_row(row):
      invalid.append(ReadError(
          row=None, raw=row.text,
          reason=f"expected {row.expected_columns} columns, got "
                 f"{row.actual_columns} (unbalanced quotes or a stray "
                 "delimiter?)"))
      return "skip"

    stream, numbering = _open_unit(unit, opts, len(names))
    skip_good, skip_bad = done
    good = bad = 0  # seen in this attempt
    with stream:
      try:
        reader = pacsv.open_csv(stream, **_arrow_options(
            opts, names, wanted, skip_header, block_size, on_invalid_row))
      except pa.ArrowInvalid as e:
        if "Empty CSV file" in str(e):
          return
        _raise_read_error(unit.path, 0, e)
      while True:
        try:
          batch = reader.read_next_batch()
        except StopIteration:
          batch = None
        except (pa.ArrowInvalid, UnicodeDecodeError) as e:
          _raise_read_error(unit.path, done[0] + done[1], e)
        # pyarrow reports malformed rows while parsing, which runs ahead of
        # the batches it returns; so they are numbered from the record
        # structure (numbering.malformed), not by the batch they come with.
        errors, invalid[:] = list(invalid), []
        n = 0 if batch is None else batch.num_rows
        numbering.saw_malformed(bad + len(errors))
        errors = [dataclasses.replace(e, row=numbering.malformed_row(bad + k))
                  for k, e in enumerate(errors)]
        # Explicit numbers only once rows stop being consecutive; until
        # then a byte range's first row is counted lazily (on an error).
        numbers = (numbering.good_rows(good, n) if numbering.irregular
                   else None)
        columns_ = ({} if batch is None else
                    {name: batch.column(i)
                     for i, name in enumerate(batch.schema.names)})
        if n and not opts["newlines_in_values"]:
          columns_, numbers, errors, n = _split_off_line_breaks(
              columns_, numbers, errors, n,
              lambda start=good, count=n: numbering.good_rows(start, count))
        lo_good = min(n, max(0, skip_good - good))
        lo_bad = min(len(errors), max(0, skip_bad - bad))
        first = good + lo_good
        good += n
        bad += len(errors)
        if n - lo_good or len(errors) - lo_bad:
          out = SourceBatch(
              path=unit.path, num_rows=n - lo_good,
              first_row=None if numbers is not None or unit.end is not None
              else 1 + first,
              locate=None if numbers is not None or unit.end is None
              else functools.partial(row_at, numbering, first),
              columns={c: a.slice(lo_good) for c, a in columns_.items()}
              if columns_ else {c: pa.array([], pa.binary()) for c in wanted},
              errors=errors[lo_bad:],
              numbers=None if numbers is None else numbers[lo_good:])
          done[0] = max(done[0], good)
          done[1] = max(done[1], bad)
          yield out
        if batch is None:
          return


def _arrow_options(opts: Mapping[str, Any], names: List[str],
                   wanted: List[str], skip_header: int, block_size: int,
                   on_invalid_row) -> Dict[str, Any]:
  """pyarrow.csv.open_csv's read, parse and convert options."""
  return {
      "read_options": pacsv.ReadOptions(
          column_names=names, skip_rows=skip_header, block_size=block_size,
          encoding=opts["encoding"]),
      "parse_options": pacsv.ParseOptions(
          delimiter=opts["delimiter"], quote_char=opts["quote_char"] or False,
          newlines_in_values=bool(opts["newlines_in_values"]),
          invalid_row_handler=on_invalid_row),
      # Binary, not string: a value that is not UTF-8 is judged by its
      # feature (an error row for `string`, kept as is for `bytes`)
      # instead of failing the whole block.
      "convert_options": pacsv.ConvertOptions(
          column_types={c: pa.binary() for c in names},
          include_columns=wanted, strings_can_be_null=True,
          quoted_strings_can_be_null=False, null_values=[""])}


def _open_unit(unit: ReadUnit, opts: Mapping[str, Any], num_columns: int):
  """The unit's bytes as a stream (the whole file, or its byte range),
  and the numbering of its rows."""
  if unit.end is None:
    return (file_io.open_input(unit.path),
            RowNumbering(unit, opts, num_columns, lambda: 1))
  stream, offset = file_io.open_range(unit.path, unit.start, unit.end)
  return stream, RowNumbering(
      unit, opts, num_columns, functools.partial(
          first_row, unit.path, offset, 1 if opts["header"] else 0))


def _may_hold(array: pa.Array, byte: int) -> bool:
  """False when no value of a binary/string column holds `byte` (its data
  buffer, values of rows outside a slice included, has none)."""
  buffers = array.buffers()
  if len(buffers) != 3:
    return True  # not a flat text column: let the caller look
  return buffers[2] is not None and bool(
      (np.frombuffer(buffers[2], dtype=np.uint8) == byte).any())


def _split_off_line_breaks(columns, numbers, errors, n, number_rows):
  """Rows with a line break inside a value become error rows.

  Without newlines_in_values a value should never hold a line break; one
  that does is almost always an unbalanced quote that joined the lines up
  to the next quote into one value (with the right number of columns, so
  pyarrow has no complaint). Returns the good columns, their numbers
  (explicit from `number_rows()` once a row is taken out), the errors with
  these rows added, and the new row count.
  """
  if not any(_may_hold(array, 0x0A) for array in columns.values()):
    return columns, numbers, errors, n  # (one byte scan per column)
  hit = None
  for array in columns.values():
    m = pc.fill_null(pc.match_substring(array, "\n"), False)
    hit = m if hit is None else pc.or_(hit, m)
  if hit is None or not pc.any(hit).as_py():
    return columns, numbers, errors, n
  rows = np.flatnonzero(hit.to_numpy(zero_copy_only=False))
  if numbers is None:
    numbers = number_rows()
  errors = list(errors)
  for i in rows.tolist():
    raw = {c: a[i].as_py() for c, a in columns.items()}
    joined = max((v.count(b"\n") for v in raw.values() if v), default=0)
    errors.append(ReadError(
        row=numbers[i], raw={c: v.decode("utf-8", "replace") if isinstance(
            v, bytes) else v for c, v in raw.items()},
        reason=f"a value holds {joined} line break(s): probably an "
        "unbalanced quote that joined the following lines into this row; "
        "fix the quoting, or pass --csv-newlines-in-values if values may "
        "hold line breaks"))
  keep = pc.invert(hit)
  columns = {c: a.filter(keep) for c, a in columns.items()}
  drop = set(rows.tolist())
  numbers = [x for i, x in enumerate(numbers) if i not in drop]
  return columns, numbers, errors, n - len(drop)


class _BlockTooSmall(Exception):
  """A row is longer than pyarrow's block size."""


def _raise_read_error(path: str, done: int, e: Exception):
  if "straddling object straddles two block boundaries" in str(e):
    raise _BlockTooSmall() from None
  raise InputError(f"{path}: cannot read as CSV after data row {done}: "
                   f"{e}") from None


register_format(CsvFormat())

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
import functools
import io
from typing import Any, Dict, Iterator, List, Mapping, Sequence

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
        column_names=names, skip_rows=skip_header,
        block_size=int(opts["block_size"]), encoding=opts["encoding"])
    parse_options = pacsv.ParseOptions(
        delimiter=opts["delimiter"], quote_char=opts["quote_char"] or False,
        newlines_in_values=bool(opts["newlines_in_values"]),
        invalid_row_handler=on_invalid_row)
    convert_options = pacsv.ConvertOptions(
        column_types={c: pa.string() for c in names}, include_columns=wanted,
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
    with stream:
      try:
        reader = pacsv.open_csv(stream, read_options=read_options,
                                parse_options=parse_options,
                                convert_options=convert_options)
      except pa.ArrowInvalid as e:
        if "Empty CSV file" in str(e):
          return
        raise InputError(f"{unit.path}: cannot read as CSV: {e}") from None
      done = 0
      while True:
        try:
          batch = reader.read_next_batch()
        except StopIteration:
          break
        except (pa.ArrowInvalid, UnicodeDecodeError) as e:
          raise InputError(f"{unit.path}: cannot read as CSV after row "
                           f"{done}: {e}") from None
        errors, invalid[:] = list(invalid), []
        yield SourceBatch(
            path=unit.path,
            first_row=None if first_row is None else first_row + done,
            columns={name: batch.column(i)
                     for i, name in enumerate(batch.schema.names)},
            num_rows=batch.num_rows, errors=errors,
            locate=None if locate is None else
            functools.partial(_offset, locate, done))
        done += batch.num_rows + len(errors)
      if invalid:
        yield SourceBatch(unit.path, None, {c: pa.array([], pa.string())
                                            for c in wanted}, 0, list(invalid))


def _first_row(path: str, start: int, header_lines: int) -> int:
  return file_io.count_lines_before(path, start) - header_lines + 1


def _offset(locate, done: int) -> int:
  return locate() + done


register_format(CsvFormat())

"""What every source shares: read units, batches, and the format registry.

A source turns input files into `ReadUnit`s on the launcher (cheap: globs,
sizes, headers) and each unit into `SourceBatch`es on the workers. Units are
coarse (a whole file, a 64 MiB newline-aligned byte range, a Parquet row
group), so the pipeline moves a few elements per file, not one per row.
"""

import dataclasses
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import pyarrow as pa

from beam_tfrecords.encoding.columns import python_values

__all__ = ["ReadUnit", "ReadError", "SourceBatch", "InputFile", "Format",
           "row_columns",
           "register_format", "FORMATS", "CHUNK_BYTES"]

# Byte ranges of uncompressed line-based files are this large. Big enough
# that per-unit overhead (open, seek, a Beam element) is negligible, small
# enough that a 1 GB file keeps 2-16 workers busy.
CHUNK_BYTES = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class InputFile:
  path: str
  size: int
  # Seconds since the epoch, as the file system reports it (0: unknown).
  mtime: float = 0.0


@dataclasses.dataclass(frozen=True)
class ReadUnit:
  """A piece of one input file that one worker reads.

  Attributes:
    path: the file.
    format: the registered format name.
    start, end: the byte range (rows *starting* in it), or the row group
      index in `start` for Parquet; end None means the whole file.
    options: the format's options, as a sorted tuple of (key, value).
  """
  path: str
  format: str
  start: int = 0
  end: Optional[int] = None
  options: Tuple[Tuple[str, Any], ...] = ()

  @property
  def option_dict(self) -> Dict[str, Any]:
    return dict(self.options)


@dataclasses.dataclass(frozen=True)
class ReadError:
  """An input row that could not even be read as a row.

  Attributes:
    row: 1-based data row (or line) number in the file, when known.
    raw: the raw text of the row as far as it is known (or its cells by
      column, when the row parsed but one of its values is suspect).
    reason: what is wrong.
  """
  row: Optional[int]
  raw: Union[str, Dict[str, Any]]
  reason: str


@dataclasses.dataclass
class SourceBatch:
  """Rows read from one unit.

  Attributes:
    path: the input file.
    first_row: the 1-based row number of the first row in the file, or None
      when it is not known without reading the whole prefix of the file
      (`row_number` then computes it on demand).
    columns: the column arrays (pa.Array, or a list of Python values where
      the input mixes types in one column) by column name.
    num_rows: the number of rows.
    errors: rows that could not be read as rows.
    locate: optional callable returning first_row when it is None.
    order: where the batch stands in the input, (file, unit start, batch
      number in the unit): unique, and the same on every run; records are
      written in this order.
  """
  path: str
  first_row: Optional[int]
  columns: Dict[str, Union[pa.Array, list]]
  num_rows: int
  errors: List[ReadError] = dataclasses.field(default_factory=list)
  locate: Any = None
  order: tuple = ()

  # Each row's number, when rows are not consecutive (a skipped line, a
  # malformed CSV row between them); None: first_row + index.
  numbers: Optional[List[Optional[int]]] = None
  # The columns as read, when a preprocess function replaced `columns`:
  # dead-letter rows show the input as it was.
  raw_columns: Optional[Dict[str, Union[pa.Array, list]]] = None
  # Rows from a PCollection (no file, no row number): each row's name in
  # dead-letter entries (a digest of its content; transforms.elements).
  elements: Optional[List[str]] = None
  # Where Encode keeps what it gives for this batch (a
  # core.unit_cache.UnitEntry: the unit is being kept), or None.
  unit_entry: Any = None

  def row_number(self, index: int) -> Optional[int]:
    if self.numbers is not None:
      return self.numbers[index]
    if self.first_row is None and self.locate is not None:
      self.first_row = self.locate()
    return None if self.first_row is None else self.first_row + index

  def known_row_numbers(self) -> List[Optional[int]]:
    """Each row's number where known without reading more of the file."""
    if self.numbers is not None:
      return list(self.numbers)
    if self.first_row is None:
      return [None] * self.num_rows
    return list(range(self.first_row, self.first_row + self.num_rows))

  def slice(self, start: int, stop: int, number: int) -> "SourceBatch":
    """Rows start..stop as a batch of their own, numbered `number` within
    this one (its read errors go with number 0)."""
    def cut(columns):
      return None if columns is None else {
          c: (a.slice(start, stop - start)
              if isinstance(a, (pa.Array, pa.ChunkedArray)) else a[start:stop])
          for c, a in columns.items()}
    locate = None
    if self.first_row is None and self.numbers is None and \
        self.locate is not None:
      locate = lambda: self.row_number(start)  # pylint: disable=g-long-lambda
    return SourceBatch(
        path=self.path,
        first_row=None if self.first_row is None else self.first_row + start,
        columns=cut(self.columns), num_rows=stop - start,
        errors=list(self.errors) if number == 0 else [], locate=locate,
        order=tuple(self.order) + (number,),
        numbers=None if self.numbers is None else self.numbers[start:stop],
        raw_columns=cut(self.raw_columns),
        elements=None if self.elements is None else self.elements[
            start:stop])

  def raw_row(self, index: int) -> Dict[str, Any]:
    return self.raw_rows([index])[0]

  def raw_rows(self, indexes: Sequence[int]) -> List[Dict[str, Any]]:
    """The input values of some rows, column -> Python value (as read:
    before a preprocess function)."""
    if not indexes:
      return []
    take = pa.array(indexes, type=pa.int64())
    columns = {}
    raw = self.columns if self.raw_columns is None else self.raw_columns
    for name, array in raw.items():
      if isinstance(array, (pa.Array, pa.ChunkedArray)):
        columns[name] = python_values(array.take(take))
      else:
        columns[name] = [array[i] for i in indexes]
    names = list(columns)
    return [dict(zip(names, values)) for values in zip(*columns.values())] \
        if names else [{} for _ in indexes]


def row_columns(rows: Sequence[Mapping[str, Any]],
                columns: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  """Rows as dicts -> column arrays (None: every key, in the order first
  seen); a column Arrow cannot hold (mixed types) stays a list of Python
  values, judged value by value."""
  if columns is None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
  out = {}
  for c in columns:
    values = [row.get(c) for row in rows]
    try:
      out[c] = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
      out[c] = values
  return out


class Format:
  """A source format. Subclasses set `name`, `extensions` and read units."""
  name = ""
  extensions: Sequence[str] = ()
  chunkable = True

  def check(self, files: Sequence[InputFile], columns: Sequence[str],
            format_options: Mapping[str, Any]) -> Dict[str, Any]:
    """Checks the files before the run; returns options to pass to units."""
    return dict(format_options)

  def plan(self, files: Sequence[InputFile], format_options: Mapping[str, Any]
           ) -> List[ReadUnit]:
    opts = tuple(sorted(format_options.items()))
    chunkable = self.chunkable_with(format_options)
    units = []
    for f in files:
      if not chunkable or _compressed(f.path) or f.size <= CHUNK_BYTES:
        units.append(ReadUnit(f.path, self.name, 0, None, opts))
      else:
        for start in range(0, f.size, CHUNK_BYTES):
          units.append(ReadUnit(f.path, self.name, start,
                                min(start + CHUNK_BYTES, f.size), opts))
    return units

  def chunkable_with(self, format_options: Mapping[str, Any]) -> bool:
    """Whether big uncompressed files may be read as byte ranges."""
    return self.chunkable

  def read(self, unit: ReadUnit, columns: Optional[Sequence[str]]
           ) -> Iterator[SourceBatch]:
    """The unit's rows: the `columns` the input has (None: all)."""
    raise NotImplementedError


FORMATS: Dict[str, Format] = {}


def register_format(fmt: Format) -> Format:
  """Makes `fmt` the reader of its format name.

  Raises:
    TypeError: the format says whether it is split with the names used
      before they became `chunkable` / `chunkable_with` (byte ranges are
      chunks now); left alone, they would be ignored and a file that must
      be read whole would be cut.
  """
  old = [n for n in ("splittable", "splittable_with") if hasattr(fmt, n)]
  if old:
    raise TypeError(f"format {fmt.name!r} defines {', '.join(old)}: "
                    "rename to chunkable / chunkable_with")
  FORMATS[fmt.name] = fmt
  return fmt


def _compressed(path: str) -> bool:
  return path.endswith((".gz", ".bz2", ".zst", ".deflate"))

"""Parquet -> Arrow batches, one read unit per row group of large files.

A damaged file is an InputError naming it: a footer that cannot be read
when the file is opened, a row group whose pages cannot be decoded (or
whose page checksums, where the writer wrote them, disagree) naming the
row group and its rows. Such a row group has no rows to tell apart, so it
fails the build (exit 2) rather than going to errors/. A failure that does
not come again when the row group is read alone (a reset connection) is
raised as it was: a retry may pass.
"""

from concurrent.futures import ThreadPoolExecutor
from typing import (Any, Dict, Iterator, List, Mapping, Optional, Sequence,
                    Tuple)

import pyarrow as pa
import pyarrow.parquet as pq

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.sources import files as file_io
from beam_tfrecords.sources.base import (CHUNK_BYTES, Format, InputFile,
                                         ReadUnit, SourceBatch, register_format)

__all__ = ["ParquetFormat", "arrow_schema", "arrow_schemas"]

BATCH_ROWS = 16384


def _open(path: str) -> pq.ParquetFile:
  try:
    # Pages written with a CRC (write_page_checksum) are checked: a
    # flipped byte in a page without compression would otherwise read as
    # a wrong value.
    return pq.ParquetFile(file_io.open_input(path),
                          page_checksum_verification=True)
  except Exception as e:
    raise InputError(f"{path}: not a readable Parquet file: {e}") from None


def _damaged(path: str, pf: pq.ParquetFile, groups: Sequence[int],
             next_row: int, columns: Sequence[str]) -> Optional[InputError]:
  """The error for a row group whose data cannot be decoded, or None when
  none of them fails again (a passing failure of the file system, which
  a retry may not meet: the error is then raised as it was).

  A batch may span row groups, so the one that failed is found by
  reading again, one by one, those from the group of `next_row` (the
  first row not handed out, counted from 1) on.
  """
  starts, row = [], 1
  for g in range(pf.num_row_groups):
    starts.append(row)
    row += pf.metadata.row_group(g).num_rows
  for g in groups:
    last = starts[g] + pf.metadata.row_group(g).num_rows - 1
    if last < next_row:
      continue
    try:
      pf.read_row_group(g, columns=list(columns), use_threads=False)
    except (OSError, pa.ArrowException) as e:
      said = " ".join(str(e).split()).rstrip(".") or type(e).__name__
      return InputError(
          f"{path}: row group {g} (of {pf.num_row_groups}, counted from 0; "
          f"rows {starts[g]:,}-{last:,}) cannot be read: {said} (pyarrow "
          f"{pa.__version__}): the file is damaged (an interrupted copy or "
          "download, a bad disk); replace it with a good copy, or leave it "
          "out of --input. Nothing from this build is published.")
  return None


def arrow_schema(path: str):
  """The file's Arrow schema (read from its footer: no data is read)."""
  try:
    with file_io.open_input(path) as f:
      return pq.ParquetFile(f).schema_arrow
  except Exception as e:
    raise InputError(f"{path}: not a readable Parquet file: {e}") from None


# Footers read at once from a cloud file system, where each is a round
# trip or two. (Local footers are read one by one: threads only add to
# the ~0.3 ms each takes.)
SCHEMA_THREADS = 16


def arrow_schemas(paths: Sequence[str]) -> List[Tuple[str, pa.Schema]]:
  """(path, Arrow schema) of each file, in order, from the footers only."""
  if len(paths) <= 1 or all("://" not in p for p in paths):
    return [(p, arrow_schema(p)) for p in paths]
  with ThreadPoolExecutor(min(SCHEMA_THREADS, len(paths))) as pool:
    return list(zip(paths, pool.map(arrow_schema, paths)))


class ParquetFormat(Format):
  name = "parquet"
  extensions = (".parquet", ".pq")

  def check(self, files: Sequence[InputFile], columns: Sequence[str],
            format_options: Mapping[str, Any]) -> Dict[str, Any]:
    opts = dict(format_options)
    if files:
      opts["column_names"] = tuple(_open(files[0].path).schema_arrow.names)
    return opts

  def columns(self, format_options: Mapping[str, Any]) -> List[str]:
    return list(format_options.get("column_names", ()))

  def plan(self, files, format_options):
    opts = tuple(sorted(format_options.items()))
    units: List[ReadUnit] = []
    for f in files:
      groups = _open(f.path).num_row_groups if f.size > CHUNK_BYTES else 0
      if groups > 1:
        units.extend(ReadUnit(f.path, self.name, g, g + 1, opts)
                     for g in range(groups))
      else:
        units.append(ReadUnit(f.path, self.name, 0, None, opts))
    return units

  def read(self, unit: ReadUnit, columns: Optional[Sequence[str]]
           ) -> Iterator[SourceBatch]:
    pf = _open(unit.path)
    names = pf.schema_arrow.names
    wanted = names if columns is None else [c for c in columns
                                            if c in names]
    if unit.end is None:
      groups = list(range(pf.num_row_groups))
    else:
      groups = list(range(unit.start, unit.end))
    first = 1 + sum(pf.metadata.row_group(g).num_rows
                    for g in range(groups[0] if groups else 0))
    if not groups:
      return
    batches = pf.iter_batches(batch_size=BATCH_ROWS, row_groups=groups,
                              columns=wanted, use_threads=False)
    while True:
      try:
        batch = next(batches)
      except StopIteration:
        return
      except InputError:  # a compressed stream's own (files._Stream)
        raise
      except (OSError, pa.ArrowException):
        damaged = _damaged(unit.path, pf, groups, first, wanted)
        if damaged is None:
          raise
        raise damaged from None
      yield SourceBatch(path=unit.path, first_row=first,
                        columns={n: batch.column(i) for i, n in
                                 enumerate(batch.schema.names)},
                        num_rows=batch.num_rows)
      first += batch.num_rows


register_format(ParquetFormat())

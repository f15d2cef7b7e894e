"""Parquet -> Arrow batches, one read unit per row group of large files."""

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
    return pq.ParquetFile(file_io.open_input(path))
  except Exception as e:
    raise InputError(f"{path}: not a readable Parquet file: {e}") from None


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
            options: Mapping[str, Any]) -> Dict[str, Any]:
    opts = dict(options)
    if files:
      opts["column_names"] = tuple(_open(files[0].path).schema_arrow.names)
    return opts

  def columns(self, options: Mapping[str, Any]) -> List[str]:
    return list(options.get("column_names", ()))

  def plan(self, files, options):
    opts = tuple(sorted(options.items()))
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
    for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=groups,
                                 columns=wanted, use_threads=False):
      yield SourceBatch(path=unit.path, first_row=first,
                        columns={n: batch.column(i) for i, n in
                                 enumerate(batch.schema.names)},
                        num_rows=batch.num_rows)
      first += batch.num_rows


register_format(ParquetFormat())

"""A small Parquet preview of each split: its first records, decoded.

Croissant's tools (mlcroissant, TFDS's CroissantBuilder, the NeurIPS
checker, dataset viewers) read CSV, JSON and Parquet, not TFRecord: the
records croissant.json declares are read from `preview/<split>.parquet`,
declared there as a preview (the first PREVIEW_RECORDS records of the
split, or fewer past PREVIEW_BYTES), while the shards themselves are
described file by file with their checksums. (publish.croissant says
why.)

One column per stored feature (dataset.json's feature_spec), typed as
it is stored: int64, float32, UTF-8 text for `string` features, binary
for bytes, images and tensors; a scalar feature a record lacks is null;
a list feature is a list column (empty when absent); a SequenceExample's
feature list is a list of steps, each a list of values.
"""

import io
from typing import Any, Dict, List, Optional, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.info import DatasetInfo, FileSum
from beam_tfrecords.core.layout import preview_file
from beam_tfrecords.core.shard_formats import of_dataset
from beam_tfrecords.core.shard_reader import Expected
from beam_tfrecords.core.tfrecord_files import (decode_example,
                                                decode_sequence_example)
from beam_tfrecords.sinks.metadata import write_file

__all__ = ["write_previews", "preview_columns", "PREVIEW_RECORDS",
           "PREVIEW_BYTES", "Column"]

PREVIEW_RECORDS = 100
PREVIEW_BYTES = 4 * 1024 * 1024
_TYPES = {"int64": pa.int64(), "float32": pa.float32()}


class Column:
  """One stored feature as a preview column: its name (a feature list's:
  `sequence/<name>` is not used; context and sequence names are unique
  in a schema), Arrow type, the declared type it came from, its shape
  for Croissant (`array_shape`: "" for a scalar, "-1", "3", "-1,-1"),
  and whether it is a feature list."""

  def __init__(self, name: str, spec: Dict[str, Any],
               declared: Dict[str, Any], steps: bool):
    self.name, self.steps = name, steps
    self.declared = str(declared.get("type", ""))
    dtype = spec["dtype"]
    text = dtype == "string" and self.declared == "string"
    self.kind = "text" if text else dtype
    value = (pa.string() if text else
             _TYPES.get(dtype, pa.binary()))
    shape = list(spec.get("shape", []))
    fixed = spec["kind"] in ("FixedLenFeature", "FixedLenSequenceFeature")
    # A scalar the schema declares (a value, or none) stays one, though a
    # record may lack it (then TensorFlow's spec is a VarLen one).
    self.scalar = (fixed and not shape) or (
        bool(declared) and not declared.get("shape")
        and spec["kind"] in ("VarLenFeature", "RaggedFeature")
        and declared.get("type") not in ("image", "tensor"))
    if self.scalar:
      shape = []
      fixed = True
    per_record = value if self.scalar else pa.list_(value)
    self.type = pa.list_(per_record) if steps else per_record
    dims = [str(d) for d in shape] if fixed else ["-1"]
    if self.scalar:
      dims = []
    self.array_shape = ",".join((["-1"] if steps else []) + dims)

  def cell(self, found: Optional[Tuple[Optional[str], list]]) -> Any:
    values = self._values(found)
    if self.scalar:
      return values[0] if values else None
    return values

  def _values(self, found: Optional[Tuple[Optional[str], list]]) -> list:
    if found is None:
      return []
    values = found[1]
    if self.kind == "text":
      return [v.decode("utf-8", "replace") for v in values]
    return list(values)


def preview_columns(info: DatasetInfo) -> List[Column]:
  """The preview's columns, in feature_spec order (sorted names)."""
  declared = info.declarations()
  spec = info.feature_spec
  if info.record == "sequence_example":
    return ([Column(n, s, declared.get(n, {}), False)
             for n, s in sorted(spec.get("context", {}).items())]
            + [Column(n, s, declared.get(n, {}), True)
               for n, s in sorted(spec.get("sequence", {}).items())])
  return [Column(n, s, declared.get(n, {}), False)
          for n, s in sorted(spec.items())]


def _records(staging: str, info: DatasetInfo, split: str) -> List[bytes]:
  out: List[bytes] = []
  size = 0
  fmt = of_dataset(info)
  for shard in info.splits[split].shards:
    path = FileSystems.join(staging, shard.file)
    for record in (r for records in fmt.read(path, Expected(), True, None)
                   for r in records):
      if len(out) >= PREVIEW_RECORDS or (out and size + len(record)
                                         > PREVIEW_BYTES):
        return out
      out.append(bytes(record))
      size += len(record)
  return out


def _table(info: DatasetInfo, columns: List[Column],
           records: List[bytes]) -> pa.Table:
  cells: Dict[str, list] = {c.name: [] for c in columns}
  for record in records:
    if info.record == "sequence_example":
      context, lists = decode_sequence_example(record)
      for c in columns:
        if c.steps:
          cells[c.name].append([c.cell(step) for step in
                                lists.get(c.name, [])])
        else:
          cells[c.name].append(c.cell(context.get(c.name)))
    else:
      features = decode_example(record)
      for c in columns:
        cells[c.name].append(c.cell(features.get(c.name)))
  return pa.table({c.name: pa.array(cells[c.name], c.type) for c in columns})


def write_previews(staging: str, info: DatasetInfo) -> Dict[str, FileSum]:
  """Writes preview/<split>.parquet for every split that holds records
  (TFRecord shards only); their checksums."""
  if not of_dataset(info).previewed:
    return {}
  columns = preview_columns(info)
  out = {}
  for split in sorted(info.splits):
    if not info.splits[split].num_records:
      continue
    table = _table(info, columns, _records(staging, info, split))
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    name = preview_file(split)
    out[name] = write_file(staging, name, buffer.getvalue())
  return out

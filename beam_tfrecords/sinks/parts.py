"""What the pipeline's writing steps tell `Commit`, typed: the shard files
written, the dead-letter files, the row counts and the feature statistics.
Commit gathers them into dataset.json (info.DatasetInfo)."""

from typing import Any, Dict, List, NamedTuple, Tuple

__all__ = ["ShardWritten", "ErrorsWritten", "RowCounts", "FeatureStatistics",
           "SplitOverlap", "OutputStaged", "UnitsRead"]


class ShardWritten(NamedTuple):
  """One file of a split's shard (sinks.shards): its name in the folder
  written to, records and bytes; `writer` is the shard, `roll` the file
  of that shard (a shard continues in further files past max_shard_size);
  `transformed`: TensorFlow Transform's output; `index_file`: the index file
  written beside it (core.shard_index, or DALI's for uncompressed
  TFRecords), its bytes and SHA-256 (hex), or "" for none; `sha256`: the
  file's own SHA-256 (hex), taken as its bytes were written."""
  split: str
  file: str
  records: int
  bytes: int
  writer: int = 0
  roll: int = 0
  transformed: bool = False
  index_file: str = ""
  index_bytes: int = 0
  index_sha256: str = ""
  sha256: str = ""


class ErrorsWritten(NamedTuple):
  """One dead-letter file (errors/): lines, the input rows they name,
  {reason category: [rows, first example]}, and its bytes and SHA-256."""
  file: str
  lines: int
  rows: int
  reasons: Dict[str, List[Any]]
  bytes: int = 0
  sha256: str = ""


class RowCounts(NamedTuple):
  """Where the rows went, in transforms.encode's STAT_FIELDS order."""
  counts: Tuple[int, ...]


class FeatureStatistics(NamedTuple):
  """{split: {feature: merged statistics}} (encoding.stats)."""
  splits: Dict[str, Dict[str, Any]]


class SplitOverlap(NamedTuple):
  """Distinct records (kind "records": `disjoint_splits`) or key values
  (kind "keys": `disjoint_keys`) found in more than one split
  (transforms.overlap)."""
  records: int
  kind: str = "records"


class OutputStaged(NamedTuple):
  """The output locked and the staging folder made by the pipeline's
  first step (WriteDataset: staging.StageOutput): Commit waits for it."""
  staging: str



class UnitsRead(NamedTuple):
  """Read units with records, and how many of them were reused from a
  unit store (core.unit_cache) instead of read and encoded; a grouped
  build's buckets, and how many were reused instead of assembled."""
  units: int
  reused: int
  buckets: int = 0
  buckets_reused: int = 0

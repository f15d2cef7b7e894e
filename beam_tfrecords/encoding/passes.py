"""A bucket of steps too large to assemble at once. No Beam here.

`GroupAssembler` sorts a bucket's steps in memory. A bucket is normally a
few MiB (`transforms.grouped.buckets_for`), but keys can be skewed: one
user with millions of events lands in one bucket. `plan_passes` looks at
the bucket one table at a time, never holding it whole:

* a group whose steps take more than `limit` bytes is **refused**: it
  cannot be sorted in the memory one assembly may use. Its rows go to
  errors/ as one entry naming the group, its rows and its size;
* the other groups are assembled in **passes** of about `limit` bytes
  each: groups are dealt to passes largest first, in snake order, so the
  passes come out about even.

Sizes are `table_bytes`: the serialized steps (twice: packed, and
unpacked in the assembly) and context values plus 8 bytes per column and
row (keys, order values, offsets), the same measure
for the bucket (from its parcels' sizes) and for its groups, so a group is
refused whatever else shares its bucket.

The records do not change: each pass writes whole groups, in key order,
and the sink merges the passes' records by key like it merges buckets.
"""

import dataclasses
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.encoding.steps import (CONTEXT, KEY, ROW, STEPS, columns_of,
                                           key_hash)

__all__ = ["Refused", "PassPlan", "plan_passes", "step_bytes", "table_bytes"]


@dataclasses.dataclass(frozen=True)
class Refused:
  """A group too large to assemble: its key, rows, step bytes and the
  first few (source, row) of it."""
  key: tuple
  rows: int
  size: int
  examples: Tuple[Tuple[str, object], ...]


@dataclasses.dataclass
class PassPlan:
  """passes: how many passes; refused: the groups left out; hashes (key
  hashes, sorted) and their pass (-1: refused)."""
  passes: int
  refused: List[Refused]
  hashes: np.ndarray
  pass_of: np.ndarray

  def select(self, table: pa.Table, index: int) -> pa.Table:
    """The steps of `table` that pass `index` assembles."""
    h = key_hash(table)
    at = np.minimum(np.searchsorted(self.hashes, h), len(self.hashes) - 1)
    keep = self.pass_of[at] == index
    return table if keep.all() else table.filter(pa.array(keep))


def step_bytes(table: pa.Table) -> np.ndarray:
  """The bytes each step takes: its serialized features twice (the
  assembly holds them packed and unpacked: steps.step_features) and its
  context, and 8 per column (fixed-width values, offsets)."""
  out = np.full(table.num_rows, 8 * table.num_columns, dtype=np.int64)
  for name in [STEPS, STEPS] + columns_of(table, CONTEXT):
    column = table.column(name)
    out += pc.fill_null(pc.binary_length(column), 0).to_numpy(
        zero_copy_only=False)
  return out


def table_bytes(table: pa.Table) -> int:
  """step_bytes of a whole table."""
  return int(step_bytes(table).sum())


def plan_passes(tables: Callable[[], Iterable[Tuple[str, pa.Table]]],
                limit: int) -> PassPlan:
  """How to assemble a bucket whose (source, StepTable.table) pairs
  `tables()` yields (called more than once), in passes of about `limit`
  step bytes."""
  keys: List[str] = []
  sums = []
  for _, table in tables():
    names = columns_of(table, KEY)
    sizes = table.select(names).append_column(
        "bytes", pa.array(step_bytes(table))).append_column(
            "rows", pa.array(np.ones(table.num_rows, dtype=np.int64)))
    sums.append(sizes.group_by(names).aggregate([("bytes", "sum"),
                                                 ("rows", "sum")]))
    keys = names
  if not sums:
    return PassPlan(1, [], np.zeros(1, np.uint64), np.zeros(1, np.int64))
  total = pa.concat_tables(
      [t.rename_columns(keys + ["bytes", "rows"]) for t in sums]).group_by(
          keys).aggregate([("bytes", "sum"), ("rows", "sum")])
  size = total.column("bytes_sum").to_numpy()
  rows = total.column("rows_sum").to_numpy()
  hashes = key_hash(total.select(keys).rename_columns(
      [f"{KEY}{i}" for i in range(len(keys))]))
  big = np.flatnonzero(size > limit)
  refused = []
  if len(big):
    big_keys = total.select(keys).take(pa.array(big))
    listed = list(zip(*(big_keys.column(k).to_pylist() for k in keys)))
    examples = _examples(tables, hashes[big])
    refused = [Refused(key, int(rows[i]), int(size[i]),
                       examples.get(int(hashes[i]), ()))
               for key, i in zip(listed, big.tolist())]
  kept = size <= limit
  passes = max(1, -(-int(size[kept].sum()) // limit))
  # Largest first, dealt in snake order: 0, 1, ..., p-1, p-1, ..., 0, ...
  pass_of = np.full(len(size), -1, dtype=np.int64)
  order = np.flatnonzero(kept)[np.argsort(-size[kept], kind="stable")]
  rank = np.arange(len(order)) % (2 * passes)
  pass_of[order] = np.where(rank < passes, rank, 2 * passes - 1 - rank)
  by_hash = np.argsort(hashes, kind="stable")
  return PassPlan(passes, refused, hashes[by_hash], pass_of[by_hash])


def _examples(tables, hashes: np.ndarray, count: int = 3) -> dict:
  """hash -> the first `count` (source, row) of each refused group."""
  found: Dict[int, List[Tuple[str, Optional[int]]]] = {}
  for path, table in tables():
    h = key_hash(table)
    for i in np.flatnonzero(np.isin(h, hashes)).tolist():
      found.setdefault(int(h[i]), []).append(
          (path, table.column(ROW)[i].as_py()))
  return {h: tuple(sorted(places, key=lambda p: (
      p[0], p[1] is None, p[1] or 0))[:count]) for h, places in found.items()}


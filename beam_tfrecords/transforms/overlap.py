"""Records found in more than one split, counted exactly by digest.

For `expect: {disjoint_splits: true}`: each record's 128-bit BLAKE2b
digest goes, with its split, to one of BUCKETS buckets (by the digest's
first bytes); each bucket's digests are sorted per split and intersected
with numpy. What crosses the shuffle is a few arrays per batch (16 bytes
a record), not the records, and a worker holds one bucket at a time:
about 16 bytes x records / BUCKETS (and a few copies while sorting). (A false match needs two different records with the same 128-bit
digest: about n^2 / 2^129, nil for any dataset.)
"""

import hashlib
from typing import Any, Dict, Iterable, Iterator, List, Tuple

import apache_beam as beam
import numpy as np

from beam_tfrecords.sinks.parts import SplitOverlap

__all__ = ["CountOverlap", "BUCKETS", "overlap_of", "digest"]

BUCKETS = 64
# A digest as two little-endian uint64s: sortable and comparable as rows.
_DIGEST = np.dtype([("hi", "<u8"), ("lo", "<u8")])


def digest(value: bytes) -> bytes:
  return hashlib.blake2b(value, digest_size=16).digest()


def _digests(batch) -> Iterator[Tuple[int, Tuple[str, bytes]]]:
  """(split, key, records) -> (bucket, (split, digests)) per bucket hit."""
  split, _, records = batch
  return _bucketed((split, b"".join(digest(r) for r in records)))


def _bucketed(digested) -> Iterator[Tuple[int, Tuple[str, bytes]]]:
  """(split, digests back to back) -> (bucket, (split, digests))."""
  split, joined = digested
  if not joined:
    return
  rows = np.frombuffer(joined, dtype=_DIGEST)
  bucket = (rows["hi"] % BUCKETS).astype(np.int64)
  order = np.argsort(bucket, kind="stable")
  rows, bucket = rows[order], bucket[order]
  cuts = np.flatnonzero(np.diff(bucket)) + 1
  for where in np.split(np.arange(len(rows)), cuts):
    yield int(bucket[where[0]]), (split, rows[where].tobytes())


def _runs(rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
  """The digests sorted, and where each run of equal ones starts."""
  rows = rows[np.lexsort((rows["lo"], rows["hi"]))]
  starts = np.ones(len(rows), dtype=bool)
  starts[1:] = (rows["hi"][1:] != rows["hi"][:-1]) | \
      (rows["lo"][1:] != rows["lo"][:-1])
  return rows, starts


def overlap_of(by_split: Iterable[Tuple[str, bytes]]) -> int:
  """Distinct digests found in more than one split."""
  per_split: Dict[str, List[np.ndarray]] = {}
  for split, data in by_split:
    per_split.setdefault(split, []).append(np.frombuffer(data, _DIGEST))
  if len(per_split) < 2:
    return 0
  distinct = []
  for arrays in per_split.values():
    rows, starts = _runs(np.concatenate(arrays))
    distinct.append(rows[starts])
  # Each split's digests are distinct now: a run longer than one is a
  # digest of several splits.
  _, starts = _runs(np.concatenate(distinct))
  lengths = np.diff(np.append(np.flatnonzero(starts), len(starts)))
  return int(np.count_nonzero(lengths > 1))


def _count(keyed) -> int:
  return overlap_of(keyed[1])


class CountOverlap(beam.PTransform):
  """(split, key, [record]) batches -> one SplitOverlap (none when there
  are no records: Commit counts that as 0); with `keys`, (split, digests
  of key values) -> one SplitOverlap of kind "keys"."""

  def __init__(self, keys: bool = False):
    super().__init__()
    self._keys = keys

  def expand(self, batches):
    kind = "keys" if self._keys else "records"
    return (batches
            | "Digests" >> beam.FlatMap(_bucketed if self._keys
                                        else _digests)
            # (bucket, (split, digests))
            | "ByBucket" >> beam.GroupByKey()
            | "Count" >> beam.Map(_count)
            # No defaults: a default is a side input (see runners.gaps).
            | "Sum" >> beam.CombineGlobally(sum).without_defaults()
            | "Part" >> beam.Map(SplitOverlap, kind).with_output_types(Any))

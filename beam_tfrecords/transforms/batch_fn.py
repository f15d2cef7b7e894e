"""What every encoding DoFn shares: the output tags, the STATS tuple and
counters, routing a batch's rows to splits, and `SchemaFn`, the DoFn base
that rebuilds its encoder from a schema dict and works on a thread pool.
"""

import collections
import concurrent.futures
import os
from typing import Any, Deque, Dict, List, Optional, Tuple, Union

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.transforms.window import BoundedWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_tfrecords.core.errors import reason_category
from beam_tfrecords.runners.progress import tally
from beam_tfrecords.encoding.example import RowError
from beam_tfrecords.encoding.stats import merge_splits
from beam_tfrecords.encoding.splitting import SplitAssigner, key_types
from beam_tfrecords.schema import Schema, schema_from_dict
from beam_tfrecords.sources import SourceBatch

__all__ = ["ERRORS", "STATS", "FEATURE_STATS", "KEY_DIGESTS", "STAT_FIELDS",
           "UNITS", "ENCODE_THREADS_MAX", "Output", "SchemaFn", "by_split",
           "stats", "take", "unit_counted"]

ERRORS = "errors"
STATS = "stats"
# Per-split, per-feature statistics of the written Examples.
FEATURE_STATS = "feature_stats"
# (split, digests of the expect.disjoint_keys values of its written rows).
KEY_DIGESTS = "key_digests"
# The output counting read units, (1, 1 if reused else 0, 0, 0) per unit
# with batches, and grouped builds' buckets, (0, 0, 1, 1 if reused else
# 0) per bucket, when units are kept (core.unit_cache).
UNITS = "units"
# Each STATS element is a tuple of these counts (summed for dataset.json).
# rows_read = rows_written + rows_rejected + rows_dropped always holds.
STAT_FIELDS = ("rows_read", "rows_written", "rows_rejected", "rows_dropped",
               "records", "steps", "steps_dropped")
_READ, _REJECTED, _RECORDS = (STAT_FIELDS.index(k) for k in (
    "rows_read", "rows_rejected", "records"))
_NAMESPACE = "beam_tfrecords"
# Threads per worker process that encode batches (None: one per core, at
# most this many). Measured on 1M rows, 2 cores: 8.7 s with one, 7.0 s
# with two.
ENCODE_THREADS_MAX = 2
# One output of SchemaFn._work(): a main-output element, or a TaggedOutput
# (ERRORS, STATS, FEATURE_STATS).
Output = Union[tuple, beam.pvalue.TaggedOutput]


# A bundle's FEATURE_STATS partials are merged into one this often (and
# at its end), so that a long bundle holds a few, not one per batch.
_MERGED_EVERY = 16


def stats(**counts) -> tuple:
  """A STATS element: the STAT_FIELDS counts given, 0 for the others."""
  return tuple(counts.get(k, 0) for k in STAT_FIELDS)


class _Counters:
  """The pipeline's counters: one per STAT_FIELDS entry, and rows per
  rejection reason ("rejected: <reason without its values>")."""

  def __init__(self):
    self._counters = [beam.metrics.Metrics.counter(_NAMESPACE, k)
                      for k in STAT_FIELDS]

  @staticmethod
  def rejected_all(errors: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    rows: Dict[str, int] = {}
    for error in errors:
      category = reason_category(error["reason"])[:200]
      rows[category] = rows.get(category, 0) + error.get("rows", 1)
    for category, n in rows.items():
      beam.metrics.Metrics.counter(_NAMESPACE, "rejected: " + category).inc(n)
    return errors

  def add(self, stats: tuple) -> tuple:
    for counter, value in zip(self._counters, stats):
      if value:
        counter.inc(value)
    tally().add(rows=stats[_READ], records=stats[_RECORDS],
                rejected=stats[_REJECTED])
    return stats


def unit_counted(first: bool, reused: bool) -> List[Output]:
  """The UNITS output of a kept or reused unit's batch (its first counts
  the unit)."""
  return [beam.pvalue.TaggedOutput(UNITS, (1, int(reused), 0, 0))] \
      if first else []


def take(columns: Dict[str, Any], index: np.ndarray) -> Dict[str, Any]:
  taken = pa.array(index, type=pa.int64())
  return {c: (a.take(taken) if isinstance(a, (pa.Array, pa.ChunkedArray))
              else [a[i] for i in index.tolist()])
          for c, a in columns.items()}


def by_split(assigner: SplitAssigner, batch: SourceBatch,
             rejected: Optional[Dict[int, list]] = None):
  """([(split name, row index or None for all rows)], [RowError]).

  Rows that no split takes are RowErrors (feature "splits"), and so are
  the `rejected` rows ({row: [(feature, reason)]}, e.g. unreadable
  images)."""
  names = assigner.rule.names
  rejected = rejected or {}
  if len(names) == 1 and not assigner.rule.columns:
    split = np.zeros(batch.num_rows, dtype=np.int32)
    problems: Dict[int, str] = {}
  else:
    split, problems = assigner.assign(batch.columns, batch.num_rows)
  ok = np.ones(batch.num_rows, dtype=bool)
  if problems or rejected:
    ok[list(problems) + list(rejected)] = False
  splits: List[Tuple[str, Optional[np.ndarray]]] = []
  for i, name in enumerate(names):
    index = np.nonzero((split == i) & ok)[0]
    if len(index) == batch.num_rows:
      splits.append((name, None))
    elif len(index):
      splits.append((name, index))
  errors = [RowError(row=r, problems=tuple(rejected.get(r, ())) + (
      (("splits", problems[r]),) if r in problems else ()))
            for r in sorted(set(problems) | set(rejected))]
  return splits, errors


class SchemaFn(beam.DoFn):
  """A DoFn that pickles as a schema dict and builds its encoder in setup().

  With `threads` > 1, elements are worked on by a small thread pool while
  the next ones are read: the work is numpy / Arrow / ISA-L, which release
  the GIL, so one worker process uses more than one core on every runner.
  Outputs keep their element's order; at most `threads` + 1 elements are
  in flight. Counters are updated in the DoFn's own thread (Beam's metrics
  are thread-local).

  With `bundle_stats`, FEATURE_STATS outputs are merged per window over
  the bundle and go out once, when it finishes: one statistics partial
  per bundle, not one per batch, to pickle, send and merge again. (Not
  where the runner drops what finish_bundle emits, the DaskRunner:
  runners.gaps.)
  """

  def __init__(self, schema_dict: Dict[str, Any],
               threads: Optional[int] = 1, statistics: bool = True,
               bundle_stats: bool = True):
    self._schema_dict = schema_dict
    self._threads = threads
    self._statistics = statistics
    self._bundle_stats = bundle_stats
    self._encoder: Any = None  # what _build() makes, in setup()
    self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
    # (the element's outputs to come, its window, its timestamp)
    self._pending: Deque[Tuple[concurrent.futures.Future, BoundedWindow,
                               Timestamp]] = collections.deque()
    self._counters = _Counters()
    # window -> (the timestamp of its last element, the bundle's
    # FEATURE_STATS partials in it, not yet merged)
    self._described: Dict[BoundedWindow, Tuple[Timestamp, List[dict]]] = {}

  def _build(self, schema: Schema):
    raise NotImplementedError

  def _work(self, element) -> Tuple[List[Output], tuple, list]:
    """(outputs, STAT_FIELDS tuple, dead-letter dicts); no Beam calls."""
    raise NotImplementedError

  def setup(self):
    schema = schema_from_dict(self._schema_dict)
    self._encoder = self._build(schema)
    self._splits = SplitAssigner(schema.splits, key_types(schema))
    if self._threads is None:  # decided where the work runs
      self._threads = min(os.cpu_count() or 1, ENCODE_THREADS_MAX)
    if self._threads > 1:
      self._pool = concurrent.futures.ThreadPoolExecutor(
          self._threads, thread_name_prefix="beam_tfrecords-encode")

  def teardown(self):
    if self._pool is not None:
      self._pool.shutdown(wait=True)
      self._pool = None

  def start_bundle(self):
    self._pending = collections.deque()
    self._described = {}

  def _emit(self, result, window: BoundedWindow, timestamp: Timestamp):
    outputs, stats, errors = result
    self._counters.rejected_all(errors)
    self._counters.add(stats)
    kept = []
    for out in outputs:
      if self._bundle_stats and isinstance(
          out, beam.pvalue.TaggedOutput) and out.tag == FEATURE_STATS:
        _, partials = self._described.get(window, (timestamp, []))
        partials.append(out.value)
        self._described[window] = (timestamp, partials)
        if len(partials) >= _MERGED_EVERY:
          partials[:] = [merge_splits(partials)]
      else:
        kept.append(out)
    return kept

  def _elements(self, element) -> list:
    """The pieces an element is worked on in (itself, by default)."""
    return [element]

  def process(self, element, window=beam.DoFn.WindowParam,
              timestamp=beam.DoFn.TimestampParam):
    for piece in self._elements(element):
      if self._pool is None:
        yield from self._emit(self._work(piece), window, timestamp)
        continue
      self._pending.append((self._pool.submit(self._work, piece), window,
                            timestamp))
      assert self._threads is not None  # setup() decided it
      while self._pending and (len(self._pending) > self._threads
                               or self._pending[0][0].done()):
        yield from self._emit_windowed(*self._pending.popleft())

  def finish_bundle(self):
    while self._pending:
      yield from self._emit_windowed(*self._pending.popleft())
    for window, (timestamp, partials) in self._described.items():
      yield beam.pvalue.TaggedOutput(FEATURE_STATS, WindowedValue(
          merge_splits(partials), timestamp, (window,)))
    self._described = {}
    tally().flush()

  def _emit_windowed(self, future, window, timestamp):
    """An earlier element's outputs, in that element's window."""
    for out in self._emit(future.result(), window, timestamp):
      if isinstance(out, beam.pvalue.TaggedOutput):
        yield beam.pvalue.TaggedOutput(out.tag, WindowedValue(
            out.value, timestamp, (window,)))
      else:
        yield WindowedValue(out, timestamp, (window,))


"""beam_tfrecords/transforms/batch_fn.py, on values: a STATS tuple, rows
taken from a batch's columns, a batch's rows routed to splits (rows no
split takes, and rows rejected before, as row errors), and SchemaFn's
thread pool handing out each element's outputs in the elements' order."""

import threading
import time

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_tfrecords.encoding.example import RowError
from beam_tfrecords.encoding.splitting import SplitAssigner, key_types
from beam_tfrecords.schema import load_schema
from beam_tfrecords.sources import SourceBatch
from beam_tfrecords.transforms.batch_fn import (STAT_FIELDS, STATS,
                                                SchemaFn, by_split, stats,
                                                take)


def test_stats_are_the_stat_fields_counts_in_order():
  assert STAT_FIELDS == ("rows_read", "rows_written", "rows_rejected",
                         "rows_dropped", "records", "steps", "steps_dropped")
  assert stats() == (0,) * 7
  assert stats(rows_read=5, records=4, steps_dropped=1) == (5, 0, 0, 0, 4, 0,
                                                             1)


def test_take_picks_rows_of_arrow_and_list_columns():
  columns = {"id": pa.array([10, 11, 12, None]), "mixed": [1, "a", 2.5, None]}
  got = take(columns, np.array([3, 0, 0]))
  assert got["id"].to_pylist() == [None, 10, 10]
  assert got["mixed"] == [None, 1, 1]
  assert {k: len(v) for k, v in take(columns, np.array([], int)).items()} \
      == {"id": 0, "mixed": 0}


def _assigner(splits=None):
  schema = load_schema(dict({"name": "b", "features": {
      "id": {"type": "int64"}}}, **({"splits": splits} if splits else {})))
  return SplitAssigner(schema.splits, key_types(schema))


def _batch(parts):
  return SourceBatch(path="in.csv", first_row=1, columns={
      "id": pa.array([str(i) for i in range(len(parts))]),
      "part": pa.array(parts)}, num_rows=len(parts))


def _index(parts):
  return [(name, None if index is None else index.tolist())
          for name, index in parts]


VALUES = {"column": "part", "values": ["train", "eval"]}
NO_SPLIT = ('the split column "part" holds \'test\', which names no split; '
            "allowed: 'train', 'eval'")
NO_VALUE = 'the split column "part" has no value; every row needs one'


@pytest.mark.parametrize("splits,parts,rejected,routed,errors", [
    (None, ["a", "b"], None, [("train", None)], []),
    (VALUES, ["eval", "eval"], None, [("eval", None)], []),
    (VALUES, ["train", "eval", "train"], None,
     [("train", [0, 2]), ("eval", [1])], []),
    (VALUES, ["train", "eval", "test", None], None,
     [("train", [0]), ("eval", [1])],
     [RowError(2, (("splits", NO_SPLIT),)),
      RowError(3, (("splits", NO_VALUE),))]),
    (VALUES, ["train", "eval", "test"], {0: [("image", "unreadable")],
                                         2: [("image", "gone")]},
     [("eval", [1])],
     [RowError(0, (("image", "unreadable"),)),
      RowError(2, (("image", "gone"), ("splits", NO_SPLIT)))]),
    (None, ["a", "b"], {1: [("image", "unreadable")]}, [("train", [0])],
     [RowError(1, (("image", "unreadable"),))]),
], ids=["one_split_takes_all", "all_to_one_of_two", "both_splits",
        "no_split_for_some", "rejected_before", "rejected_with_one_split"])
def test_rows_go_to_their_split_or_to_errors(splits, parts, rejected,
                                             routed, errors):
  got, found = by_split(_assigner(splits), _batch(parts), rejected)
  assert _index(got) == routed
  assert found == errors


class _Doubles(SchemaFn):
  """Doubles an int, slower for the first elements: with threads, later
  ones finish first, and must still come out in order."""

  def _build(self, schema):
    return schema.name

  def _work(self, element):
    time.sleep(0.02 * max(0, 4 - element))
    self.threads_seen.add(threading.current_thread().name)
    counts = stats(rows_read=1, records=1)
    return [element * 2, beam.pvalue.TaggedOutput(STATS, counts)], counts, []


def _plain(out):
  """An output as (tag, value) or value, out of its window."""
  def unwrapped(v):
    return v.value if isinstance(v, WindowedValue) else v
  if isinstance(out, beam.pvalue.TaggedOutput):
    return out.tag, unwrapped(out.value)
  return unwrapped(out)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_schema_fn_keeps_the_elements_order_on_its_threads(threads):
  fn = _Doubles({"name": "d", "features": {"x": {"type": "int64"}}},
                threads=threads)
  fn.threads_seen = set()
  fn.setup()
  fn.start_bundle()
  window, stamp = GlobalWindow(), Timestamp(0)
  out = []
  for element in range(6):
    out += list(fn.process(element, window=window, timestamp=stamp))
  out += list(fn.finish_bundle())
  fn.teardown()
  counts = (1, 0, 0, 0, 1, 0, 0)
  assert [_plain(o) for o in out] == [
      x for e in range(6) for x in (e * 2, (STATS, counts))]
  pooled = {n for n in fn.threads_seen
            if n.startswith("beam_tfrecords-encode")}
  assert len(pooled) == (0 if threads == 1 else 2)

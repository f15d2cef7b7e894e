"""beam_tfrecords/transforms/records_coder.py: a batch's records are coded
as FastPrimitivesCoder codes them, and sized without being encoded."""

import tracemalloc

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.coders import coders

from beam_tfrecords.core.unit_cache import KeepParts, UnitEntry
from beam_tfrecords.encoding.ragged import Ragged
from beam_tfrecords.schema import schema_from_dict
from beam_tfrecords.sources import SourceBatch
from beam_tfrecords.transforms.encode import EncodeRows
from beam_tfrecords.transforms.records_coder import Records, RecordsCoder


def _records(n: int, size: int) -> Ragged:
  data = np.random.default_rng(0).integers(0, 256, n * size, np.uint8)
  return Ragged(data, np.arange(0, n * size + 1, size, dtype=np.int64))


def _values():
  records = _records(1000, 100)
  entry = UnitEntry("/tmp/units", "ab" * 16, 3, True, "train")
  return [("train", (1, 2), records),
          KeepParts("train", ("f.csv", 0, 1), records, entry),
          # (records got back from another deal's parts: a list)
          KeepParts("train", ("f.csv", 0, 1), list(records), entry),
          ("not", "records", 7), None]


def test_the_bytes_are_fast_primitives_coders():
  """(At top level; nested, a length goes before them.)"""
  fast, ours = coders.FastPrimitivesCoder(), RecordsCoder()
  for value in _values():
    data = ours.encode(value)
    assert data == fast.encode(value)
    back = ours.decode(data)
    if isinstance(value, tuple) and isinstance(value[2], Ragged):
      assert type(back) is type(value) and back[:2] == value[:2]
      assert list(back[2]) == list(value[2])
    elif isinstance(value, KeepParts):
      assert back == value and type(back) is KeepParts
    else:
      assert back == value


def test_records_are_sized_from_their_buffers_within_a_percent():
  impl = RecordsCoder().get_impl()
  for value in _values()[:3]:
    estimated, _ = impl.get_estimated_size_and_observables(value)
    actual = len(RecordsCoder().encode(value))
    assert abs(estimated - actual) <= 0.01 * actual, (estimated, actual)


def test_sizing_records_copies_none_of_them():
  big = ("train", (0,), _records(1000, 50_000))  # 50 MB
  impl = RecordsCoder().get_impl()
  tracemalloc.start()
  try:
    impl.get_estimated_size_and_observables(big)
    _, peak = tracemalloc.get_traced_memory()
  finally:
    tracemalloc.stop()
  assert peak < 1 << 20, peak


def test_the_encoded_records_pcollection_is_coded_so():
  """(The graph only: the builds of tests/e2e and the goldens run it.)"""
  schema = schema_from_dict({"name": "t", "features": {
      "x": {"type": "int64"}}})
  p = beam.Pipeline()
  batches = p | beam.Create([SourceBatch(
      path="f.csv", first_row=1, columns={"x": pa.array([1, 2])},
      num_rows=2, order=("f.csv", 0, 0))])
  out = batches | EncodeRows(schema)
  assert out["records"].element_type is Records
  assert isinstance(beam.coders.registry.get_coder(
      out["records"].element_type), RecordsCoder)
  # What a runner is given: the records' PCollection (the main output,
  # tag None) with our coder, the others with Beam's.
  proto = p.to_runner_api()
  ours = {}
  for pcoll in proto.components.pcollections.values():
    if "EncodeBatch" in pcoll.unique_name:
      payload = proto.components.coders[pcoll.coder_id].spec.payload
      ours[pcoll.unique_name.rsplit(".", 1)[1]] = b"RecordsCoder" in payload
  assert ours == {"None": True, "errors": False, "stats": False,
                  "feature_stats": False}

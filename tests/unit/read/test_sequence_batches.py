"""beam_tfrecords/read/sequence_batches.py: tfx-bsl's SequenceExample
RecordBatch (what TFT reads) with int64 feature lists whole. Where every
value fits 32 bits it is tfx-bsl's batch exactly; past them, the values
TensorFlow's parser reads; both with the native core and without."""

from hypothesis import HealthCheck, given, settings, strategies as st
import pytest
import tensorflow as tf

from beam_tfrecords.read.sequence_batches import SequenceBatchDecoder
from beam_tfrecords.schema.tfmd import to_tfmd

from tests.helpers.native_paths import both_paths
from tests.unit.read.test_wire_columns_sequences import (SCHEMA, _serialized,
                                                         sequences)

path = both_paths("python")
TFMD = to_tfmd(SCHEMA).SerializeToString()


def _tfx():
  from tfx_bsl.coders import sequence_example_coder
  from beam_tfrecords.schema.tfmd import SEQUENCE_FEATURE
  return sequence_example_coder.SequenceExamplesToRecordBatchDecoder(
      SEQUENCE_FEATURE, TFMD)


def _small(record):
  """The record with its int64 values cut to 32 bits (what tfx-bsl
  keeps whole)."""
  lists = dict(record["lists"])
  if "ts" in lists:
    lists["ts"] = [[v % 2**31 for v in step] for step in lists["ts"]]
  return dict(record, lists=lists)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow,
                                 HealthCheck.function_scoped_fixture])
@given(st.lists(sequences(), min_size=1, max_size=6))
def test_the_batch_is_tfx_bsls_where_values_fit_32_bits(path, records):
  serialized = [_serialized(_small(r)) for r in records]
  try:
    want = _tfx().DecodeBatch(serialized)
  except Exception:  # pylint: disable=broad-except
    return  # (a fixed context feature absent: tfx-bsl's error stands)
  got = SequenceBatchDecoder(TFMD).DecodeBatch(serialized)
  assert got.schema == want.schema
  # (NaN unequal to itself: compared as text, which keeps -0.0 too)
  assert repr(got.to_pylist()) == repr(want.to_pylist())
  assert [c.null_count for c in got.columns] == [
      c.null_count for c in want.columns]


def test_int64_feature_lists_are_whole(path):
  big = [2**31, 2**40 + 5, -2**63, 2**63 - 1]
  records = [
      {"context": {"user": [1], "where": [0.0, 0.0]},
       "lists": {"ts": [[v] for v in big], "xy": [[1.0, 2.0]] * 4}},
      {"context": {"user": [2], "where": [0.0, 0.0]}, "lists": {}},
      {"context": {"user": [3], "where": [0.0, 0.0]},
       "lists": {"ts": [[], [5, 2**33]]}},
  ]
  serialized = [_serialized(r) for r in records]
  got = SequenceBatchDecoder(TFMD).DecodeBatch(serialized)
  ts = got.column("##SEQUENCE##").field("ts").to_pylist()
  assert ts == [[[v] for v in big], None, [[], [5, 2**33]]]
  parsed = tf.io.parse_single_sequence_example(
      serialized[0], sequence_features={
          "ts": tf.io.FixedLenSequenceFeature([], tf.int64)})[1]["ts"]
  assert parsed.numpy().tolist() == big
  # (tfx-bsl's own: 32 bits; if it mends, this module can go)
  assert _tfx().DecodeBatch(serialized).column("##SEQUENCE##").field(
      "ts").to_pylist()[0][0] == [-2**31]


def test_a_step_without_a_list_is_null_as_tfx_bsl_gives_it(path):
  record = tf.train.SequenceExample()
  record.context.feature["user"].int64_list.value.append(1)
  record.context.feature["where"].float_list.value.extend([0.0, 0.0])
  steps = record.feature_lists.feature_list["ts"].feature
  steps.add().int64_list.value.append(2**40)
  steps.add()  # no list
  steps.add().int64_list.value.append(3)
  serialized = [record.SerializeToString()]
  got = SequenceBatchDecoder(TFMD).DecodeBatch(serialized)
  ts = got.column("##SEQUENCE##").field("ts")
  assert ts.to_pylist() == [[[2**40], None, [3]]]
  want = _tfx().DecodeBatch(serialized).column("##SEQUENCE##").field("ts")
  assert ts.type == want.type
  assert [s is None for s in ts.to_pylist()[0]] == [
      s is None for s in want.to_pylist()[0]]

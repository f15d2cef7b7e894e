"""beam_tfrecords/read/wire_columns.py, SequenceExamples: the native core
(decode.rs, decode_sequences) against tfx-bsl's decoder, the reference
for sequences. The same columns (read.arrays' decode_batch), the same
per-record dicts (RecordDecoder.decode) and the same plain values
(reader.plain_records, against the pure-Python reader); a damaged record
is either read as protobuf reads it or left to tfx-bsl."""

import math

from hypothesis import HealthCheck, given, settings, strategies as st
import numpy as np
import pytest
import tensorflow as tf

import beam_tfrecords as btr
from beam_tfrecords.core import native
from beam_tfrecords.read.arrays import RecordDecoder
from beam_tfrecords.read.reader import plain_records
from beam_tfrecords.read.sequence_columns import sequence_columns
from beam_tfrecords.read.wire_columns import (decode_columns,
                                              native_decode_sequences,
                                              objects)

from tests.helpers.columns import _same
from tests.helpers.damage import damaged
from tests.helpers.native_paths import NATIVE

CONTEXT = {
    "user": {"type": "int64", "required": True},
    "where": {"type": "float", "shape": [2], "required": True},
    "country": {"type": "string"},
    "blob": {"type": "bytes"},
}
SEQUENCE = {
    "ts": {"type": "int64", "required": True},
    "xy": {"type": "float", "shape": [2], "required": True},
    "tags": {"type": "string", "shape": [-1]},
    "raw": {"type": "bytes"},
}
SCHEMA = btr.load_schema({"name": "seq", "record": "sequence_example",
                          "context": CONTEXT, "sequence": SEQUENCE})
DECODER = RecordDecoder(SCHEMA)
KINDS = {**CONTEXT, **SEQUENCE}

pytestmark = pytest.mark.skipif(NATIVE is None,
                                reason="the native core is not built")

ints = st.integers(-2**63, 2**63 - 1)
floats = st.floats(width=32, allow_nan=True)
text = st.text(max_size=30)
blobs = st.binary(max_size=40)


def _values(draw, name, fixed):
  """One list of a feature's values (context, or one step)."""
  kind, shape = KINDS[name]["type"], KINDS[name].get("shape", [])
  if fixed and draw(st.integers(0, 9)):  # mostly the fixed count
    count = int(np.prod(shape)) if shape else 1
  else:
    count = draw(st.integers(0, 3))
  element = {"int64": ints, "float": floats, "string": text,
             "bytes": blobs}[kind]
  return draw(st.lists(element, min_size=count, max_size=count))


@st.composite
def sequences(draw):
  """A record: {"context": {name: values}, "lists": {name: [steps]}},
  optional features maybe absent, lists of 0 to 5 steps."""
  context = {}
  for name, spec in CONTEXT.items():
    if spec.get("required") or draw(st.booleans()):
      context[name] = _values(draw, name, spec.get("required", False))
  lists = {}
  for name, spec in SEQUENCE.items():
    if draw(st.integers(0, 4)):
      steps = draw(st.integers(0, 5))
      lists[name] = [_values(draw, name, spec.get("required", False))
                     for _ in range(steps)]
  return {"context": context, "lists": lists}


def _fill(feature, name, values):
  kind = KINDS[name]["type"]
  if kind == "int64":
    feature.int64_list.value.extend(values)
  elif kind == "float":
    feature.float_list.value.extend(values)
  elif kind == "string":
    feature.bytes_list.value.extend(v.encode("utf-8") for v in values)
  else:
    feature.bytes_list.value.extend(values)


def _serialized(record) -> bytes:
  example = tf.train.SequenceExample()
  for name, values in record["context"].items():
    _fill(example.context.feature[name], name, values)
  for name, steps in record["lists"].items():
    feature_list = example.feature_lists.feature_list[name]
    for values in steps:
      _fill(feature_list.feature.add(), name, values)
  return example.SerializeToString()


def _tfx(serialized):
  """The reference's columns, or the error it raises."""
  try:
    return objects(sequence_columns(serialized, SCHEMA))
  except Exception as e:  # pylint: disable=broad-except
    return e


def _rows_same(got, want, path=""):
  """Per-record values equal type for type (floats bit for bit)."""
  if isinstance(want, dict):
    assert list(got) == list(want), path
    for k in want:
      _rows_same(got[k], want[k], f"{path}/{k}")
  elif isinstance(want, list):
    assert isinstance(got, list) and len(got) == len(want), path
    for g, w in zip(got, want):
      _rows_same(g, w, path)
  else:
    assert type(got) is type(want), (path, got, want)
    if isinstance(want, np.ndarray):
      assert got.dtype == want.dtype and got.shape == want.shape, path
      assert got.tobytes() == want.tobytes() if want.dtype != object \
          else got.tolist() == want.tolist(), path
    elif isinstance(want, float) and math.isnan(want):
      assert math.isnan(got), path
    else:
      assert got == want, path


def _on(which: str, function, *args):
  with pytest.MonkeyPatch.context() as m:
    m.setenv(native.ENV, which)
    return function(*args)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(sequences(), min_size=1, max_size=8))
def test_columns_rows_and_plain_values_equal_the_references(records):
  serialized = [_serialized(r) for r in records]
  got = _on("1", decode_columns, serialized, SCHEMA)
  want = _tfx(serialized)
  if isinstance(want, Exception):  # a fixed context feature not fixed
    assert got is None
    return
  assert got is not None
  _same(objects(got), want)
  _rows_same(_on("1", DECODER.decode, serialized),
             _on("0", DECODER.decode, serialized))
  _rows_same(_on("1", plain_records, serialized, SCHEMA),
             _on("0", plain_records, serialized, SCHEMA))
  # (the native path was taken)
  assert _on("1", native_decode_sequences, serialized, SCHEMA) is not None


GOOD = {"context": {"user": [7], "where": [1.0, 2.0], "country": ["nz"]},
        "lists": {"ts": [[1], [2]], "xy": [[0.5, 1.5], [2.5, 3.5]],
                  "tags": [["a", "b"], []], "raw": [[b"\x00"], []]}}


def test_layouts_of_a_feature_list():
  """Every step of the batch holding the fixed shape: {"values" [steps,
  *shape], "lengths" (steps per record)}; a step that does not:
  {"values", "lengths" per step, "steps"}; a record's dict then holds an
  array for its own steps where they hold the shape, else a list."""
  odd = {"context": GOOD["context"], "lists": dict(GOOD["lists"],
                                                   ts=[[1, 2], [3]])}
  serialized = [_serialized(GOOD), _serialized(odd)]
  columns = _on("1", decode_columns, serialized[:1], SCHEMA)
  assert columns["feature_lists"]["ts"]["values"].tolist() == [1, 2]
  assert columns["feature_lists"]["ts"]["lengths"].tolist() == [2]
  assert columns["feature_lists"]["xy"]["values"].shape == (2, 2)
  both = _on("1", decode_columns, serialized, SCHEMA)
  assert both["feature_lists"]["ts"]["steps"].tolist() == [2, 2]
  assert both["feature_lists"]["ts"]["lengths"].tolist() == [1, 1, 2, 1]
  rows = _on("1", DECODER.decode, serialized)
  assert rows[0]["feature_lists"]["ts"].tolist() == [1, 2]
  assert [a.tolist() for a in rows[1]["feature_lists"]["ts"]] == [[1, 2],
                                                                  [3]]
  assert rows[0]["context"]["country"] == np.array(["nz"], object)
  _rows_same(rows, _on("0", DECODER.decode, serialized))
  plain = _on("1", plain_records, serialized, SCHEMA)
  assert plain[0]["feature_lists"]["ts"] == [1, 2]
  # (a scalar's step of two values: its first, as the reference reader)
  assert plain[1]["feature_lists"]["ts"] == [1, 3]
  assert plain[0]["context"] == {"user": 7, "where": [1.0, 2.0],
                                 "country": "nz", "blob": None}
  assert plain[0]["feature_lists"]["tags"] == [["a", "b"], []]


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(sequences(), min_size=1, max_size=4), st.data())
def test_a_damaged_record_is_read_as_protobuf_reads_it_or_left(records,
                                                              data):
  """A byte changed, dropped, inserted or a record cut: where the core
  takes the batch, tfx-bsl's decoder (protobuf's parser) takes it too,
  with the same values; else the core gives None and the reference
  decides (values or its error)."""
  serialized = [_serialized(r) for r in records]
  i = data.draw(st.integers(0, len(serialized) - 1))
  serialized[i] = damaged(data, serialized[i])
  got = _on("1", decode_columns, serialized, SCHEMA)
  if got is not None:
    want = _tfx(serialized)
    assert not isinstance(want, Exception), want
    _same(objects(got), want)


@pytest.mark.parametrize("record, why", [
    (b"\x12\x00\x0a\x00", "lists before context"),
    (b"\x0a\x00\x0a\x00", "context twice"),
    (b"\x1a\x00", "another field"),
])
def test_what_the_core_does_not_read_goes_to_the_reference(record, why):
  assert _on("1", native_decode_sequences, [record], SCHEMA) is None, why


@pytest.mark.parametrize("which", ["0", "1"])
def test_int64_feature_lists_keep_every_bit(which):
  """Values past 32 bits in a feature list come back whole on both paths,
  as TensorFlow's parser reads them (tfx-bsl's sequence decoder, not
  used, keeps the low 32 bits: 2**31 -> -2**31, 2**40 + 5 -> 5)."""
  big = [2**31, 2**40 + 5, -2**63, 2**63 - 1, -2**31 - 1]
  record = dict(GOOD, lists=dict(GOOD["lists"], ts=[[v] for v in big]))
  serialized = _serialized(record)
  parsed = tf.io.parse_single_sequence_example(
      serialized, sequence_features={
          "ts": tf.io.FixedLenSequenceFeature([], tf.int64)})[1]["ts"]
  assert parsed.numpy().tolist() == big
  columns = _on(which, DECODER.decode_batch, [serialized])
  assert columns["feature_lists"]["ts"]["values"].tolist() == big
  row = _on(which, DECODER.decode, [serialized])[0]
  assert row["feature_lists"]["ts"].tolist() == big
  plain = _on(which, plain_records, [serialized], SCHEMA)[0]
  assert plain["feature_lists"]["ts"] == big


def test_the_reference_names_what_it_cannot_read():
  """Without the core (or outside its layout): a list of another kind
  than the schema's, text that is not UTF-8 and a fixed context feature
  absent are InputErrors naming the record, step and feature."""
  from beam_tfrecords.core.errors import InputError
  wrong = tf.train.SequenceExample.FromString(_serialized(GOOD))
  step = wrong.feature_lists.feature_list["ts"].feature[1]
  step.Clear()
  step.float_list.value.append(1.0)
  with pytest.raises(InputError, match=r"record 1 of the batch, step 1: "
                     r"feature 'ts' holds a float_list; the schema says "
                     r"int64"):
    sequence_columns([_serialized(GOOD), wrong.SerializeToString()], SCHEMA)
  latin = tf.train.SequenceExample.FromString(_serialized(GOOD))
  latin.context.feature["country"].bytes_list.value[0] = b"\xe9t\xe9"
  with pytest.raises(InputError, match=r"record 0 of the batch: string "
                     r"feature 'country' holds bytes that are not UTF-8"):
    sequence_columns([latin.SerializeToString()], SCHEMA)
  absent = tf.train.SequenceExample.FromString(_serialized(GOOD))
  del absent.context.feature["user"]
  with pytest.raises(InputError, match=r"record 0 of the batch: context "
                     r"feature 'user' holds nothing; the schema fixes it "
                     r"at 1"):
    sequence_columns([absent.SerializeToString()], SCHEMA)
  with pytest.raises(InputError, match="record 0 of the batch is not a "
                     "serialized SequenceExample"):
    sequence_columns([b"\x0a\x05ab"], SCHEMA)


def _varint(n: int) -> bytes:
  out = bytearray()
  while True:
    b, n = n & 0x7F, n >> 7
    out.append(b | (0x80 if n else 0))
    if not n:
      return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
  return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _record(ts_step: bytes, entry_tail: bytes = b"") -> bytes:
  """A SequenceExample whose "ts" list holds one step of these Feature
  bytes (entry_tail: more bytes in the map entry)."""
  context = b"".join(
      _field(1, _field(1, key) + _field(2, value)) for key, value in (
          (b"user", _field(3, _field(1, b"\x07"))),
          (b"where", _field(2, _field(1, b"\x00" * 8)))))
  entry = _field(1, b"ts") + _field(2, _field(1, ts_step)) + entry_tail
  return _field(1, context) + _field(2, _field(1, entry))


@pytest.mark.parametrize("step, tail, why", [
    (_field(3, _field(1, b"\x01")) + _field(3, _field(1, b"\x02")), b"",
     "a list given twice is merged"),
    (_field(2, _field(1, b"\x00\x00\x80?")) + _field(3, _field(1, b"\x05")),
     b"", "another kind of list replaces the first (a oneof)"),
    (_field(3, _field(1, b"\x01")), _field(2, _field(1, _field(3, _field(
        1, b"\x02")))), "a value given twice in an entry is merged"),
    (_field(3, b"\x0d\x00\x00\x00\x00" + _field(1, b"\x03")), b"",
     "a value of another wire type is skipped"),
    (_field(3, _field(1, b"\x85" + b"\x80" * 8 + b"\x7f")), b"",
     "bits past 64 are dropped"),
])
def test_the_reference_reads_as_protobuf(step, tail, why):
  """read.sequence_columns gives what protobuf's own parser gives; so
  does the core where it takes the record (it refuses all but the last)."""
  record = _record(step, tail)
  want = [list(f.int64_list.value) for f in
          tf.train.SequenceExample.FromString(record).feature_lists
          .feature_list["ts"].feature]
  got = _on("0", DECODER.decode, [record])[0]["feature_lists"]["ts"]
  assert _steps(got) == want, why
  fast = _on("1", native_decode_sequences, [record], SCHEMA)
  assert (fast is None) == ("64" not in why), why
  if fast is not None:
    assert _steps(_on("1", DECODER.decode, [record])[0]["feature_lists"][
        "ts"]) == want, why


def _steps(value):
  """A record's feature list (an array [steps] or a list of arrays) as
  a list of each step's values."""
  if isinstance(value, np.ndarray):
    return [[v] for v in value.tolist()]
  return [a.tolist() for a in value]

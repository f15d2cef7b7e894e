"""beam_tfrecords/read/wire_columns.py, on values: Serialized tf.train.Examples
-> numpy columns, the protobuf wire format read with numpy over a whole
batch at once: no per-record or per-value Python step, no TensorFlow.

Every test runs on both paths: the numpy walk (the reference, BTR_NATIVE=0)
and the native core's (decode.rs); and damaged records must get the same
answer from both."""

import math
import struct

from hypothesis import HealthCheck, given, settings, strategies as st
import numpy as np
import pytest
import tensorflow as tf

import beam_tfrecords as btr
from beam_tfrecords.core import native
from beam_tfrecords.read.arrays import RecordDecoder, _rows, cut, cuts
from beam_tfrecords.read.wire_columns import decode_columns, objects

from tests.helpers.columns import _same
from tests.helpers.damage import damaged
from tests.helpers.native_paths import NATIVE, both_paths


# Names that share lengths, first 8 bytes, last 8 bytes, or all but the
# middle (keys are matched by those), and one of 1 byte.
NAMES = {
    "n": {"type": "int64", "required": True},
    "score": {"type": "float", "shape": [2], "required": True},
    "label": {"type": "string", "required": True},
    "blob": {"type": "bytes"},
    "maybe_int": {"type": "int64"},
    "many_ints": {"type": "int64", "shape": [-1]},
    "many_floats": {"type": "float", "shape": [-1]},
    "words": {"type": "string", "shape": [-1]},
    "a_long_feature_name_one_x_tail_end": {"type": "int64"},
    "a_long_feature_name_two_x_tail_end": {"type": "int64"},
    "sched_arr_time": {"type": "int64"},
    "sched_dep_time": {"type": "int64"},
}
SCHEMA = btr.load_schema({"name": "wire", "record": "example",
                          "features": NAMES})
DECODER = RecordDecoder(SCHEMA)


path = both_paths("numpy")

ints = st.integers(-2**63, 2**63 - 1)
floats = st.floats(width=32, allow_nan=True)
text = st.text(max_size=200)
blobs = st.binary(max_size=300)


@st.composite
def examples(draw):
  """A record's values: {name: list}, optional ones maybe absent."""
  values = {"n": [draw(ints)], "score": draw(st.lists(floats, min_size=2,
                                                      max_size=2)),
            "label": [draw(text)]}
  optional = {"blob": st.lists(blobs, max_size=1),
              "maybe_int": st.lists(ints, min_size=1, max_size=1),
              "many_ints": st.lists(ints, max_size=40),
              "many_floats": st.lists(floats, max_size=40),
              "words": st.lists(text, max_size=8),
              "a_long_feature_name_one_x_tail_end": st.lists(
                  ints, min_size=1, max_size=1),
              "a_long_feature_name_two_x_tail_end": st.lists(
                  ints, min_size=1, max_size=1),
              "sched_arr_time": st.lists(ints, min_size=1, max_size=1),
              "sched_dep_time": st.lists(ints, min_size=1, max_size=1)}
  for name, values_of in optional.items():
    if draw(st.booleans()):
      values[name] = draw(values_of)
  return values


def _serialized(values, order) -> bytes:
  """An Example with the keys added in `order` (protobuf's map keeps no
  order of its own: both orders reach the decoder)."""
  example = tf.train.Example()
  for name in order:
    if name not in values:
      continue
    kind = NAMES[name]["type"]
    feature = example.features.feature[name]
    if kind == "int64":
      feature.int64_list.value.extend(values[name])
    elif kind == "float":
      feature.float_list.value.extend(values[name])
    elif kind == "string":
      feature.bytes_list.value.extend(v.encode("utf-8")
                                      for v in values[name])
    else:
      feature.bytes_list.value.extend(values[name])
  return example.SerializeToString()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(examples(), min_size=1, max_size=30), st.randoms())
def test_columns_equal_tfx_bsl_for_any_key_order(records, rnd):
  names = list(NAMES)
  serialized = []
  for values in records:
    rnd.shuffle(names)
    serialized.append(_serialized(values, names))
  got = decode_columns(serialized, SCHEMA)
  assert got is not None
  _same(objects(got), objects(DECODER._tfx_columns(serialized)))
  # One dict per record (RecordDecoder.decode, from these columns) as
  # tfx-bsl's rows give them, type for type.
  _same_rows(DECODER.decode(serialized), _tfx_rows(serialized))
  # A cut of the batch is the batch of the cut records.
  if len(serialized) > 2:
    _same(objects(cut(got, 1, len(serialized) - 1)),
          objects(DECODER._tfx_columns(serialized[1:-1])))
    # And so is each of its cuts in turn.
    for i, (n, part) in enumerate(cuts(got, len(serialized), 2)):
      assert n == len(serialized[2 * i:2 * i + 2])
      _same(objects(part),
            objects(DECODER._tfx_columns(serialized[2 * i:2 * i + 2])))


def _tfx_rows(serialized):
  batch = DECODER._decoder.DecodeBatch(serialized)
  columns = {f.name: _rows(f, batch.column(f.name)) for f in SCHEMA.features}
  return [{k: v[i] for k, v in columns.items()}
          for i in range(len(serialized))]


def _same_rows(got, want):
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert list(g) == list(w)
    for k in w:
      assert type(g[k]) is type(w[k]), (k, g[k], w[k])
      if isinstance(w[k], np.ndarray):
        _same(g[k], w[k])
      else:
        assert np.asarray(g[k]).tobytes() == np.asarray(w[k]).tobytes() \
            if isinstance(w[k], np.floating) else g[k] == w[k]


def test_extremes_and_long_values():
  """Varints of 1 to 10 bytes, lengths of 1 to 3 bytes, NaN and -0.0,
  text of several scripts, bytes with NULs and high bytes."""
  values = [{"n": [v], "score": [math.nan, -0.0], "label": ["é" * n],
             "blob": [bytes(range(256)) * 3 * n],
             "many_ints": [v, -1, 0, 2**63 - 1, -2**63] * n,
             "words": ["日本語", "", "a\x00b"] * n}
            for n, v in enumerate([0, 1, 127, 128, 16383, 16384, 2**35,
                                   -1, -2**63, 2**63 - 1, 300] * 3)]
  serialized = [_serialized(v, sorted(v)) for v in values]
  assert max(len(s) for s in serialized) > 2**14  # 3-byte lengths
  got = decode_columns(serialized, SCHEMA)
  assert got is not None
  _same(objects(got), objects(DECODER._tfx_columns(serialized)))
  assert got["label"].numpy()[2] == "éé"
  _same_rows(DECODER.decode(serialized), _tfx_rows(serialized))
  assert got["n"].tolist()[:4] == [0, 1, 127, 128]


def _entry(key: bytes, feature: bytes) -> bytes:
  entry = b"\x0a" + bytes([len(key)]) + key + b"\x12" + bytes(
      [len(feature)]) + feature
  return b"\x0a" + bytes([len(entry)]) + entry


def _example(*entries: bytes) -> bytes:
  body = b"".join(entries)
  return b"\x0a" + bytes([len(body)]) + body


GOOD = _example(
    _entry(b"n", b"\x1a\x03\x0a\x01\x05"),
    _entry(b"score", b"\x12\x0a\x0a\x08" + struct.pack("<2f", 1, 2)),
    _entry(b"label", b"\x0a\x03\x0a\x01x"))


@pytest.mark.parametrize("record", [
    _example(_entry(b"nope", b"\x1a\x03\x0a\x01\x05")),  # not in schema
    _example(_entry(b"score_", b"\x1a\x03\x0a\x01\x05")),
    GOOD[:-1],  # truncated
    GOOD + _entry(b"n", b"\x1a\x03\x0a\x01\x06")[0:0] + b"\x00",
    # a key twice
    _example(_entry(b"n", b"\x1a\x03\x0a\x01\x05"),
             _entry(b"n", b"\x1a\x03\x0a\x01\x06"),
             _entry(b"score", b"\x12\x0a\x0a\x08" + struct.pack("<2f", 1, 2)),
             _entry(b"label", b"\x0a\x03\x0a\x01x")),
    # unpacked int64_list (field 1, varint wire type)
    _example(_entry(b"n", b"\x1a\x02\x08\x05"),
             _entry(b"score", b"\x12\x0a\x0a\x08" + struct.pack("<2f", 1, 2)),
             _entry(b"label", b"\x0a\x03\x0a\x01x")),
    # the wrong kind of list for the feature's type
    _example(_entry(b"n", b"\x12\x06\x0a\x04" + struct.pack("<f", 1)),
             _entry(b"score", b"\x12\x0a\x0a\x08" + struct.pack("<2f", 1, 2)),
             _entry(b"label", b"\x0a\x03\x0a\x01x")),
    # a fixed feature absent
    _example(_entry(b"n", b"\x1a\x03\x0a\x01\x05"),
             _entry(b"label", b"\x0a\x03\x0a\x01x")),
    # text that is not utf-8
    _example(_entry(b"n", b"\x1a\x03\x0a\x01\x05"),
             _entry(b"score", b"\x12\x0a\x0a\x08" + struct.pack("<2f", 1, 2)),
             _entry(b"label", b"\x0a\x03\x0a\x01\xff")),
])
def test_outside_the_layout_gives_none(record):
  assert decode_columns([GOOD], SCHEMA) is not None
  assert decode_columns([GOOD, record], SCHEMA) is None


def test_decode_batch_falls_back_to_tfx_bsl():
  """A record outside the layout is still decoded (by tfx-bsl)."""
  odd = _example(_entry(b"n", b"\x1a\x02\x08\x07"),  # unpacked
                 _entry(b"score", b"\x12\x0a\x0a\x08" +
                        struct.pack("<2f", 3, 4)),
                 _entry(b"label", b"\x0a\x03\x0a\x01y"))
  got = DECODER.decode_batch([GOOD, odd])
  assert got["n"].tolist() == [5, 7]
  assert got["score"].tolist() == [[1, 2], [3, 4]]
  assert got["label"].tolist() == ["x", "y"]


def test_malformed_lengths_give_none_not_a_value_or_a_hang():
  """From a review: an empty packed list, an entry reaching into the next
  record, and a length of 2**64 - 11 (negative as int64)."""
  empty = _example(_entry(b"n", b"\x1a\x03\x0a\x01\x05"),
                   _entry(b"score", b"\x12\x0a\x0a\x08" +
                          struct.pack("<2f", 1, 2)),
                   _entry(b"label", b"\x0a\x03\x0a\x01x"),
                   _entry(b"maybe_int", b"\x1a\x02\x0a\x00"))
  got = DECODER.decode_batch([empty, GOOD])
  want = objects(DECODER._tfx_columns([empty, GOOD]))
  _same(got, want)
  assert got["maybe_int"]["lengths"].tolist() == [0, 0]
  # Record A's last entry says it goes on into record B (A's own length
  # is right): B's bytes must not become A's value.
  head = (_entry(b"n", b"\x1a\x03\x0a\x01\x05")
          + _entry(b"score", b"\x12\x0a\x0a\x08" + struct.pack("<2f", 1, 2))
          + _entry(b"label", b"\x0a\x03\x0a\x01x"))
  last = _entry(b"blob", b"\x0a" + bytes([len(GOOD) + 2]) + b"\x0a" +
                bytes([len(GOOD)]) + GOOD)[:-len(GOOD)]
  a = b"\x0a" + bytes([len(head) + len(last)]) + head + last
  assert decode_columns([a, GOOD], SCHEMA) is None
  huge = (b"\x0a\x04blob\x12\x0d\x0a\x0b\x0a"
          + bytes([0xF5] + [0xFF] * 8 + [0x01]))
  record = _example(_entry(b"n", b"\x1a\x03\x0a\x01\x05"),
                    _entry(b"score", b"\x12\x0a\x0a\x08" +
                           struct.pack("<2f", 1, 2)),
                    _entry(b"label", b"\x0a\x03\x0a\x01x"),
                    b"\x0a" + bytes([len(huge)]) + huge)
  assert decode_columns([record, GOOD], SCHEMA) is None


def _on(which: str, records):
  with pytest.MonkeyPatch.context() as m:
    m.setenv(native.ENV, which)
    return decode_columns(records, SCHEMA)


@pytest.mark.skipif(NATIVE is None, reason="the native core is not built")
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow,
                                 HealthCheck.function_scoped_fixture])
@given(st.lists(examples(), min_size=1, max_size=6), st.data())
def test_damaged_records_get_one_answer_on_both_paths(path, records, data):
  """A byte changed, dropped, inserted or a record cut: both paths take
  the batch with the same values, or both refuse it; and what the
  reference takes is what protobuf's own parser (tfx-bsl's) reads."""
  serialized = [_serialized(v, sorted(v)) for v in records]
  for _ in range(data.draw(st.integers(1, 3))):
    i = data.draw(st.integers(0, len(serialized) - 1))
    serialized[i] = damaged(data, serialized[i])
  reference = _on("0", serialized)
  if path == "numpy":
    if reference is not None:
      _same(objects(reference), objects(DECODER._tfx_columns(serialized)))
    return
  fast = _on("1", serialized)
  assert (reference is None) == (fast is None)
  if reference is not None:
    _same(objects(fast), objects(reference))

"""core.records: records left in the buffers they were read from behave
as the list of their bytes does, and the native core decodes them from
their spans with the same columns."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_tfrecords.core import native, shard_reader
from beam_tfrecords.core.records import Records
from beam_tfrecords.core.tfrecord_files import frame_buffer


def _framed(records):
  offsets = np.cumsum([0] + [len(r) for r in records], dtype=np.int64)
  return bytes(frame_buffer(b"".join(records), offsets))


def _records(groups):
  """Records over one framed buffer per group (as a reader's lists)."""
  out = Records([])
  for group in groups:
    data = _framed(group)
    starts = [12]
    for r in group[:-1]:
      starts.append(starts[-1] + len(r) + 16)
    spans = np.array([(s, s + len(r)) for s, r in zip(starts, group)],
                     np.int64).reshape(-1, 2)
    out = out + Records([(data, spans)])
  return out


_GROUPS = st.lists(st.lists(st.binary(max_size=20), max_size=6), max_size=4)


@settings(max_examples=150, deadline=None)
@given(_GROUPS, st.data())
def test_records_behave_as_the_list_of_their_bytes(groups, data):
  records = _records(groups)
  want = [r for g in groups for r in g]
  assert len(records) == len(want)
  assert list(records) == want and records == want and want == list(records)
  if want:
    i = data.draw(st.integers(-len(want), len(want) - 1))
    assert records[i] == want[i]
  a = data.draw(st.integers(-8, len(want) + 8))
  b = data.draw(st.integers(-8, len(want) + 8))
  cut = records[a:b]
  assert isinstance(cut, Records) and list(cut) == want[a:b]
  assert records[::2] == want[::2]
  assert list(cut + records) == want[a:b] + want
  assert cut + [b"x"] == want[a:b] + [b"x"]
  assert [b"x"] + cut == [b"x"] + want[a:b]
  back = pickle.loads(pickle.dumps(cut))
  assert isinstance(back, Records) and list(back) == want[a:b]
  assert len(back.native()) <= 1  # one buffer of just these records
  with pytest.raises(IndexError):
    records[len(want)]  # pylint: disable=pointless-statement
  with pytest.raises(TypeError):  # (as a list's)
    records[1.0]  # pylint: disable=pointless-statement
  assert records != tuple(want)  # (as a list)


def test_the_shard_reader_leaves_records_in_their_buffer():
  """With the native core, a framed buffer's records come back as
  Records over it, checked as unframe checks them."""
  if native.core() is None:
    pytest.skip("the native core is not built: records are lists")
  want = [b"", b"abc", b"hello world" * 9]
  data = _framed(want)
  records, used, wrong = shard_reader.framed_records(data)
  assert isinstance(records, Records) and records == want
  assert (used, wrong) == (len(data), None)
  bad = bytearray(data)
  bad[16 + 12] ^= 1  # the second record's first byte
  records, used, wrong = shard_reader.framed_records(bytes(bad))
  assert list(records) == [b""] and (used, wrong) == (16, "corrupt data CRC")
  records, used, wrong = shard_reader.framed_records(data[:-1])
  assert list(records) == want[:2] and wrong is None and used < len(data)


def _delimited(tag: int, payload: bytes) -> bytes:
  assert len(payload) < 128  # (a one-byte length)
  return bytes([tag, len(payload)]) + payload


def _example(i: int) -> bytes:
  """An Example as TensorFlow serializes it: t: [b"a" * i], x: [i, 7i]."""
  def entry(key, feature):
    return _delimited(0x0A, _delimited(0x0A, key) + _delimited(0x12, feature))
  t = _delimited(0x0A, _delimited(0x0A, b"a" * i))  # bytes_list
  x = _delimited(0x1A, _delimited(0x0A, bytes([i, 7 * i])))  # int64_list
  return _delimited(0x0A, entry(b"t", t) + entry(b"x", x))


def test_the_native_decoders_read_spans_as_they_read_bytes():
  module = native.core()
  if module is None:
    pytest.skip("the native core is not built")
  examples = [_example(i) for i in range(5)]
  records = _records([examples[:2], examples[2:]])[1:]
  names, kinds = [b"t", b"x"], [2, 0]
  got = module.decode_examples(records.native(), names, kinds)
  assert got == module.decode_examples(examples[1:], names, kinds)
  assert bytes(got[1][0]) == np.array([2, 2, 2, 2], "<i8").tobytes()
  assert bytes(got[1][1]) == np.array([1, 7, 2, 14, 3, 21, 4, 28],
                                      "<i8").tobytes()
  data, spans = records.native()[0]
  for wrong in (np.array([[0, len(data) + 1]], np.int64),
                np.array([[5, 4]], np.int64), np.array([1, 2, 3], np.int64)):
    with pytest.raises(ValueError, match="span"):
      module.decode_examples([(data, wrong)], names, kinds)
  with pytest.raises(TypeError, match="records are bytes"):
    module.decode_examples([(data,)], names, kinds)
  with pytest.raises(TypeError, match="read-only"):  # (may change)
    module.decode_examples([(bytearray(data), spans)], names, kinds)
  for wrong in (spans.astype(np.float64), spans.astype(np.uint64)):
    with pytest.raises(ValueError, match="int64"):
      module.decode_examples([(data, wrong)], names, kinds)

"""beam_tfrecords/read/reader.py, iter_records' records from the native
core's columns: the same plain values and types as the record-at-a-time
walk (core.tfrecord_files.decode_example), which stays the reference and
the fallback."""

import math

from hypothesis import HealthCheck, given, settings, strategies as st
import pytest

from beam_tfrecords.core import native
from beam_tfrecords.core.tfrecord_files import decode_example
from beam_tfrecords.read.reader import _batches, _plain_rows, _to_python
from beam_tfrecords.read.wire_columns import native_decode

from tests.unit.read.test_wire_columns import (SCHEMA, _entry,
                                               _example, _serialized,
                                               examples)

NATIVE = native._load("")  # pylint: disable=protected-access
pytestmark = pytest.mark.skipif(NATIVE is None,
                                reason="the native core is not built")


def _reference(records):
  return [_to_python(SCHEMA.features, decode_example(r)) for r in records]


def _plain(records):
  flat = native_decode(records, SCHEMA)
  assert flat is not None
  return _plain_rows(SCHEMA.features, flat, len(records))


def _same(got, want):
  """Equal value for value and type for type (NaN equal to NaN)."""
  assert type(got) is type(want), (got, want)
  if isinstance(want, dict):
    assert list(got) == list(want)
    for k in want:
      _same(got[k], want[k])
  elif isinstance(want, list):
    assert len(got) == len(want)
    for g, w in zip(got, want):
      _same(g, w)
  elif isinstance(want, float) and math.isnan(want):
    assert math.isnan(got)
  else:
    assert got == want and (not isinstance(want, float) or
                            math.copysign(1, got) == math.copysign(1, want))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(examples(), min_size=1, max_size=30))
def test_plain_rows_equal_the_record_at_a_time_walk(records):
  serialized = [_serialized(v, sorted(v)) for v in records]
  _same(_plain(serialized), _reference(serialized))


def test_absent_empty_and_several_values_of_a_scalar():
  """Absent: None; present and empty: [] (a list feature) or None (a
  scalar); a scalar holding several values: the first."""
  head = (_entry(b"n", b"\x1a\x03\x0a\x01\x05")
          + _entry(b"score", b"\x12\x0a\x0a\x08" + bytes(8))
          + _entry(b"label", b"\x0a\x03\x0a\x01x"))
  empty = _example(head,
                   _entry(b"many_ints", b"\x1a\x00"),
                   _entry(b"maybe_int", b"\x1a\x00"),
                   _entry(b"words", b"\x0a\x00"))
  several = _example(head, _entry(b"maybe_int", b"\x1a\x04\x0a\x02\x07\x08"),
                     _entry(b"blob", b"\x0a\x06\x0a\x01a\x0a\x01b"))
  absent = _example(head)
  records = [empty, several, absent]
  got = _plain(records)
  _same(got, _reference(records))
  assert [r["many_ints"] for r in got] == [[], None, None]
  assert [r["words"] for r in got] == [[], None, None]
  assert [r["maybe_int"] for r in got] == [None, 7, None]
  assert [r["blob"] for r in got] == [None, b"a", None]
  assert got[0]["n"] == 5 and got[0]["label"] == "x"
  assert got[0]["score"] == [0.0, 0.0]


def test_batches_grow_and_a_failed_read_gives_the_records_before_it():
  def records():
    yield from (b"a", b"b", b"c", b"d", b"e")
    raise OSError("corrupt data CRC")
  got = []
  with pytest.raises(OSError, match="corrupt data CRC"):
    for batch in _batches(records(), 2):
      got.append(batch)
  assert got == [[b"a"], [b"b", b"c"], [b"d", b"e"]]
  assert list(_batches(iter(b"abcdefghijklmn"), 4)) == [
      [97], [98, 99], [100, 101, 102, 103], [104, 105, 106, 107],
      [108, 109, 110]]
  assert list(_batches(iter([]), 2)) == []

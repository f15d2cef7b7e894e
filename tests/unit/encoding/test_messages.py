"""One contract, two paths: the native core (beam_tfrecords_native) and the
pure-Python reference give the same bytes for every input.

Random schemas and values (Hypothesis) go through both paths of
`encoding.messages` and `core.tfrecord_files`, and the bytes are compared;
the messages are also parsed back by TensorFlow's own protobuf classes.
Where cargo is installed, `make setup` builds the core, so its absence
there fails here instead of skipping.
"""

import contextlib
import os
import shutil
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorflow.core.example import example_pb2

from beam_tfrecords.core import native, tfrecord_files
from beam_tfrecords.encoding import messages, wire
from beam_tfrecords.encoding.ragged import Ragged, offsets_of
from beam_tfrecords.schema import Feature, FeatureType

NATIVE = native._load("")  # pylint: disable=protected-access

if NATIVE is None and shutil.which("cargo") and not os.environ.get(
    "BTR_NO_NATIVE_BUILD"):
  pytest.fail("cargo is installed but the native core is not: run "
              "`make native` (make setup builds it)", pytrace=False)
pytestmark = pytest.mark.skipif(NATIVE is None,
                                reason="the native core is not built")

# BTR_HYPOTHESIS_EXAMPLES=5000 for a longer soak.
SETTINGS = settings(max_examples=int(os.environ.get("BTR_HYPOTHESIS_EXAMPLES", "150")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@contextlib.contextmanager
def _path(which: str):
  """BTR_NATIVE=which inside the block ("0": the reference, "1": native)."""
  before = os.environ.get(native.ENV)
  os.environ[native.ENV] = which
  try:
    yield
  finally:
    if before is None:
      del os.environ[native.ENV]
    else:
      os.environ[native.ENV] = before


def _both(fn, *args):
  """(reference result, native result) as bytes of each row."""
  out = []
  for which in ("0", "1"):
    with _path(which):
      result = fn(*args)
    out.append(result.to_list() if isinstance(result, Ragged) else result)
  return out


# --- random columns -------------------------------------------------------

INT64 = st.integers(-2**63, 2**63 - 1)
# Every float32 bit pattern: NaN payloads, infinities, -0.0, subnormals.
FLOAT_BITS = st.integers(0, 2**32 - 1)
BYTES = st.binary(max_size=300)  # lengths past 127 take two-byte varints
KIND = st.sampled_from([messages.INT64, messages.FLOAT, messages.BYTES])
NAME = st.text(max_size=8)


@st.composite
def _column(draw, n: int, kind=None):
  """(Column, present, python values per row or None)."""
  kind = draw(KIND) if kind is None else kind
  value = {messages.INT64: INT64, messages.FLOAT: FLOAT_BITS,
           messages.BYTES: BYTES}[kind]
  longest = 40 if kind != messages.BYTES else 4
  rows = draw(st.lists(st.one_of(st.none(), st.lists(value, max_size=longest)),
                       min_size=n, max_size=n))
  present = np.array([r is not None for r in rows], dtype=bool)
  flat = [v for r in rows for v in (r or [])]
  offsets = offsets_of(np.array([len(r or []) for r in rows], dtype=np.int64))
  if kind == messages.INT64:
    return messages.int64_column(np.array(flat, dtype=np.int64),
                                 offsets), present, rows
  if kind == messages.FLOAT:
    values = np.array(flat, dtype=np.uint32).view("<f4")
    return messages.Column(messages.FLOAT, offsets, values), present, rows
  data = np.frombuffer(b"".join(flat), dtype=np.uint8)
  value_offsets = offsets_of(np.array([len(v) for v in flat], dtype=np.int64))
  return (messages.Column(messages.BYTES, offsets, data, value_offsets),
          present, rows)


@st.composite
def _fields(draw, n: int, most: int = 5):
  names = draw(st.lists(NAME, max_size=most, unique=True))
  fields, rows = [], {}
  for name in names:
    column, present, values = draw(_column(n))
    fields.append(messages.Field(name, column, present))
    rows[name] = (column.kind, values)
  return wire.sorted_by_name(fields), rows


def _parsed_values(feature, kind):
  if kind == messages.INT64:
    return list(feature.int64_list.value)
  if kind == messages.FLOAT:
    return [struct.unpack("<I", struct.pack("<f", v))[0]
            for v in feature.float_list.value]
  return list(feature.bytes_list.value)


def _same_floats(parsed, bits):
  """float32 bit patterns, NaNs compared as NaNs (protobuf's parser goes
  through a double, which may quiet a signaling NaN)."""
  def nan(b):
    return (b & 0x7F800000) == 0x7F800000 and b & 0x7FFFFF
  return len(parsed) == len(bits) and all(
      (nan(p) and nan(b)) or p == b for p, b in zip(parsed, bits))


# --- the properties -------------------------------------------------------


@SETTINGS
@given(st.integers(0, 12).flatmap(lambda n: st.tuples(st.just(n),
                                                       _fields(n))))
def test_examples_are_the_same_bytes_both_ways(case):
  n, (fields, rows) = case
  reference, fast = _both(messages.examples, fields, n)
  assert fast == reference
  assert len(fast) == n
  for i, record in enumerate(fast):
    parsed = example_pb2.Example.FromString(record).features.feature
    for name, (kind, values) in rows.items():
      if values[i] is None:
        assert name not in parsed
        continue
      got = _parsed_values(parsed[name], kind)
      if kind == messages.FLOAT:
        assert _same_floats(got, values[i])
      else:
        assert got == values[i]


@st.composite
def _sequences(draw):
  n = draw(st.integers(0, 8))
  context, _ = draw(_fields(n, most=3))
  lists = []
  for name in draw(st.lists(NAME, max_size=3, unique=True)):
    steps = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    column, _, _ = draw(_column(sum(steps)))
    with _path("0"):
      features = messages.feature_values(column)  # the reference's bytes
    present = np.array(draw(st.lists(st.booleans(), min_size=n,
                                     max_size=n)), dtype=bool)
    lists.append(messages.Field(
        name, messages.steps_column(features, offsets_of(np.array(
            steps, dtype=np.int64))), present))
  return n, context, wire.sorted_by_name(lists)


@SETTINGS
@given(_sequences())
def test_sequence_examples_are_the_same_bytes_both_ways(case):
  n, context, lists = case
  reference, fast = _both(messages.sequence_examples, context, lists, n)
  assert fast == reference
  for i, record in enumerate(fast):
    parsed = example_pb2.SequenceExample.FromString(record)
    for f in lists:
      if f.present[i]:
        steps = f.column.offsets[i + 1] - f.column.offsets[i]
        assert len(parsed.feature_lists.feature_list[f.name].feature) == steps
      else:
        assert f.name not in parsed.feature_lists.feature_list


@SETTINGS
@given(st.integers(0, 12).flatmap(lambda n: _column(n)), st.booleans())
def test_feature_values_are_the_same_bytes_both_ways(case, masked):
  column, present, _ = case
  reference, fast = _both(messages.feature_values, column,
                          present if masked else None)
  assert fast == reference
  raw = messages.raw_column(Ragged(np.frombuffer(b"".join(fast), np.uint8),
                                   offsets_of(np.array([len(r) for r in fast],
                                                       dtype=np.int64))))
  assert _both(messages.feature_values, raw, present) == [
      [r if p else b"" for r, p in zip(fast, present)]] * 2


@st.composite
def _step_columns(draw):
  """(n, [Column]) of 1-4 columns of n rows (absent rows: empty values,
  as a step's missing value is written)."""
  n = draw(st.integers(0, 12))
  return n, [draw(_column(n))[0] for _ in range(draw(st.integers(1, 4)))]


@SETTINGS
@given(_step_columns(), st.integers(0, 3))
def test_packed_steps_are_the_same_bytes_both_ways_and_unpack(case, start):
  """packed_values: per row, each column's value as feature_values gives
  it, behind the shortest varint of its length; unpacked_values gives the
  columns back (of rows sliced anywhere), on both paths."""
  n, columns = case
  reference, fast = _both(messages.packed_values, columns, n)
  assert fast == reference
  values = [_both(messages.feature_values, c)[0] for c in columns]
  assert fast == [b"".join(wire.varint_bytes(len(v[row])) + v[row]
                           for v in values) for row in range(n)]
  packed = Ragged(np.frombuffer(b"".join(fast), np.uint8),
                  offsets_of(np.array([len(r) for r in fast], np.int64)))
  start = min(start, n)
  rows = Ragged(packed.buf, packed.offsets[start:])
  for which in ("0", "1"):
    with _path(which):
      got = messages.unpacked_values(rows, len(columns))
    assert [g.to_list() for g in got] == [v[start:] for v in values]


@pytest.mark.parametrize("which", ["0", "1"])
@pytest.mark.parametrize("rows, k, bad", [
    ([b"\x02ab"], 2, 0),              # one value short
    ([b"\x01a\x01b"], 1, 0),         # one value too many
    ([b"\x01a", b"\x03ab"], 1, 1),   # a length past its row's end
    ([b"\x01a", b"\x80"], 1, 1),     # a varint cut by its row's end
    ([b"\x01a", b""], 1, 1),          # an empty row
    ([b"\x01a\x05b", b"\x05a"], 2, 0),  # the first row's second value
])
def test_rows_that_are_not_packed_steps_are_refused(which, rows, k, bad):
  packed = Ragged(np.frombuffer(b"".join(rows), np.uint8),
                  offsets_of(np.array([len(r) for r in rows], np.int64)))
  with _path(which), pytest.raises(
      ValueError, match=f"packed row {bad} is not {k} length-prefixed"):
    messages.unpacked_values(packed, k)


@SETTINGS
@given(st.lists(st.binary(max_size=400), max_size=80))
def test_framing_is_the_same_bytes_both_ways(records):
  reference, fast = _both(tfrecord_files.frame_records, records)
  assert fast == reference == b"".join(map(tfrecord_files.frame_record,
                                           records))
  offsets = offsets_of(np.array([len(r) for r in records], dtype=np.int64))
  # A buffer that does not start at the first record.
  data = np.frombuffer(b"pad" + b"".join(records), np.uint8)
  assert _both(tfrecord_files.frame_buffer, data, offsets + 3) == [fast] * 2
  ends = _both(tfrecord_files.framed_ends, fast)
  assert [list(e) for e in ends] == [
      list(np.cumsum([len(r) + 16 for r in records]))] * 2


def test_typed_arrow_columns_sliced_anywhere():
  """Arrow arrays that start inside their buffers (a slice) encode the
  same both ways, as TensorFlow reads them."""
  ints = pa.array([[1, -2], None, [], [2**63 - 1]],
                  pa.large_list(pa.int64())).slice(1)
  texts = pa.array([["a"], ["é", ""], None, ["x" * 200]],
                   pa.large_list(pa.large_binary())).slice(1)
  floats = pa.array([[0.5], [1.5, -0.0], [], None],
                    pa.large_list(pa.float32())).slice(1)
  fields = []
  for name, kind, lists in (("i", FeatureType.INT64, ints),
                            ("s", FeatureType.BYTES, texts),
                            ("f", FeatureType.FLOAT, floats)):
    feature = Feature(name=name, type=kind)
    fields.append(messages.Field(name, messages.typed(feature, lists),
                                 lists.is_valid().to_numpy(
                                     zero_copy_only=False)))
  reference, fast = _both(messages.examples, wire.sorted_by_name(fields), 3)
  assert fast == reference
  rows = [example_pb2.Example.FromString(r).features.feature for r in fast]
  assert list(rows[0]["s"].bytes_list.value) == ["é".encode(), b""]
  assert "i" not in rows[0] and list(rows[1]["i"].int64_list.value) == []
  assert list(rows[2]["i"].int64_list.value) == [2**63 - 1]
  assert list(rows[0]["f"].float_list.value) == [1.5, -0.0]
  assert "f" not in rows[2] and "s" not in rows[1]


@pytest.mark.parametrize("offsets, message", [
    ([0, 5, 3], "before the one before it"),
    ([0, 2, 99], "past the end"),
    ([0, 1], "2 offsets for 2 rows"),
    ([-1, 1, 2], "before the one before it"),
])
def test_the_core_refuses_offsets_outside_its_buffers(offsets, message):
  """Offsets are checked before any row is read: a bad column is a
  ValueError naming the column, never a read outside a buffer."""
  column = ("ints".encode(), messages.INT64, np.array(offsets, np.int64),
            None, np.arange(4, dtype=np.int64), None)
  with pytest.raises(ValueError, match=message):
    NATIVE.encode(2, [(0x0A, [column])], False)


def test_the_core_refuses_bad_framing_input():
  with pytest.raises(ValueError, match="past the end"):
    NATIVE.frame(b"abc", np.array([0, 4], np.int64))
  framed = tfrecord_files.frame_record(b"abcdef")
  for which in ("0", "1"):
    with _path(which), pytest.raises(ValueError,
                                     match="in the middle of a record"):
      tfrecord_files.framed_ends(framed[:-1])


def test_the_log_line_names_the_path():
  with _path("1"):
    assert native.describe().startswith(
        "records encoded by the native core (beam_tfrecords_native ")
  with _path("0"):
    assert native.core() is None
    assert native.describe() == \
        "records encoded by the pure-Python path (BTR_NATIVE=0)"


@pytest.mark.parametrize("value, path", [
    ("0", None), ("off", None), ("False", None), ("no", None),
    ("", "native"), ("auto", "native"), ("1", "native"), ("on", "native")])
def test_the_environment_picks_the_path(monkeypatch, value, path):
  monkeypatch.setenv(native.ENV, value)
  assert (native.core() is not None) == (path == "native")


def test_a_core_of_another_contract_is_not_used(monkeypatch):
  """A stale build: the pure-Python path runs, and the line says why."""
  monkeypatch.setattr(NATIVE, "CONTRACT", native.CONTRACT + 1)
  native._load.cache_clear()  # pylint: disable=protected-access
  try:
    with _path(""):
      assert native.core() is None
      assert "speaks contract" in native.describe()
    with _path("1"), pytest.raises(ImportError, match="rebuild it"):
      native.core()
  finally:
    monkeypatch.undo()
    native._load.cache_clear()  # pylint: disable=protected-access


def test_a_ragged_is_a_sequence_of_records():
  records = [b"a", b"", b"xyz"]
  ragged = Ragged(np.frombuffer(b"".join(records), np.uint8),
                  offsets_of(np.array([1, 0, 3], np.int64)))
  assert list(ragged) == records and len(ragged) == 3
  assert [ragged[i] for i in (0, 1, 2, -1)] == records + [b"xyz"]
  with pytest.raises(IndexError):
    ragged[3]  # pylint: disable=pointless-statement
  assert tfrecord_files.frame_records(ragged) == \
      tfrecord_files.frame_records(records)

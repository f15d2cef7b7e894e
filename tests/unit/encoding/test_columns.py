"""Number text read by the native core gives what the reference gives:
the same values, the same rejected rows with the same reasons."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_tfrecords.core import native
from beam_tfrecords.encoding import columns as col
from beam_tfrecords.schema.model import Feature, FeatureType as F
from tests.helpers.native_paths import NATIVE

needs_core = pytest.mark.skipif(NATIVE is None,
                                reason="the native core is not built")
INT = Feature("x", F.INT64)
FLOAT = Feature("x", F.FLOAT)


def _convert(feature, array, path, monkeypatch):
  monkeypatch.setenv(native.ENV, "1" if path == "native" else "0")
  lists, errors = col.convert_column(feature, array, len(array))
  values = lists.flatten().to_numpy(zero_copy_only=False)
  if feature.type is F.FLOAT:
    values = values.view(np.uint32)  # -0.0 and nan compared bit for bit
  return (lists.is_valid().to_pylist(), lists.offsets.to_pylist(),
          values.tolist(), errors)


def _both(feature, array, monkeypatch):
  got = _convert(feature, array, "native", monkeypatch)
  assert got == _convert(feature, array, "reference", monkeypatch)
  return got


def _fast(feature, array, monkeypatch):
  """What the fast path of the core makes of `array`: the array, or None
  where the rules of the general path judge it."""
  monkeypatch.setenv(native.ENV, "1")
  return col._plain_numbers(feature.type, array)  # pylint: disable=protected-access


@needs_core
@pytest.mark.parametrize("text,expected", [
    (["0", "-0", "007", None, "-9223372036854775808", "9223372036854775807"],
     [0, 0, 7, None, -2**63, 2**63 - 1]),
])
def test_plain_integers_are_read_by_the_core(text, expected, monkeypatch):
  for kind in (pa.binary(), pa.string(), pa.large_string(), pa.large_binary()):
    array = pa.array([None if t is None else t.encode() for t in text], kind)
    assert _fast(INT, array, monkeypatch).to_pylist() == expected
    assert _both(INT, array, monkeypatch)[3] == {}


@needs_core
@pytest.mark.parametrize("text", [
    "9223372036854775808", "-9223372036854775809", "+4", " 4", "4.00", "4-",
    "-", "", "--4", "1e3", "0x10"])
def test_other_integer_text_goes_to_the_rules(text, monkeypatch):
  array = pa.array([b"1", text.encode()], pa.binary())
  assert _fast(INT, array, monkeypatch) is None
  _both(INT, array, monkeypatch)


@needs_core
def test_floats_are_rounded_through_float64(monkeypatch):
  # 16777217.000000001 is 16777217 in float64, a tie in float32 that
  # rounds to even (16777216); read as float32 at once, it is 16777218.
  text = ["16777217.000000001", "1.5", "+.5", "5.", "-2E+2", "1e-50",
          "-0.0", None, "0.1"]
  array = pa.array(text, pa.string())
  got = _fast(FLOAT, array, monkeypatch).to_numpy(zero_copy_only=False)
  expected = np.array([16777216.0, 1.5, 0.5, 5.0, -200.0, 0.0, -0.0,
                       np.nan, np.float32(0.1)], np.float32)
  np.testing.assert_array_equal(got, expected)
  assert np.signbit(got[6])
  _both(FLOAT, array, monkeypatch)


@needs_core
@pytest.mark.parametrize("text,reason", [
    ("3.4e39", "outside the float32 range"),
    ("1e309", "outside the float32 range"),
    ("nan", None), ("-Infinity", None), (" 2 ", None), ("1e", "could not"),
    (".", "could not"), ("1,5", "could not")])
def test_other_float_text_goes_to_the_rules(text, reason, monkeypatch):
  array = pa.array([b"1", text.encode()], pa.binary())
  assert _fast(FLOAT, array, monkeypatch) is None
  errors = _both(FLOAT, array, monkeypatch)[3]
  assert (reason is None and not errors) or reason in errors[1]


@needs_core
def test_missing_values_keep_their_place_in_slices(monkeypatch):
  """Bytes under a missing value are not read; a slice's offsets and
  validity bitmap start past 0 (bit 3 here, not a whole byte)."""
  whole = pa.array([b"1", None, b"x", b"-4", None, b"5", b"6"], pa.binary())
  valid = whole.buffers()[0]
  # The same values with "x" hidden behind a missing row.
  hidden = pa.Array.from_buffers(pa.binary(), 7, [
      pa.py_buffer(bytes([valid.to_pybytes()[0] & ~0b100])),
      whole.buffers()[1], whole.buffers()[2]])
  got = _fast(INT, hidden.slice(1), monkeypatch)
  assert got.to_pylist() == [None, None, -4, None, 5, 6]
  assert _fast(INT, whole.slice(3), monkeypatch).to_pylist() == [
      -4, None, 5, 6]
  assert _fast(INT, whole.slice(2), monkeypatch) is None
  _both(INT, hidden.slice(1), monkeypatch)
  _both(INT, whole.slice(2), monkeypatch)


@needs_core
def test_arrays_the_core_does_not_take_go_to_the_rules(monkeypatch):
  """Offsets not aligned to their size (a buffer read from a file at any
  byte), an empty array, and a dictionary's text: the same values as the
  reference, and the unaligned offsets never reach the core."""
  whole = pa.array([b"12", b"-3", None, b"4.5"], pa.binary())
  raw = b"\0" + whole.buffers()[1].to_pybytes()
  unaligned = pa.py_buffer(raw).slice(1)
  assert unaligned.address % 4
  shifted = pa.Array.from_buffers(pa.binary(), 3, [
      whole.buffers()[0], unaligned, whole.buffers()[2]])
  assert shifted.to_pylist() == [b"12", b"-3", None]
  assert _fast(INT, shifted, monkeypatch) is None
  assert _both(INT, shifted, monkeypatch)[2] == [12, -3]
  _both(FLOAT, whole, monkeypatch)
  for feature in (INT, FLOAT):
    assert _both(feature, pa.array([], pa.binary()), monkeypatch)[1] == [0]
    labels = pa.array(["7", "8", None, "7"]).dictionary_encode()
    assert _both(feature, labels, monkeypatch)[0] == [True, True, False,
                                                      True]


# Text near the edges of both rules: digits, signs, points, exponents,
# spaces, and numbers past int64 or float32.
_PIECES = st.sampled_from([
    "0", "1", "7", "9", "00", "-", "+", ".", "e", "E", " ", "5", "x",
    "9223372036854775807", "9223372036854775808", "16777217", "3.4e38",
    "e39", "000000000000000000001", "nan", "inf"])
_TEXT = st.one_of(st.none(), st.lists(_PIECES, max_size=5).map("".join))


@needs_core
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(_TEXT, min_size=1, max_size=12),
       kind=st.sampled_from([pa.binary(), pa.string(), pa.large_binary(),
                             pa.large_string()]),
       start=st.integers(0, 3), float_=st.booleans())
def test_core_and_reference_agree_on_random_text(text, kind, start, float_,
                                                 monkeypatch):
  array = pa.array([None if t is None else t.encode() for t in text],
                   kind).slice(min(start, len(text) - 1))
  feature = FLOAT if float_ else INT
  _both(feature, array, monkeypatch)
  fast = _fast(feature, array, monkeypatch)
  if fast is not None:  # what the core reads, the reference reads alike
    cells = col.convert_cells(feature, array.to_pylist())[0].to_pylist()
    expected = [None if v is None else [v] for v in fast.to_pylist()]
    assert str(cells) == str(expected)


_CELLS = st.one_of(st.none(), st.lists(st.integers(-3, 3), max_size=3))


@settings(max_examples=200, deadline=None)
@given(cells=st.lists(_CELLS, min_size=1, max_size=12),
       start=st.integers(0, 3), float_=st.booleans(),
       default=st.lists(st.integers(-2, 2), min_size=1, max_size=3),
       backed=st.booleans())
def test_defaults_of_numbers_fill_as_arrow_fills_them(cells, start, float_,
                                                      default, backed):
  """apply_missing's numpy fill of int64 and float lists (the common
  case) gives Arrow's fill_null's lists, value for value, on sliced
  arrays and on null rows backed by values of their own."""
  kind = pa.float32() if float_ else pa.int64()
  feature = Feature(name="x", type=F.FLOAT if float_ else F.INT64,
                    source="x", default=tuple(
                        float(d) if float_ else d for d in default))
  lists = pa.array(cells, pa.large_list(kind))
  if backed:  # the null rows hold values the list's offsets still cover
    values = pa.array([9] * 2 + [v for c in cells for v in (c or [])],
                      kind)
    offsets = [0] + list(np.cumsum([len(c or []) for c in cells]) + 2)
    offsets[0] = 0
    lists = pa.LargeListArray.from_arrays(
        pa.array(offsets, pa.int64()), values,
        mask=pa.array([c is None for c in cells]))
  lists = lists.slice(min(start, len(cells) - 1))
  got = col.apply_missing(feature, lists, {})
  expected = pa.compute.fill_null(lists, pa.scalar(
      list(feature.default), type=pa.large_list(kind)))
  assert got.type == expected.type
  assert got.null_count == 0
  assert got.to_pylist() == expected.to_pylist()

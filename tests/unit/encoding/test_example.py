"""The encoder: bytes equal protobuf's, the Arrow and reference paths agree."""

import datetime
import math
import pickle

import numpy as np
import pyarrow as pa
import pytest

from beam_tfrecords.encoding import ExampleEncoder
from beam_tfrecords.encoding import columns as col
from beam_tfrecords.schema import schema_from_dict
from beam_tfrecords.schema.model import Feature, FeatureType
from tests.helpers.native_paths import both_paths

# Every test on the reference and on the native core (which reads plain
# number text itself: encoding.columns._native_numbers).
path = both_paths("arrow")


def _proto_example(tf, features):
  """The reference: a tf.train.Example built with protobuf, keys sorted."""
  ex = tf.train.Example()
  for name, (kind, values) in features.items():
    getattr(ex.features.feature[name], kind).value.extend(values)
  return ex


def _canonical(tf, ex):
  # Our encoder writes keys in bytewise order; protobuf's deterministic
  # order differs for keys that prefix each other, so compare via sorted
  # re-serialization of each feature.
  return {k: ex.features.feature[k].SerializeToString()
          for k in ex.features.feature}


def test_bytes_equal_protobuf_serialization(tf):
  schema = schema_from_dict({"name": "t", "features": {
      "i": {"type": "int64", "shape": [-1]},
      "f": {"type": "float", "shape": [-1]},
      "s": {"type": "string", "shape": [-1]},
      "b": {"type": "bytes"},
  }})
  rows = [
      {"i": [0, -1, 2**63 - 1, -2**63, 127, 128, 300], "f": [0.1, -0.0, 1e-45],
       "s": ["", "é", "x" * 200], "b": b"\x00\xff"},
      {"i": [], "f": [], "s": [], "b": b""},
      {"i": None, "f": None, "s": None, "b": None},
  ]
  result = ExampleEncoder(schema).encode_rows(rows)
  assert result.errors == []
  got = result.record_list()
  expected = [
      _proto_example(tf, {"b": ("bytes_list", [b"\x00\xff"]),
                          "f": ("float_list", [0.1, -0.0, 1e-45]),
                          "i": ("int64_list", rows[0]["i"]),
                          "s": ("bytes_list", [b"", "é".encode(), b"x" * 200])}),
      _proto_example(tf, {"b": ("bytes_list", [b""]), "f": ("float_list", []),
                          "i": ("int64_list", []), "s": ("bytes_list", [])}),
      tf.train.Example(features=tf.train.Features()),
  ]
  for g, e in zip(got, expected):
    # No key prefixes another here, so protobuf's order is bytewise too.
    assert g == e.SerializeToString(deterministic=True)
  assert len(got) == 3


def test_keys_sorted_bytewise_and_output_deterministic(tf):
  names = ["b", "a b", "a", "Z", "é", "a_1"]
  schema = schema_from_dict({"name": "t", "features": {
      n: {"type": "int64"} for n in names}})
  batch = pa.RecordBatch.from_pydict({n: [i] for i, n in enumerate(names)})
  rec = ExampleEncoder(schema).encode(batch).record_list()[0]
  parsed = tf.train.Example.FromString(rec)
  assert _canonical(tf, parsed) == _canonical(tf, _proto_example(
      tf, {n: ("int64_list", [i]) for i, n in enumerate(names)}))
  from beam_tfrecords.core.tfrecord_files import decode_example
  assert list(decode_example(rec)) == sorted(names, key=lambda n: n.encode())
  assert ExampleEncoder(schema).encode(batch).record_list()[0] == rec


MISSING_SCHEMA = {"name": "t", "features": {
    "opt": {"type": "float"},
    "dflt": {"type": "int64", "default": 7},
    "req": {"type": "string", "required": True},
    "lst": {"type": "int64", "shape": [-1], "separator": ","},
}}


def test_missing_is_not_falsy():
  enc = ExampleEncoder(MISSING_SCHEMA)
  batch = pa.RecordBatch.from_pydict({
      "opt": pa.array([0.0, None, None], pa.float64()),
      "dflt": pa.array([0, None, 0], pa.int64()),
      "req": pa.array(["", "x", None]),
      "lst": pa.array(["", None, "0"]),
  })
  result = enc.encode(batch)
  from beam_tfrecords.core.tfrecord_files import decode_example
  got = [decode_example(r) for r in result.record_list()]
  assert got[0] == {"dflt": ("int64_list", [0]), "lst": ("int64_list", []),
                    "opt": ("float_list", [0.0]), "req": ("bytes_list", [b""])}
  assert got[1] == {"dflt": ("int64_list", [7]), "req": ("bytes_list", [b"x"])}
  assert [e.row for e in result.errors] == [2]
  assert result.errors[0].problems == (
      ("req", 'required value is missing (column "req" has no value)'),)


# (name, feature, input column, expected lists or error reason per row)
F = FeatureType
PATH_CASES = [
    ("int_text", Feature("x", F.INT64), pa.array(["1", " -2 ", "+3", None]),
     [[1], [-2], [3], None]),
    ("int_text_bad", Feature("x", F.INT64), pa.array(["1", "0x10", "1,234"]),
     [[1], "could not parse '0x10' as int64",
      "could not parse '1,234' as int64 (thousands separators are not "
      "accepted; remove them, or for a decimal comma write 1.234)"]),
    ("int_overflow_text", Feature("x", F.INT64),
     pa.array(["9223372036854775807", "9223372036854775808"]),
     [[2**63 - 1], "9223372036854775808 is outside the int64 range"]),
    ("int_from_uint64", Feature("x", F.INT64),
     pa.array([1, 2**64 - 1], pa.uint64()),
     [[1], "18446744073709551615 is outside the int64 range"]),
    ("int_from_float", Feature("x", F.INT64), pa.array([3.0, 2.5, math.nan]),
     [[3], "2.5 is not a whole number", "nan is not a whole number"]),
    ("int_from_bool", Feature("x", F.INT64), pa.array([True, False]),
     [[1], [0]]),
    ("float_text", Feature("x", F.FLOAT),
     pa.array(["1.5", "nan", "-inf", "-0.0", "1e39", "9,7", ".5"]),
     [[1.5], [math.nan], [-math.inf], [-0.0],
      "'1e39' is outside the float32 range", "could not parse '9,7' as float",
      [0.5]]),
    ("float_binary_text_some_bad", Feature("x", F.FLOAT),
     pa.array([b"1.5", b"x", None, b" 2 ", b"1e39"], pa.binary()),
     [[1.5], "could not parse 'x' as float", None, [2.0],
      "'1e39' is outside the float32 range"]),
    ("int_binary_text_some_bad", Feature("x", F.INT64),
     pa.array([b"7", b"7.5", b"-3", b"\xff"], pa.binary()),
     [[7], "7.5 is not a whole number", [-3],
      "could not parse b'\\xff' as int64"]),
    ("float_from_int", Feature("x", F.FLOAT), pa.array([1, 16777217]),
     [[1.0], [16777216.0]]),
    ("string_from_binary", Feature("x", F.STRING),
     pa.array([b"ok", b"\xff"], pa.binary()),
     [[b"ok"], "is not valid UTF-8 (byte 0)"]),
    ("bytes_from_binary", Feature("x", F.BYTES),
     pa.array([b"\xff", b""], pa.binary()), [[b"\xff"], [b""]]),
    ("string_from_int", Feature("x", F.STRING), pa.array([7, None]),
     [[b"7"], None]),
    ("list_split", Feature("x", F.FLOAT, (-1,), separator="|"),
     pa.array(["1|2.5", "", None, "3| 4"]), [[1.0, 2.5], [], None, [3.0, 4.0]]),
    ("list_json_cell", Feature("x", F.INT64, (-1,)),
     pa.array(["[1, 2]", "3", ""]), [[1, 2], [3], []]),
    ("list_arrow", Feature("x", F.INT64, (-1,)),
     pa.array([[1, 2], [], None, [3]]), [[1, 2], [], None, [3]]),
    ("list_null_item", Feature("x", F.INT64, (-1,)),
     pa.array([[1, None]]), ["the list has a null at position 1"]),
    ("fixed_len", Feature("x", F.INT64, (2,)),
     pa.array([[1, 2], [1]]), [[1, 2], "expected 2 values (shape [2]), got 1"]),
    ("fixed_2d", Feature("x", F.FLOAT, (2, 2)),
     pa.array([[[1, 2], [3, 4]]]), [[1.0, 2.0, 3.0, 4.0]]),
    ("scalar_given_list", Feature("x", F.INT64), pa.array([[1]]),
     ["expected one value (shape []), got a list of 1"]),
    ("dictionary", Feature("x", F.STRING),
     pa.array(["a", "b", "a"]).dictionary_encode(), [[b"a"], [b"b"], [b"a"]]),
    ("all_null", Feature("x", F.FLOAT), pa.nulls(2), [None, None]),
    ("string_from_date", Feature("x", F.STRING),
     pa.array([datetime.date(2026, 11, 5), None, datetime.date(1, 1, 1)]),
     [[b"2026-11-05"], None, [b"0001-01-01"]]),
    ("string_from_timestamp", Feature("x", F.STRING),
     pa.array([datetime.datetime(2026, 11, 5, 10, 30)]),
     ["expected text, got datetime"]),
]


def test_dates_beyond_python_range_are_iso_text_on_both_paths():
  """Python's date stops at year 9999; Arrow's ISO text is used instead,
  also when another cell sends the column down the reference path."""
  scalar = pa.array([-800000, 0], pa.date32())
  lists = pa.array([[-800000], [None], [0]], pa.large_list(pa.date32()))
  fast, errors = col.convert_column(Feature("x", F.STRING), scalar, 2)
  assert fast.to_pylist() == [[b"-0221-09-04"], [b"1970-01-01"]]
  assert errors == {}
  ref, errors = col.convert_column(Feature("x", F.STRING, (-1,)), lists, 3)
  assert ref.to_pylist() == [[b"-0221-09-04"], None, [b"1970-01-01"]]
  assert errors == {1: "the list has a null at position 0"}


def _expected_lists(expected):
  return [e if not isinstance(e, str) else None for e in expected]


@pytest.mark.parametrize("feature,array,expected",
                         [c[1:] for c in PATH_CASES],
                         ids=[c[0] for c in PATH_CASES])
def test_arrow_path_equals_reference_path(feature, array, expected):
  fast, fast_errors = col.convert_column(feature, array, len(array))
  ref, ref_errors = col.convert_cells(feature, array.to_pylist())
  assert fast.equals(ref) or fast.to_pylist() == ref.to_pylist() or (
      str(fast.to_pylist()) == str(ref.to_pylist()))  # nan != nan
  assert fast_errors == ref_errors
  got = fast.to_pylist()
  for row, exp in enumerate(expected):
    if isinstance(exp, str):
      assert exp in fast_errors[row]
    elif exp is None:
      assert got[row] is None and row not in fast_errors
    else:
      expected_values = np.array(exp, dtype=np.float32) \
          if feature.type is F.FLOAT else exp
      if feature.type is F.FLOAT:
        np.testing.assert_array_equal(np.array(got[row], np.float32),
                                      expected_values)
      else:
        assert got[row] == exp


def test_encoder_pickles_as_its_schema():
  enc = ExampleEncoder(MISSING_SCHEMA)
  again = pickle.loads(pickle.dumps(enc))
  assert again.schema == enc.schema
  rows = [{"opt": 1.5, "req": "r", "lst": [1, 2]}]
  assert again.encode_rows(rows).record_list() == \
      enc.encode_rows(rows).record_list()


def test_batch_and_rows_give_identical_bytes():
  rows = [{"opt": 0.25, "dflt": None, "req": "a", "lst": "1,2,3"},
          {"opt": None, "dflt": -5, "req": "", "lst": None}]
  enc = ExampleEncoder(MISSING_SCHEMA)
  batch = pa.RecordBatch.from_pylist(rows)
  assert enc.encode(batch).record_list() == enc.encode_rows(rows).record_list()

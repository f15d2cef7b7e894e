"""beam_tfrecords/schema/values.py, on values: The value rules: how one input
value becomes the values of a feature."""

import decimal
import math

import pyarrow as pa
import pytest

from beam_tfrecords.encoding import columns as col
from beam_tfrecords.schema.model import Feature, FeatureType
from beam_tfrecords.schema.values import convert_cell

from tests.helpers.cli_builds import NOT_WHOLE


@pytest.mark.parametrize("text,value", [
    ("1.0", 1), ("2.000", 2), ("-3.0", -3), ("+4.00", 4), ("1e3", 1000),
    ("9223372036854775807.0", 2**63 - 1), ("-0.0", 0),
    ("0e9223372036854775807", 0), ("-0.0e-9223372036854775807", 0)],
    ids=["one", "zeros", "negative", "plus", "exponent", "max", "minus_zero",
         "zero_past_decimal", "minus_zero_past_decimal"])
def test_whole_decimal_text_is_an_int64(text, value):
  from beam_tfrecords.schema.values import _to_int64
  assert _to_int64(text) == value


@pytest.mark.parametrize("text,reason", [
    ("1.5", "1.5 is not a whole number"),
    ("9223372036854775808.0", "9223372036854775808 is outside the int64 "
     "range"),
    ("1e30", "'1e30' is outside the int64 range"),
    ("nan", "could not parse 'nan' as int64"),
    ("1,0", "could not parse '1,0' as int64 (a decimal comma?"),
    # Exponents past what Decimal reads (10**18; Hypothesis found these).
    ("5e9223372036854775807", "'5e9223372036854775807' is outside the int64"),
    ("1e-9223372036854775807", "'1e-9223372036854775807' is not a whole")],
    ids=["fraction", "too_big", "huge_exponent", "nan", "comma",
         "past_decimal", "tiny_past_decimal"])
def test_other_number_text_is_refused_for_int64(text, reason):
  from beam_tfrecords.schema.values import _to_int64
  with pytest.raises(ValueError) as e:
    _to_int64(text)
  assert str(e.value).startswith(reason), str(e.value)


RANGE = "is outside the int64 range [-9223372036854775808, 9223372036854775807]"
SCALAR = Feature("n", FeatureType.INT64)
LIST = Feature("ns", FeatureType.INT64, shape=(-1,), separator="|")


# --- One value, one meaning across formats ---------------------------------

def _both_paths(feature, cells):
  """(lists, errors) from the vectorized path over a CSV-like column of
  bytes and over a JSON-like column of str: they must agree."""
  as_csv = col.convert_column(
      feature, pa.array([c.encode() for c in cells], pa.binary()), len(cells))
  as_json = col.convert_column(feature, pa.array(cells, pa.string()),
                               len(cells))
  assert (as_csv[0].to_pylist(), as_csv[1]) == (as_json[0].to_pylist(),
                                                as_json[1])
  return as_csv[0].to_pylist(), as_csv[1]


@pytest.mark.parametrize("text,value", [
    ("1.0", 1), ("2.000", 2), ("-3.0", -3), ("+4.00", 4), (" 7.0 ", 7),
    ("1.", 1), ("-0.0", 0), ("0e30", 0), ("1e3", 1000),
    ("9223372036854775807.0", 2**63 - 1),
    ("-9223372036854775808.000", -2**63),
], ids=["one", "zeros", "negative", "plus", "spaces", "trailing_dot",
        "minus_zero", "zero_exponent", "exponent", "max", "min"])
def test_whole_decimal_text_is_an_exact_int64(text, value):
  assert convert_cell(SCALAR, text) == [value]
  # Alone, and among integer text (the fast path's batches).
  assert _both_paths(SCALAR, [text]) == ([[value]], {})
  assert _both_paths(SCALAR, ["5", text]) == ([[5], [value]], {})
  assert _both_paths(LIST, [f"{text}|{text}"]) == ([[value, value]], {})


@pytest.mark.parametrize("text,reason", [
    ("1.5", f"1.5 {NOT_WHOLE}"),
    ("-2.50", f"-2.5 {NOT_WHOLE}"),
    (" 1.5e0", f"1.5 {NOT_WHOLE}"),
    # A float would round it to 1.0: the text is shown as it is.
    ("1.00000000000000001", f"1.00000000000000001 {NOT_WHOLE}"),
    ("9223372036854775808.0", f"9223372036854775808 {RANGE}"),
    ("-9223372036854775809.0", f"-9223372036854775809 {RANGE}"),
    ("1e30", f"'1e30' {RANGE}"),
], ids=["fraction", "negative_fraction", "exponent_fraction", "tiny_fraction",
        "max_plus_one", "min_minus_one", "huge_exponent"])
def test_other_decimal_text_is_refused_with_its_reason(text, reason):
  with pytest.raises(ValueError) as e:
    convert_cell(SCALAR, text)
  assert str(e.value) == reason
  assert _both_paths(SCALAR, ["5", text]) == ([[5], None], {1: reason})


@pytest.mark.parametrize("cell,result", [
    ("[1.0, 2.000, -3.0]", [1, 2, -3]),
    ("[9223372036854775807.0]", [2**63 - 1]),
    ("[9223372036854775808.0]", f"at position 0: 9223372036854775808 {RANGE}"),
    ("[1.00000000000000001]", f"at position 0: 1.00000000000000001 "
     f"{NOT_WHOLE}"),
    ("[2, 1.5]", f"at position 1: 1.5 {NOT_WHOLE}"),
], ids=["whole", "max", "max_plus_one", "tiny_fraction", "fraction"])
def test_a_json_list_in_a_text_cell_is_read_exactly(cell, result):
  _converts(Feature("ns", FeatureType.INT64, shape=(-1,)), cell, result)


def _converts(feature, cell, result):
  """The cell's values (a list), or the ValueError's message (a str)."""
  if isinstance(result, list):
    assert convert_cell(feature, cell) == result
  else:
    with pytest.raises(ValueError) as e:
      convert_cell(feature, cell)
    assert str(e.value) == result


@pytest.mark.parametrize("value,result", [
    (decimal.Decimal("3.000"), [3]),
    (decimal.Decimal("1.5"), f"1.5 {NOT_WHOLE}"),
    (decimal.Decimal("1E+30"), f"'1E+30' {RANGE}"),
], ids=["whole", "fraction", "huge"])
def test_a_parquet_decimal_reads_as_its_number(value, result):
  if isinstance(result, list):
    assert convert_cell(SCALAR, value) == result
  else:
    with pytest.raises(ValueError) as e:
      convert_cell(SCALAR, value)
    assert str(e.value) == result


# --- Floats past float32: one rule -----------------------------------------

FLOAT = Feature("x", FeatureType.FLOAT)
FLOATS = Feature("xs", FeatureType.FLOAT, shape=(-1,), separator="|")
INF = ("is outside the float32 range (+-3.402823e+38); it would be stored "
       "as inf")


# (case, input value, how the reason shows it): a value not written as inf
# that float32 would store as inf, whether float64 holds it or not.
@pytest.mark.parametrize("value,shown", [
    ("3.4e39", "'3.4e39'"),
    ("1e309", "'1e309'"),
    ("-1e309", "'-1e309'"),
    (" 1E+400 ", "' 1E+400 '"),
    (b"1e309", "'1e309'"),
    ("1" + "0" * 400 + ".0", "'1" + "0" * 58 + "...'"),
    (3.4e39, "3.4e+39"),
    (10**39, str(10**39)),
    (10**400, "1" + "0" * 59 + "...'"),
    (decimal.Decimal("1e309"), "1E+309"),
], ids=["text_past_float32", "text_past_float64", "negative_past_float64",
        "spaces_and_sign", "bytes", "digits_past_float64",
        "float_past_float32", "int_past_float32", "int_past_float64",
        "decimal_past_float64"])
def test_a_float_that_would_become_inf_is_refused_with_one_reason(value,
                                                                  shown):
  with pytest.raises(ValueError) as e:
    convert_cell(FLOAT, value)
  assert str(e.value) == f"{shown} {INF}"


@pytest.mark.parametrize("text,reason", [
    ("3.4e39", f"'3.4e39' {INF}"),
    ("1e309", f"'1e309' {INF}"),
    ("-1e309", f"'-1e309' {INF}"),
], ids=["past_float32", "past_float64", "negative_past_float64"])
def test_both_paths_refuse_a_float_that_would_become_inf(text, reason):
  assert _both_paths(FLOAT, ["1.5", text]) == ([[1.5], None], {1: reason})
  assert _both_paths(FLOATS, [f"1.5|{text}"]) == (
      [None], {0: f"at position 1: {reason}"})


@pytest.mark.parametrize("value,stored", [
    ("inf", math.inf), ("-Infinity", -math.inf), (" +INF ", math.inf),
    (b"-inf", -math.inf), (math.inf, math.inf),
    (decimal.Decimal("-Infinity"), -math.inf),
    # Past float32's largest value by less than half a step: rounds to it.
    ("3.4028235e38", 3.4028235e38),
], ids=["inf", "negative_infinity", "upper_case", "bytes", "float",
        "decimal", "rounds_to_max"])
def test_inf_written_as_inf_is_stored_as_inf(value, stored):
  assert convert_cell(FLOAT, value) == [stored]
  if isinstance(value, str):
    (got,), errors = _both_paths(FLOAT, [value])
    assert errors == {} and got[0] == pytest.approx(stored, rel=1e-7)


@pytest.mark.parametrize("cell,result", [
    ("[1.5, 1e309]", f"at position 1: 1E+309 {INF}"),
    ("[1.5, 3.4e39]", f"at position 1: 3.4e+39 {INF}"),
    ("[1.5, Infinity]", [1.5, math.inf]),
], ids=["past_float64", "past_float32", "infinity"])
def test_a_json_list_of_floats_in_a_text_cell_follows_the_rule(cell, result):
  _converts(Feature("xs", FeatureType.FLOAT, shape=(-1,)), cell, result)


def test_a_json_list_too_deep_to_parse_is_refused_with_a_reason():
  feature = Feature("xs", FeatureType.FLOAT, shape=(-1,))
  with pytest.raises(ValueError) as e:
    convert_cell(feature, "[" * 10_000 + "]" * 10_000)
  assert str(e.value) == (
      "'" + "[" * 59 + "...' is a JSON list nested too deep to read; a "
      "feature of shape [-1] takes 1 level(s)")

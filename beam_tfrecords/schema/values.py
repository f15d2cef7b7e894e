"""The value rules: how one input value becomes the values of a feature.

These functions are the reference semantics of the schema language. The
vectorized Arrow path in `beam_tfrecords.encoding` must give the same result
for every input (tests/unit/encoding/test_example.py::test_arrow_path_equals_reference_path
and tests/unit/encoding/test_example_properties.py check it); where it cannot
decide, it falls back to these functions.

| feature type | accepted input                      | stored as        | rejected (reason)                       |
|--------------|-------------------------------------|------------------|-----------------------------------------|
| int64        | int, bool (0/1), whole float,       | int64_list       | fractions (2.5, "2.5"), "1,234" /       |
|              | text of a whole number: "[+-]digits"|                  | "1 234", hex, nan, inf, outside         |
|              | and "1.0", "2.000", "1e3" (spaces   |                  | [-2**63, 2**63-1]                       |
|              | trimmed; pandas writes int columns  |                  |                                         |
|              | with nulls as "1.0")                |                  |                                         |
| float        | int, float, text number, nan, inf   | float_list (f32) | "9,7", a value not written as inf that  |
|              | written as such ("inf", "-Infinity",|                  | would be stored as inf: beyond +-3.4e38 |
|              | an Arrow or JSON infinity)          |                  | ("3.4e39", "1e309", 10**400)            |
| string       | text, int (decimal text), UTF-8     | bytes_list       | bytes that are not UTF-8, floats,       |
|              | bytes, date (ISO text 2026-11-05)   |                  | timestamps                              |
| bytes        | bytes, text (stored as UTF-8)       | bytes_list       | numbers                                 |

Missing is not falsy: 0, 0.0, "" and [] are values; only None (SQL/JSON
null, an absent JSON key, an unquoted empty CSV cell) is missing.
"""

import datetime
import decimal
import json
import math
import re
from typing import Any, List, Optional, Sequence, Union

from beam_tfrecords.schema.model import Feature, FeatureType

__all__ = ["INT64_MIN", "INT64_MAX", "FLOAT32_MAX", "INT_TEXT", "FLOAT_TEXT",
           "SPECIAL_FLOAT_TEXT", "ZERO_FRACTION", "PLUS_SIGN", "DIGITS_TEXT",
           "convert_value", "convert_cell", "json_float", "parse_json"]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# The largest finite float32; larger finite values would round to inf.
FLOAT32_MAX = 3.4028234663852886e38
# Text accepted as a number, after trimming white space. RE2 and Python `re`
# read these the same way, so the Arrow path uses them too.
# Integers, and whole numbers with a zero fraction ("1.0": pandas writes an
# integer column with nulls so); the fast path drops PLUS_SIGN and
# ZERO_FRACTION first (Arrow's cast to int64 takes neither).
INT_TEXT = r"^[+-]?[0-9]+(\.0*)?$"
ZERO_FRACTION = r"\.0*$"
PLUS_SIGN = r"^\+"
# Integers only (infer-schema: "1.0" suggests a float column).
DIGITS_TEXT = r"^[+-]?[0-9]+$"
FLOAT_TEXT = (r"^[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
              r"|[nN][aA][nN]|[iI][nN][fF]([iI][nN][iI][tT][yY])?)$")
# Float text that says nan or inf itself: the only text stored as inf
# ("1e309" parses as inf too, but is refused as "3.4e39" is).
SPECIAL_FLOAT_TEXT = (r"^[+-]?([nN][aA][nN]"
                      r"|[iI][nN][fF]([iI][nN][iI][tT][yY])?)$")
_INT_RE = re.compile(INT_TEXT)
_FLOAT_RE = re.compile(FLOAT_TEXT)
_SPECIAL_FLOAT_RE = re.compile(SPECIAL_FLOAT_TEXT)
_THOUSANDS_RE = re.compile(r"^[+-]?[0-9]{1,3}([, ][0-9]{3})+([.,][0-9]+)?$")
_DECIMAL_COMMA_RE = re.compile(r"^[+-]?[0-9]+,[0-9]+$")
_ONE_COMMA_RE = re.compile(r"^[+-]?[0-9]{1,3},[0-9]{3}$")


def _show(value: Any, limit: int = 60) -> str:
  if isinstance(value, bytes):  # CSV cells arrive as bytes; show them as text
    try:
      value = value.decode("utf-8")
    except UnicodeDecodeError:
      pass
  # A Parquet decimal (or a JSON list's number) reads as the number it is.
  text = str(value) if isinstance(value, decimal.Decimal) else repr(value)
  return text if len(text) <= limit else text[:limit] + "...'"


def _number_hint(text: str) -> str:
  if _THOUSANDS_RE.match(text):  # "1,000", "1 000", "1,234.5"
    if _ONE_COMMA_RE.match(text):  # "1,234": thousands, or a decimal comma?
      return (" (thousands separators are not accepted; remove them, or "
              f"for a decimal comma write {text.replace(',', '.')})")
    return " (thousands separators are not accepted; remove them)"
  if _DECIMAL_COMMA_RE.match(text):  # "9,7"
    return " (a decimal comma? write 9.7, not 9,7)"
  return ""


def _float32_overflows(value: float, written_inf: bool) -> bool:
  """Whether a value would be stored as inf though its input does not
  say inf: one rule for a finite float past float32 ("3.4e39") and for
  text or a number that Python already reads as inf ("1e309", 10**400)."""
  if math.isinf(value):
    return not written_inf
  # Values in (FLOAT32_MAX, FLOAT32_MAX + half an ulp) still round to
  # FLOAT32_MAX, exactly as numpy's and Arrow's float64 -> float32 casts do.
  return math.isfinite(value) and abs(value) >= 3.4028235677973366e38


def _number_text(value: Any, pattern: Any, type_name: str) -> str:
  """The trimmed text of a number cell, or a ValueError saying why not."""
  text = value.decode("utf-8", "replace") if isinstance(value, bytes) \
      else value
  text = text.strip()
  if not pattern.match(text):
    raise ValueError(f"could not parse {_show(value)} as {type_name}"
                     f"{_number_hint(text)}")
  return text


_NOT_WHOLE = ("is not a whole number; int64 features take integers (use "
              "type: float for fractions)")


def _shown_number(number: decimal.Decimal, text: str) -> str:
  """A decimal as the float path shows it ("2.50" -> 2.5), so one value
  gets one reason in every format; its text where a float would not show
  it exactly ("1.00000000000000001")."""
  if number.is_finite():
    shown = repr(float(number))
    if decimal.Decimal(shown) == number:
      return shown
  return text if len(text) <= 60 else text[:60] + "..."


def _decimal_int64(number: decimal.Decimal, text: str) -> int:
  """An exact decimal as an int64 value (no float rounding)."""
  # adjusted() is the exponent of the leading digit: beyond 19 the value
  # is outside the range, and int() of it could be huge (1e999999999).
  # A zero or a value under 1 is decided before to_integral_value(),
  # which refuses exponents past the context's ("0e99999999999").
  if number.is_finite() and number and number.adjusted() > 19:
    raise ValueError(f"{_show(text)} is outside the int64 range "
                     f"[{INT64_MIN}, {INT64_MAX}]")
  if number.is_zero():
    return 0
  if (not number.is_finite() or number.adjusted() < 0
      or number != number.to_integral_value()):
    raise ValueError(f"{_shown_number(number, text)} {_NOT_WHOLE}")
  return int(number)


def _huge_exponent_int64(text: str) -> int:
  """Float text whose exponent Decimal cannot hold: zero, or too large,
  or under 1."""
  mantissa, exponent = re.split("[eE]", text)
  if not mantissa.strip("+-.0"):
    return 0
  if not exponent.startswith("-"):
    raise ValueError(f"{_show(text)} is outside the int64 range "
                     f"[{INT64_MIN}, {INT64_MAX}]")
  raise ValueError(f"{_show(text)} {_NOT_WHOLE}")


def _text_int64(value: Any) -> int:
  """A whole number written as text ("12", "1.0", "1e3"), exactly."""
  text = value.decode("utf-8", "replace") if isinstance(value, bytes) \
      else value
  text = text.strip()
  if _INT_RE.match(text):
    digits = text.split(".")[0]
    if len(digits.lstrip("+-").lstrip("0")) > 19:  # no int() of huge text
      raise ValueError(f"{_show(text)} is outside the int64 range "
                       f"[{INT64_MIN}, {INT64_MAX}]")
    return int(digits)
  if _FLOAT_RE.match(text) and text.lstrip("+-")[:1] in "0123456789.":
    try:
      number = decimal.Decimal(text)
    except decimal.InvalidOperation:  # an exponent past 10**18
      return _huge_exponent_int64(text)
    return _decimal_int64(number, text)
  raise ValueError(f"could not parse {_show(value)} as int64"
                   f"{_number_hint(text)}")


def _to_int64(value: Any) -> int:
  if isinstance(value, bool):
    return int(value)
  if isinstance(value, int):
    result = value
  elif isinstance(value, float):
    if not math.isfinite(value) or value != int(value):
      raise ValueError(f"{_show(value)} {_NOT_WHOLE}")
    result = int(value)
  elif isinstance(value, decimal.Decimal):
    result = _decimal_int64(value, str(value))
  elif isinstance(value, (str, bytes)):
    result = _text_int64(value)
  else:
    raise ValueError(f"expected an integer, got {type(value).__name__} "
                     f"{_show(value)}")
  if not INT64_MIN <= result <= INT64_MAX:
    raise ValueError(f"{_show(result)} is outside the int64 range "
                     f"[{INT64_MIN}, {INT64_MAX}]")
  return result


def _to_float(value: Any) -> float:
  # written_inf: the input itself says inf (a float that is inf, Arrow's
  # or JSON's Infinity; Decimal("Infinity"); the text "inf").
  if isinstance(value, (bool, int)):
    written_inf = False
    try:
      result = float(value)
    except OverflowError:  # 10**400
      result = math.inf
  elif isinstance(value, float):
    result, written_inf = value, True
  elif isinstance(value, decimal.Decimal):
    # (JSON numbers past float64, "1e309", arrive as exact decimals.)
    result, written_inf = float(value), not value.is_finite()
  elif isinstance(value, (str, bytes)):
    text = _number_text(value, _FLOAT_RE, "float")
    result = float(text)
    written_inf = bool(_SPECIAL_FLOAT_RE.match(text))
  else:
    raise ValueError(f"expected a number, got {type(value).__name__} "
                     f"{_show(value)}")
  if _float32_overflows(result, written_inf):
    raise ValueError(f"{_show(value)} is outside the float32 range "
                     f"(+-{FLOAT32_MAX:.7g}); it would be stored as inf")
  return result


def json_float(text: str) -> Any:
  """A JSON number with a fraction or exponent, as json.loads's
  `parse_float` gives it: a float, or the exact Decimal where float64
  reads it as inf ("1e309"), so that the float rule refuses it as it
  refuses "3.4e39" instead of storing an inf the input never wrote."""
  value = float(text)
  return decimal.Decimal(text) if math.isinf(value) else value


# JSON text that may hold a number float64 reads as inf: an exponent of
# 100 or more, or 309 digits in a row. Only such text is parsed with
# json_float, a Python call per number; the rest with json's own parser.
_MAY_OVERFLOW = r"[eE]\+?0*[1-9][0-9]{2}|[0-9]{309}"
_MAY_OVERFLOW_TEXT = re.compile(_MAY_OVERFLOW)
_MAY_OVERFLOW_BYTES = re.compile(_MAY_OVERFLOW.encode("ascii"))


def parse_json(text: Union[str, bytes]) -> Any:
  """json.loads, but a number past float64 ("1e309") is its exact Decimal
  (json_float), not inf.

  Raises:
    ValueError: not JSON (UnicodeDecodeError: bytes that are not UTF-8).
    RecursionError: nested deeper than Python's recursion limit.
  """
  if isinstance(text, bytes):
    may_overflow = bool(_MAY_OVERFLOW_BYTES.search(text))
  else:
    may_overflow = bool(_MAY_OVERFLOW_TEXT.search(text))
  if may_overflow:
    return json.loads(text, parse_float=json_float)
  return json.loads(text)


def _to_string(value: Any) -> bytes:
  if isinstance(value, str):
    try:
      return value.encode("utf-8")
    except UnicodeEncodeError as e:
      raise ValueError(f"{_show(value)} is not valid Unicode text ({e.reason})")
  if isinstance(value, bytes):
    try:
      value.decode("utf-8")
    except UnicodeDecodeError as e:
      raise ValueError(f"{_show(value)} is not valid UTF-8 (byte {e.start}); "
                       "use type: bytes for binary data")
    return value
  if isinstance(value, int) and not isinstance(value, bool):
    return str(value).encode("ascii")
  if type(value) is datetime.date:  # pylint: disable=unidiomatic-typecheck
    return value.isoformat().encode("ascii")  # a Parquet date: "2026-11-05"
  raise ValueError(f"expected text, got {type(value).__name__} {_show(value)}")


def _to_bytes(value: Any) -> bytes:
  if isinstance(value, bytes):
    return value
  if isinstance(value, str):
    return _to_string(value)
  raise ValueError(f"expected bytes or text, got {type(value).__name__} "
                   f"{_show(value)}")


_CONVERTERS = {
    FeatureType.INT64: _to_int64,
    FeatureType.FLOAT: _to_float,
    FeatureType.STRING: _to_string,
    FeatureType.BYTES: _to_bytes,
}


def convert_value(ftype: FeatureType, value: Any) -> Any:
  """Converts one non-null input value to the Python value stored.

  Raises:
    ValueError: with a reason a person can act on.
  """
  return _CONVERTERS[ftype](value)


def _flatten(cell: Sequence[Any], depth: int) -> list:
  out = []
  for item in cell:
    if isinstance(item, (list, tuple)):
      if depth <= 1:
        raise ValueError("expected a flat list, got a nested list")
      out.extend(_flatten(item, depth - 1))
    else:
      out.append(item)
  return out


def _as_list(feature: Feature, cell: Any) -> list:
  """The list of raw values one cell holds for a list feature."""
  if isinstance(cell, (list, tuple)):
    return _flatten(cell, max(len(feature.shape), 1))
  if isinstance(cell, (str, bytes)):
    text = cell.decode("utf-8", "replace") if isinstance(cell, bytes) else cell
    if feature.separator is not None:
      if text == "":
        return []
      if isinstance(cell, str):
        return cell.split(feature.separator)
      return cell.split(feature.separator.encode("utf-8"))
    if text.startswith("["):
      try:
        # An int64 list's numbers as exact decimals, as any other text
        # ("[9223372036854775807.0]" is in range).
        parsed = (json.loads(text, parse_float=decimal.Decimal)
                  if feature.type is FeatureType.INT64 else parse_json(text))
      except ValueError:
        parsed = None
      except RecursionError:  # "[[[[..." thousands deep
        raise ValueError(f"{_show(text)} is a JSON list nested too deep to "
                         f"read; a feature of shape {list(feature.shape)} "
                         f"takes {max(len(feature.shape), 1)} level(s)"
                         ) from None
      if isinstance(parsed, list):
        return _flatten(parsed, max(len(feature.shape), 1))
    if text == "":
      return []
  return [cell]


def convert_cell(feature: Feature, cell: Any) -> Optional[List[Any]]:
  """Converts one input cell to the flat list of values of `feature`.

  Args:
    feature: the feature.
    cell: the value read from the input column (None when missing).

  Returns:
    The flat list of stored values, or None when the cell is missing.

  Raises:
    ValueError: the reason the cell cannot be encoded.
  """
  if cell is None:
    return None
  if feature.is_scalar:
    if isinstance(cell, (list, tuple)):
      raise ValueError(f"expected one value (shape []), got a list of "
                       f"{len(cell)}; declare shape: [-1] for lists")
    return [convert_value(feature.type, cell)]
  raw = _as_list(feature, cell)
  values = []
  for i, item in enumerate(raw):
    if item is None:
      raise ValueError(f"the list has a null at position {i}")
    try:
      values.append(convert_value(feature.type, item))
    except ValueError as e:
      raise ValueError(f"at position {i}: {e}") from None
  expected = feature.num_values
  if expected is not None and len(values) != expected:
    raise ValueError(f"expected {expected} values (shape "
                     f"{list(feature.shape)}), got {len(values)}")
  return values

"""beam_tfrecords/sources/jsonl.py, on values: a line nested past MAX_DEPTH
is a dead-letter row with its line number and reason (never a
RecursionError), and a number past float64 is read as its exact Decimal
(which the float rule refuses), not as inf."""

import decimal

import pyarrow as pa
import pytest

from beam_tfrecords.sources import jsonl
from beam_tfrecords.sources.base import FORMATS, ReadUnit


TOO_DEEP = ("nested deeper than 64 levels of arrays and objects (the most a "
            "row may have): flatten the value, or leave the row out of the "
            "input")


def _read(path, fmt):
  """(rows as dicts, [(row, reason)]) of one file."""
  rows, errors = [], []
  for batch in FORMATS[fmt].read(ReadUnit(str(path), fmt), None):
    values = {c: (a.to_pylist() if isinstance(a, pa.Array) else list(a))
              for c, a in batch.columns.items()}
    rows += [{c: v[i] for c, v in values.items()}
             for i in range(batch.num_rows)]
    errors += [(e.row, e.reason) for e in batch.errors]
  return rows, errors


def _nested(levels, inner="1"):
  return "[" * levels + inner + "]" * levels


# (case, the value of "a" on line 2, its reason (None: read))
DEPTH_CASES = [
    # The line's object is a level: 63 arrays in it make 64.
    ("at_the_limit", _nested(63), None),
    ("one_level_past", _nested(64), TOO_DEEP),
    ("objects_past", '{"b": ' * 64 + "1" + "}" * 64, TOO_DEEP),
    ("past_json_itself", _nested(10_000), TOO_DEEP),
    # Many brackets, little depth: in text, or side by side.
    ("brackets_in_text", '"' + "[{" * 100 + '"', None),
    ("wide_not_deep", "[" + ",".join(["[1]"] * 100) + "]", None),
]


# JSON lines, and elements of a JSON array (but for one that json cannot
# parse: the whole file fails then, tests/e2e/test_bad_input.py).
FORMAT_CASES = [pytest.param(fmt, case, id=f"{fmt}-{case[0]}")
                for fmt in ("jsonl", "json") for case in DEPTH_CASES
                if (fmt, case[0]) != ("json", "past_json_itself")]


@pytest.mark.parametrize("fmt,case", FORMAT_CASES)
def test_a_row_nested_past_the_limit_is_an_error_row(tmp_path, fmt, case):
  _, value, reason = case
  rows = ['{"id": 1}', '{"id": 2, "a": ' + value + "}", '{"id": 3}']
  path = tmp_path / f"in.{fmt}"
  path.write_text("\n".join(rows) + "\n" if fmt == "jsonl"
                  else "[" + ",\n".join(rows) + "]")
  got, errors = _read(path, fmt)
  if reason is None:
    assert [r["id"] for r in got] == [1, 2, 3] and errors == []
  else:
    assert [r["id"] for r in got] == [1, 3]
    assert errors == [(2, reason)]


def test_the_limit_is_the_documented_one():
  assert jsonl.MAX_DEPTH == 64  # docs/schema.md, "Value rules"


def test_a_number_past_float64_is_read_as_its_exact_decimal(tmp_path):
  path = tmp_path / "in.jsonl"
  path.write_text('{"a": 1e309, "b": 1.5, "c": 1e100, "d": "1e309"}\n'
                  '{"a": -1E+400, "b": 2.5, "c": 1e-400, "d": null}\n')
  (one, two), errors = _read(path, "jsonl")
  assert errors == []
  assert one == {"a": decimal.Decimal("1e309"), "b": 1.5, "c": 1e100,
                 "d": "1e309"}
  assert two == {"a": decimal.Decimal("-1E+400"), "b": 2.5, "c": 0.0,
                 "d": None}

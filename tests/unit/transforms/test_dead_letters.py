"""beam_tfrecords/transforms/dead_letters.py, on values: a batch's rejected
rows as dead-letter entries (where from, why, the row as read) in row
order, and each entry as one JSON line whatever its cells hold."""

import json

import pyarrow as pa
import pytest

from beam_tfrecords.encoding.example import RowError
from beam_tfrecords.sources import ReadError, SourceBatch
from beam_tfrecords.transforms.dead_letters import (MAX_RAW_CHARS,
                                                    dead_letter_json,
                                                    remapped, row_errors)

LONG = "x" * (MAX_RAW_CHARS + 5)


@pytest.mark.parametrize("cell,written", [
    ("plain", "plain"),
    ("", ""),
    (0, 0),
    (0.0, 0.0),
    (None, None),
    (True, True),
    (float("nan"), "NaN"),
    (b"caf\xc3\xa9", "café"),
    (b"\xff\x00", {"base64": "/wA="}),
    (LONG, "x" * MAX_RAW_CHARS + f"... ({MAX_RAW_CHARS + 5} characters)"),
    ([1, b"\xff", {"k": float("nan")}], [1, {"base64": "/w=="},
                                         {"k": "NaN"}]),
    ((1, 2), [1, 2]),
    ({3: "three"}, {"3": "three"}),
    (complex(1, 2), "(1+2j)"),
], ids=["text", "empty_text", "zero", "zero_float", "missing", "bool", "nan",
        "utf8_bytes", "binary_bytes", "long_text", "nested_list", "tuple",
        "int_key", "other_type"])
def test_a_raw_cell_is_written_as_json_can_hold_it(cell, written):
  line = dead_letter_json({"source": "in.csv", "row": 2, "rows": 1,
                           "reason": "bad", "problems": [],
                           "raw": {"c": cell}})
  assert "\n" not in line
  assert json.loads(line) == {"source": "in.csv", "row": 2, "rows": 1,
                              "reason": "bad", "problems": [],
                              "raw": {"c": written}}


def test_an_entry_whose_raw_row_is_text_or_absent(tmp_path):
  assert json.loads(dead_letter_json(
      {"row": 1, "raw": "a,\"b", "reason": "é"})) == {
          "row": 1, "raw": "a,\"b", "reason": "é"}
  # Kept readable: not escaped to \u00e9, keys sorted.
  assert dead_letter_json({"z": 1, "reason": "é", "raw": None}) == \
      '{"raw": null, "reason": "é", "z": 1}'


def _batch(**fields):
  return SourceBatch(
      path="in.csv", first_row=10,
      columns={"id": pa.array(["1", "x", "3", "y"]),
               "score": [0.5, 1.0, None, "z"]},
      num_rows=4, **fields)


def test_read_errors_and_encoding_errors_in_row_order():
  batch = _batch(errors=[ReadError(row=15, raw="a,b,c,d",
                                   reason="4 cells, 2 columns"),
                         ReadError(row=None, raw="tail", reason="cut")])
  encoding = [RowError(row=3, problems=(("score", "not a float"),)),
              RowError(row=1, problems=(("id", "not an int"),
                                        ("score", "too big")))]
  assert row_errors(batch, encoding) == [
      {"source": "in.csv", "row": 11, "rows": 1,
       "reason": 'In feature "id": not an int; In feature "score": too big',
       "problems": [{"feature": "id", "reason": "not an int"},
                    {"feature": "score", "reason": "too big"}],
       "raw": {"id": "x", "score": 1.0}},
      {"source": "in.csv", "row": 13, "rows": 1,
       "reason": 'In feature "score": not a float',
       "problems": [{"feature": "score", "reason": "not a float"}],
       "raw": {"id": "y", "score": "z"}},
      {"source": "in.csv", "row": 15, "rows": 1,
       "reason": "4 cells, 2 columns", "problems": [], "raw": "a,b,c,d"},
      {"source": "in.csv", "row": None, "rows": 1, "reason": "cut",
       "problems": [], "raw": "tail"}]
  assert row_errors(_batch(), []) == []


def test_a_pcollections_rows_are_named_by_their_element():
  batch = _batch(elements=["d0", "d1", "d2", "d3"])
  batch.first_row = None
  (error,) = row_errors(batch, [RowError(row=2, problems=(("id", "bad"),))])
  assert (error["row"], error["element"], error["raw"]) == (
      None, "d2", {"id": "3", "score": None})


@pytest.mark.parametrize("index,rows", [
    (None, [0, 2]),
    ([5, 7, 9], [5, 9]),
], ids=["the_whole_batch", "a_slice"])
def test_remapped_gives_a_slices_errors_the_rows_of_the_batch(index, rows):
  errors = [RowError(row=0, problems=(("a", "x"),)),
            RowError(row=2, problems=(("b", "y"),))]
  got = remapped(errors, index)
  assert [e.row for e in got] == rows
  assert [e.problems for e in got] == [(("a", "x"),), (("b", "y"),)]

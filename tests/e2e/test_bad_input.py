"""The bad-input matrix: every case ends as a record, an error row with its
reason, or a clear error before (or instead of) publishing anything."""

import gzip
import json
import math
import os
import struct

import pyarrow as pa
import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError

from tests.helpers.bad_input import SCHEMA, _write


HEADER = "id,text,blob,x,n\n"


def _errors(out):
  d = os.path.join(out, "errors")
  return [json.loads(line) for name in sorted(os.listdir(d))
          for line in open(os.path.join(d, name), encoding="utf-8")]


def _build(tmp_path, name, data, schema=SCHEMA, **kw):
  src = _write(tmp_path, name, data)
  out = str(tmp_path / "out")
  # These inputs are mostly bad on purpose: publish whatever is rejected.
  kw.setdefault("max_bad_fraction", 1.0)
  result = btr.build(schema, src, out, **kw)
  counts = result.info.counts
  assert counts.rows_read == counts.rows_written + counts.rows_rejected
  return result, list(btr.iter_records(out)), _errors(out)


# (case, file name, content, expected records (id -> fields), expected
# error rows [(row, reason text)])
ROW_CASES = [
    ("unbalanced_quote",
     "q.csv", HEADER + '1,ok,b,1,1\n2,"open,b,1,1\n',
     {1: {"text": "ok"}},
     # The quote runs to the end of the file: one malformed record, its raw
     # text holding everything it swallowed.
     [(2, "expected 5 columns, got 2 (unbalanced quotes or a stray "
          "delimiter?)")]),
    ("too_many_columns", "c.csv", HEADER + "1,a,b,1,1,extra\n2,a,b,1,1\n",
     {2: {}}, [(1, "expected 5 columns, got 6")]),
    ("too_few_columns", "c.csv", HEADER + "1,a,b,1,1\n2,a\n3,a,b,1,1\n",
     {1: {}, 3: {}}, [(2, "expected 5 columns, got 2")]),
    ("invalid_utf8_in_string", "u.csv",
     HEADER.encode() + b"1,\xff\xfeA,b,1,1\n2,ok,\xff\xfe,1,1\n",
     # A `bytes` feature keeps the same bytes as they are.
     {2: {"text": "ok", "blob": b"\xff\xfe"}},
     [(1, "In feature \"text\": b'\\xff\\xfeA' is not valid UTF-8 (byte 0); "
          "use type: bytes for binary data")]),
    ("nan_inf_negative_zero", "f.csv",
     HEADER + "1,a,b,nan,1\n2,a,b,-inf,1\n3,a,b,-0.0,1\n4,a,b,INF,1\n",
     {1: {"x": "nan"}, 2: {"x": -math.inf}, 3: {"x": "-0.0"},
      4: {"x": math.inf}}, []),
    ("int64_overflow", "o.csv",
     HEADER + "9223372036854775807,a,b,1,1\n9223372036854775808,a,b,1,1\n"
     "1,a,b,1,-9223372036854775809\n",
     {9223372036854775807: {}},
     [(2, "9223372036854775808 is outside the int64 range"),
      (3, 'In feature "n": -9223372036854775809 is outside the int64 '
          "range")]),
    ("thousands_and_decimal_comma", "t.csv",
     HEADER + '1,a,b,"1,234.5",1\n2,a,b,"9,7",1\n3,a,b,1 000,1\n'
     '4,a,b,1,"1,000"\n',
     {},
     [(1, "could not parse '1,234.5' as float (thousands separators are "
          "not accepted; remove them)"),
      (2, "could not parse '9,7' as float (a decimal comma? write 9.7, "
          "not 9,7)"),
      (3, "could not parse '1 000' as float (thousands separators"),
      (4, "could not parse '1,000' as int64 (thousands separators are not "
          "accepted; remove them, or for a decimal comma write 1.000)")]),
    ("empty_cells", "e.csv",
     HEADER + '1,,,,\n2,"","",,\n',
     # Unquoted empty: missing (default -1 for n, absent otherwise); a
     # quoted "" is the empty string.
     {1: {"text": None, "blob": None, "x": None, "n": -1},
      2: {"text": "", "blob": b"", "x": None, "n": -1}}, []),
    ("required_missing", "r.csv", HEADER + ",a,b,1,1\n2,a,b,1,1\n",
     {2: {}},
     [(1, 'In feature "id": required value is missing (column "id" has no '
          "value)")]),
    ("json_line_not_an_object", "j.jsonl",
     '{"id": 1}\n[1, 2]\n"text"\n{"id": 4, "n": null}\n',
     {1: {"n": -1}, 4: {"n": -1}},
     [(2, "expected a JSON object per line, got list"),
      (3, "expected a JSON object per line, got str")]),
    ("json_missing_key_vs_null", "k.jsonl",
     '{"id": 1, "text": null}\n{"id": 2}\n{"id": 3, "text": ""}\n',
     {1: {"text": None}, 2: {"text": None}, 3: {"text": ""}}, []),
    ("parquet_wrong_types", "w.parquet",
     pa.table({"id": pa.array(["1", "two"]),
               "text": pa.array([{"a": 1}, {"a": 2}]),
               "blob": pa.array([1, 2]),
               "x": pa.array([True, False])}),
     {},
     [(1, 'In feature "blob": expected bytes or text, got int 1; In feature '
          '"text": expected text, got dict'),
      (2, "could not parse 'two' as int64")]),
    ("parquet_binary_in_bytes", "b.parquet",
     pa.table({"id": pa.array([1, 2]),
               "text": pa.array(["a", None]),
               "blob": pa.array([b"\x00\xff\x80", b""], pa.binary()),
               "x": pa.array([None, 2.5], pa.float32())}),
     {1: {"blob": b"\x00\xff\x80"}, 2: {"blob": b""}}, []),
]


def _check_value(got, want):
  if want == "nan":
    assert math.isnan(got)
  elif want == "-0.0":
    assert got == 0.0 and math.copysign(1.0, got) == -1.0
  else:
    assert got == want


@pytest.mark.slow
@pytest.mark.parametrize("case", ROW_CASES, ids=[c[0] for c in ROW_CASES])
def test_bad_rows(tmp_path, case):
  _, name, data, records, error_rows = case
  _, got, errors = _build(tmp_path, name, data)
  by_id = {r["id"]: r for r in got}
  assert sorted(by_id) == sorted(records)
  for rid, fields in records.items():
    for k, v in fields.items():
      _check_value(by_id[rid][k], v)
  assert len(errors) == len(error_rows), errors
  for e, (row, reason) in zip(sorted(errors, key=lambda e: e["row"]),
                              error_rows):
    assert e["row"] == row
    assert reason in e["reason"]
    assert e["source"].endswith(name)
    assert e["raw"]  # the raw row (or its text) is kept


def test_unbalanced_quote_keeps_the_swallowed_text(tmp_path):
  _, _, errors = _build(tmp_path, "q.csv",
                        HEADER + '1,"open,b,1,1\n2,a,b,1,1\n')
  (e,) = errors
  assert e["raw"] == '1,"open,b,1,1\n2,a,b,1,1'


def test_huge_cell(tmp_path):
  big = "x" * (30 * 1024 * 1024)
  result, got, errors = _build(
      tmp_path, "h.csv", HEADER + f"1,a,{big},1,1\n2,a,b,1,1\n")
  assert errors == []
  assert {r["id"]: len(r["blob"]) for r in got} == {1: len(big), 2: 1}


def test_huge_cell_in_a_bad_row_is_cut_in_errors(tmp_path):
  big = "9" * (12 * 1024 * 1024)
  _, got, errors = _build(tmp_path, "h.csv",
                          HEADER + f"1,a,b,1,{big}\n2,a,b,1,1\n")
  (e,) = errors
  assert e["row"] == 1 and "outside the int64 range" in e["reason"]
  assert len(e["raw"]["n"]) < 11_000
  assert e["raw"]["n"].endswith(f"... ({len(big)} characters)")


@pytest.mark.parametrize("name,data", [("e.csv", ""), ("h.csv", HEADER),
                                       ("e.jsonl", ""),
                                       ("e.json", "[]")],
                         ids=["empty_csv", "header_only", "empty_jsonl",
                              "empty_json_array"])
def test_empty_inputs_give_an_empty_finished_dataset(tmp_path, name, data):
  result, got, errors = _build(tmp_path, name, data)
  assert got == [] and errors == []
  assert result.info.counts.rows_read == 0
  assert os.path.exists(os.path.join(result.output, "_SUCCESS"))


def _gz(text):
  return gzip.compress(text.encode(), mtime=0)


@pytest.mark.parametrize("name,data,message", [
    ("t.csv.gz", _gz(HEADER + "".join(f"{i},a,b,1,1\n" for i in range(5000)))
     [:4000], "the gzip data ends early: the file is truncated"),
    ("p.csv.gz", (HEADER + "1,a,b,1,1\n").encode(),
     "cannot decompress as gzip (Not a gzipped file"),
    ("t.jsonl.gz", _gz("".join(f'{{"id": {i}}}\n' for i in range(5000)))
     [:3000], "the gzip data ends early"),
], ids=["truncated_gzip_csv", "not_gzip", "truncated_gzip_jsonl"])
def test_broken_compressed_inputs_fail_and_publish_nothing(tmp_path, name,
                                                           data, message):
  src = _write(tmp_path, name, data)
  out = str(tmp_path / "out")
  with pytest.raises(InputError, match=message.replace("(", r"\(")):
    btr.build(SCHEMA, src, out)
  assert not os.path.exists(os.path.join(out, "_SUCCESS"))


def test_missing_column_without_default_fails_before_the_run(tmp_path):
  src = _write(tmp_path, "m.csv", "id,text\n1,a\n")
  with pytest.raises(InputError, match=r"column\(s\) \['blob', 'x'\] named "
                     "by the schema are not in the csv input"):
    btr.build(SCHEMA, src, str(tmp_path / "out"))
  # With defaults for every absent column it builds: a missing column is
  # all missing values.
  schema = {"name": "m", "features": {"id": "int64",
                                      "x": {"type": "float", "default": 0.5}}}
  result = btr.build(schema, src, str(tmp_path / "out2"))
  assert list(btr.iter_records(result.output)) == [{"id": 1, "x": 0.5}]


def test_nan_sign_and_payload_bits_of_floats_survive(tmp_path):
  """-0.0 keeps its sign bit through the encoder (checked on the bytes)."""
  _, got, _ = _build(tmp_path, "z.csv", HEADER + "1,a,b,-0.0,1\n")
  assert struct.pack("<f", got[0]["x"]) == b"\x00\x00\x00\x80"


# Regressions found in review.

def test_row_numbers_stay_exact_across_blocks(tmp_path):
  """pyarrow reports malformed rows ahead of the batch they belong to; the
  numbers come from the record structure instead (small blocks here)."""
  lines = [HEADER.rstrip("\n")]
  for i in range(1, 3001):
    if i % 500 == 0:
      lines.append(f"{i},a,b")                 # malformed
    elif i % 333 == 0:
      lines.append(f"{i},a,b,oops,1")          # bad float
    else:
      lines.append(f"{i},a,b,1,1")
  src = _write(tmp_path, "b.csv", "\n".join(lines) + "\n")
  out = str(tmp_path / "out")
  btr.build(SCHEMA, src, out, format_options={"block_size": 4096})
  errors = _errors(out)
  assert sorted(e["row"] for e in errors) == sorted(
      [i for i in range(1, 3001) if i % 500 == 0 or i % 333 == 0])
  for e in errors:
    if e["row"] % 500 == 0:
      assert e["raw"] == f"{e['row']},a,b"
    else:
      assert e["raw"]["id"] == str(e["row"])


def test_byte_range_units_number_rows_like_whole_files(tmp_path, monkeypatch):
  import beam_tfrecords.sources.base as base
  text = HEADER + "".join(
      (f"{i},a,b,oops,1\n" if i % 40 == 0 else f"{i},a,b,1,1\n")
      + ("\n" if i == 30 else "") for i in range(1, 201))
  src = _write(tmp_path, "r.csv", text)
  whole = btr.build(SCHEMA, src, str(tmp_path / "whole"), max_bad_fraction=1.0)
  monkeypatch.setattr(base, "CHUNK_BYTES", 500)
  split = btr.build(SCHEMA, src, str(tmp_path / "split"), max_bad_fraction=1.0)
  assert split.info.inputs.files == whole.info.inputs.files
  for out in (whole.output, split.output):
    assert [e["row"] for e in sorted(_errors(out), key=lambda e: e["row"])
            ] == [40, 80, 120, 160, 200]


def test_quote_that_joins_lines_is_an_error_row(tmp_path):
  text = HEADER + '1,a,b,1,1\n2,"x,b,1,1\n3,y",b,1,1\n4,a,b,1,1\n'
  _, got, errors = _build(tmp_path, "j.csv", text)
  assert sorted(r["id"] for r in got) == [1, 4]
  (e,) = errors
  assert e["row"] == 2 and "a value holds 1 line break(s): probably an " \
      "unbalanced quote" in e["reason"]
  assert e["raw"]["text"] == "x,b,1,1\n3,y"


@pytest.mark.parametrize("cut", [None, 400], ids=["whole", "truncated"])
def test_bzip2_inputs(tmp_path, cut):
  import bz2
  data = bz2.compress((HEADER + "".join(
      f"{i},a,b,1,1\n" for i in range(1, 2001))).encode())
  src = _write(tmp_path, "z.csv.bz2", data if cut is None else data[:cut])
  out = str(tmp_path / "out")
  if cut is None:
    result = btr.build(SCHEMA, src, out)
    assert result.info.counts.records_written == 2000
  else:
    with pytest.raises(InputError, match="the bzip2 data ends early"):
      btr.build(SCHEMA, src, out)

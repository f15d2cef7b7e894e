"""The bad-input matrix: every case ends as a record, an error row with its
reason, or a clear error before (or instead of) publishing anything."""

import gzip
import json
import math
import os
import re
import struct

import pyarrow as pa
import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError

from tests.helpers.bad_input import SCHEMA, _write, damaged_parquet


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
    # A line may nest 64 levels, its own object included: 63 lists in a
    # value are read (and judged by the schema), 64 or 10,000 are not.
    ("json_nested_past_the_depth_limit", "d.jsonl",
     '{"id": 1}\n'
     '{"id": 2, "x": ' + "[" * 63 + "1" + "]" * 63 + '}\n'
     '{"id": 3, "x": ' + "[" * 64 + "1" + "]" * 64 + '}\n'
     '{"id": 4, "x": ' + "[" * 10_000 + "1" + "]" * 10_000 + '}\n'
     '{"id": 5, "text": "' + "[" * 100 + '"}\n',
     {1: {}, 5: {"text": "[" * 100}},
     [(2, 'In feature "x": expected one value (shape []), got a list of 1'),
      (3, "nested deeper than 64 levels of arrays and objects (the most a "
          "row may have): flatten the value, or leave the row out of the "
          "input"),
      (4, "nested deeper than 64 levels of arrays and objects")]),
    # One rule for floats: a value that would be stored as inf though it
    # is not written as inf is refused, whether float64 holds it (3.4e39)
    # or not (1e309); "inf" and "-Infinity" are stored as written.
    ("float_past_float32_csv", "f.csv",
     HEADER + "1,a,b,1e309,1\n2,a,b,3.4e39,1\n3,a,b,-1e309,1\n"
     "4,a,b,inf,1\n5,a,b,-Infinity,1\n",
     {4: {"x": math.inf}, 5: {"x": -math.inf}},
     [(1, "In feature \"x\": '1e309' is outside the float32 range "
          "(+-3.402823e+38); it would be stored as inf"),
      (2, "In feature \"x\": '3.4e39' is outside the float32 range "
          "(+-3.402823e+38); it would be stored as inf"),
      (3, "In feature \"x\": '-1e309' is outside the float32 range")]),
    ("float_past_float32_jsonl", "f.jsonl",
     '{"id": 1, "x": 1e309}\n{"id": 2, "x": "1e309"}\n'
     '{"id": 3, "x": 3.4e39}\n{"id": 4, "x": Infinity}\n'
     '{"id": 5, "x": "-inf"}\n',
     {4: {"x": math.inf}, 5: {"x": -math.inf}},
     [(1, "In feature \"x\": 1E+309 is outside the float32 range "
          "(+-3.402823e+38); it would be stored as inf"),
      (2, "In feature \"x\": '1e309' is outside the float32 range"),
      (3, "In feature \"x\": 3.4e+39 is outside the float32 range "
          "(+-3.402823e+38); it would be stored as inf")]),
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


def test_a_json_array_too_deep_to_parse_fails_naming_the_file(tmp_path):
  """An element nested past what json can parse leaves no element to tell
  apart: an InputError names the file (JSON lines name the line)."""
  src = _write(tmp_path, "a.json", '[{"id": 1}, {"id": 2, "x": '
               + "[" * 10_000 + "]" * 10_000 + "}]")
  with pytest.raises(InputError) as e:
    btr.build(SCHEMA, src, str(tmp_path / "out"))
  assert str(e.value) == (
      f"{src}: an element of the JSON array is nested deeper than Python's "
      "JSON parser can follow (about 1,000 levels; a row may have 64), so "
      "no row of the file can be read; fix that element, or write the file "
      "as JSON lines, where such a line is one rejected row")
  assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_a_json_array_element_past_the_depth_limit_is_an_error_row(
    tmp_path):
  _, got, errors = _build(tmp_path, "a.json", json.dumps(
      [{"id": 1}, {"id": 2, "x": json.loads("[" * 70 + "]" * 70)}]))
  assert [r["id"] for r in got] == [1]
  (e,) = errors
  assert (e["row"], e["reason"]) == (2, (
      "nested deeper than 64 levels of arrays and objects (the most a row "
      "may have): flatten the value, or leave the row out of the input"))


# A table of SCHEMA's columns, the last one text that compresses well.
def _parquet_rows():
  return pa.table({"id": pa.array(range(1, 3001), pa.int64()),
                   "blob": pa.array([b"b"] * 3000),
                   "x": pa.array([i / 8 for i in range(3000)]),
                   "text": pa.array([f"row {i} " * 8 for i in range(3000)])})


FIX = ("the file is damaged (an interrupted copy or download, a bad disk); "
       "replace it with a good copy, or leave it out of --input. Nothing "
       "from this build is published.")

# (case, damage (tests/helpers/bad_input.py damaged_parquet), the error's
# text after the file's path and before the fix, pyarrow's part as a
# regular expression)
PARQUET_DAMAGE = [
    ("row_group", "row_group",
     r"row group 1 \(of 3, counted from 0; rows 1,001-2,000\) cannot be "
     r"read: Corrupt snappy compressed data \(pyarrow [0-9.]+\): "),
    ("checksummed_page", "checksummed_page",
     r"row group 1 \(of 3, counted from 0; rows 1,001-2,000\) cannot be "
     r"read: could not verify page integrity, CRC checksum verification "
     r"failed for page_ordinal 0 \(pyarrow [0-9.]+\): "),
]


@pytest.mark.parametrize("case", PARQUET_DAMAGE,
                         ids=[c[0] for c in PARQUET_DAMAGE])
def test_a_damaged_parquet_row_group_is_an_input_error_naming_it(tmp_path,
                                                                 case):
  """The rows of a row group that cannot be decoded cannot be told apart:
  the build fails with one line naming the file, the row group and its
  rows, what pyarrow said, and what to do; nothing is published."""
  _, damage, said = case
  good = _write(tmp_path, "a.parquet", _parquet_rows())
  bad = damaged_parquet(tmp_path / "b.parquet", _parquet_rows(), damage)
  out = tmp_path / "out"
  with pytest.raises(InputError) as e:
    btr.build(SCHEMA, [good, bad], str(out))
  assert re.fullmatch(re.escape(f"{bad}: ") + said + re.escape(FIX),
                      str(e.value)), str(e.value)
  assert not (out / "_SUCCESS").exists()


def test_a_parquet_file_with_a_cut_footer_is_an_input_error_naming_it(
    tmp_path):
  good = _write(tmp_path, "a.parquet", _parquet_rows())
  bad = damaged_parquet(tmp_path / "b.parquet", _parquet_rows(), "footer")
  with pytest.raises(InputError) as e:
    btr.build(SCHEMA, [good, bad], str(tmp_path / "out"))
  assert str(e.value) == (
      f"{bad}: not a readable Parquet file: Parquet magic bytes not found "
      "in footer. Either the file is corrupted or this is not a parquet "
      "file.")
  assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_damaged_row_group_read_by_a_worker_process_is_the_same_error(
    tmp_path):
  """Worker processes report their error as text (errors.from_worker):
  it comes back as the InputError it was, with its message."""
  bad = damaged_parquet(tmp_path / "b.parquet", _parquet_rows(), "row_group")
  with pytest.raises(InputError) as e:
    btr.build(SCHEMA, bad, str(tmp_path / "out"), beam_args=[
        "--direct_num_workers=2", "--direct_running_mode=multi_processing"])
  assert type(e.value) is InputError
  assert str(e.value).startswith(
      f"{bad}: row group 1 (of 3, counted from 0; rows 1,001-2,000) "
      "cannot be read: Corrupt snappy compressed data (pyarrow ")
  assert str(e.value).endswith(FIX)


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

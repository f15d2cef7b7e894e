"""Large line-based files are read as byte ranges: every row exactly once."""

import json
import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords.sources import base

SCHEMA = {"name": "t", "features": {"id": {"type": "int64", "required": True},
                                    "text": {"type": "string"}}}


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_byte_range_units_keep_every_row_once(tmp_path, monkeypatch, fmt):
  monkeypatch.setattr(base, "CHUNK_BYTES", 997)  # many units, odd boundaries
  path = tmp_path / f"in.{fmt}"
  with open(path, "w") as f:
    if fmt == "csv":
      f.write("id,text\n")
    for i in range(1, 1001):
      value = "oops" if i == 777 else i
      if fmt == "csv":
        f.write(f"{value},row {i}\n")
      else:
        f.write(json.dumps({"id": value, "text": f"row {i}"}) + "\n")
  assert os.path.getsize(path) > 10 * 997
  out = str(tmp_path / "out")
  result = btr.build(SCHEMA, str(path), out)
  ids = sorted(r["id"] for r in btr.iter_records(out))
  assert ids == [i for i in range(1, 1001) if i != 777]
  assert all(r["text"] == f"row {r['id']}" for r in btr.iter_records(out))
  assert result.info.counts.to_json() == {"rows_read": 1000,
                                       "rows_written": 999,
                                       "records_written": 999,
                                       "rows_rejected": 1, "rows_dropped": 0}
  errors_dir = os.path.join(out, "errors")
  errors = [json.loads(line) for name in os.listdir(errors_dir)
            for line in open(os.path.join(errors_dir, name))]
  # Row 777 of the data (line 778 of a CSV with its header; line 777 of JSONL).
  assert [e["row"] for e in errors] == [777]
  assert "could not parse 'oops' as int64" in errors[0]["reason"]


@pytest.mark.parametrize("data", [b"a\n\nb\r\n\r\nc\nd", b"\n\n\nx\n", b"abc",
                                  b"a\nb\n"], ids=["mixed", "leading_empty",
                                                   "no_newline", "plain"])
def test_record_and_line_counts_before_any_offset(tmp_path, data):
  from beam_tfrecords.sources.files import (count_lines_before,
                                            count_records_before)
  path = tmp_path / "f.csv"
  path.write_bytes(data)
  for chunk in (1, 2, 3, 100):
    for offset in range(len(data) + 1):
      lines = data[:offset].split(b"\n")[:-1]
      assert count_records_before(str(path), offset, chunk) == sum(
          1 for line in lines if line.replace(b"\r", b""))
      assert count_lines_before(str(path), offset, chunk) == len(lines)


def test_a_format_saying_splittable_is_refused_not_ignored():
  """Byte ranges are chunks now: a format still saying `splittable =
  False` would be cut into ranges if the old name were silently ignored."""
  class OldFormat(base.Format):
    name = "old-names"
    splittable = False

  with pytest.raises(TypeError, match=r"format 'old-names' defines "
                     r"splittable: rename to chunkable / chunkable_with"):
    base.register_format(OldFormat())
  assert "old-names" not in base.FORMATS

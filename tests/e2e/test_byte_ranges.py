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

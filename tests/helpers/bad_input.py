"""What tests/e2e/test_bad_input.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import pyarrow as pa
import pyarrow.parquet as pq


SCHEMA = {
    "name": "bad",
    "features": {
        "id": {"type": "int64", "required": True},
        "text": {"type": "string"},
        "blob": {"type": "bytes"},
        "x": {"type": "float"},
        "n": {"type": "int64", "default": -1},
    },
}


def _write(tmp_path, name, data):
  path = tmp_path / name
  if isinstance(data, pa.Table):
    pq.write_table(data, str(path))
  else:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
  return str(path)

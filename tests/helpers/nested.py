"""What tests/e2e/test_nested.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import json

import pyarrow as pa
import pyarrow.parquet as pq


ROWS = [
    {"id": 1, "user": {"name": "ann", "address": {"city": "Oslo"}},
     "ratings": [{"movie_id": 10, "score": 4.5, "tags": ["a", "b"]},
                 {"movie_id": 11, "score": 3.0, "tags": []}]},
    {"id": 2, "user": {"name": "bob", "address": None},
     "ratings": [{"movie_id": 12, "score": 1.0, "tags": ["c"]}]},
    {"id": 3, "user": None, "ratings": []},
    {"id": 4, "user": {"name": "cy", "address": {"city": "Rome"}},
     "ratings": [{"movie_id": 13, "score": 2.0, "tags": None},
                 {"movie_id": 14, "score": 5.0, "tags": ["d", "e", "f"]},
                 {"movie_id": 15, "score": 0.5, "tags": ["g"]}]},
]


PARQUET_TYPE = pa.schema([
    ("id", pa.int64()),
    ("user", pa.struct([("name", pa.string()), ("address", pa.struct(
        [("city", pa.string())]))])),
    ("ratings", pa.list_(pa.struct([("movie_id", pa.int64()),
                                    ("score", pa.float64()),
                                    ("tags", pa.list_(pa.string()))]))),
])


def _inputs(tmp_path, rows=ROWS):
  jsonl = tmp_path / "in.jsonl"
  jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
  parquet = tmp_path / "in.parquet"
  pq.write_table(pa.Table.from_pylist(rows, schema=PARQUET_TYPE), parquet)
  return str(jsonl), str(parquet)

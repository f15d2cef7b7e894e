"""What tests/e2e/test_options.py shares with the tests split from it
(tests/unit, tests/cluster)."""

from tests.helpers.movies import ROWS


def _csv(tmp_path):
  import pyarrow as pa
  import pyarrow.parquet as pq
  path = tmp_path / "in.parquet"
  pq.write_table(pa.Table.from_pylist(ROWS), str(path))
  return str(path)

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


def damaged_parquet(path, table, damage):
  """Writes `table` (3,000 rows) as a Parquet file of three row groups,
  damages it as `damage` says, and returns its path as text.

  damage:
    "row_group": 64 bytes flipped half-way through row group 1's last
      column, in snappy-compressed pages (its decompressor notices when
      the column compresses well, as repeated text does);
    "checksummed_page": one byte flipped there, in a file written without
      compression and with page checksums (read without checking them, it
      would give one wrong value and no error);
    "footer": the last 20 bytes cut (the footer's length and magic).
  """
  checksums = damage == "checksummed_page"
  pq.write_table(table, str(path), row_group_size=1000, use_dictionary=False,
                 compression="none" if checksums else "snappy",
                 write_page_checksum=checksums)
  data = bytearray(path.read_bytes())
  if damage == "footer":
    del data[-20:]
  else:
    column = pq.ParquetFile(str(path)).metadata.row_group(1).column(
        table.num_columns - 1)
    middle = column.data_page_offset + column.total_compressed_size // 2
    for i in range(middle, middle + (1 if checksums else 64)):
      data[i] ^= 0xFF
  path.write_bytes(bytes(data))
  return str(path)

"""What tests/e2e/test_input_checks.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import gzip
import zlib

import pyarrow as pa
import pyarrow.parquet as pq

from beam_tfrecords.core.tfrecord_files import frame_records


# --- 1. Parquet: every file's columns, from its footer ----------------------

FLIGHTS = """\
name: flights
features:
  id: int64
  tailnum: string
"""


def _flights(path, n, start=0, tailnum=True):
  columns = {"id": list(range(start, start + n))}
  if tailnum:
    columns["tailnum"] = [f"N{i}" for i in range(start, start + n)]
  pq.write_table(pa.table(columns), str(path))


# --- 2. A truncated gzip TFRecord file --------------------------------------

def _varint(n):
  out = b""
  while True:
    byte, n = n & 0x7F, n >> 7
    out += bytes([byte | (0x80 if n else 0)])
    if not n:
      return out


def _field(number, data):
  return _varint(number << 3 | 2) + _varint(len(data)) + data


def _example(i):
  """A tf.train.Example {id: [i]}, encoded by hand (no TensorFlow)."""
  feature = _field(3, _field(1, _varint(i)))  # int64_list, packed value
  return _field(1, _field(1, _field(1, b"id") + _field(2, feature)))


# 2,000 records of the same framed size (ids of two varint bytes).
RECORDS = [_example(i) for i in range(1000, 3000)]
FRAMED = frame_records(RECORDS)
GZIPPED = gzip.compress(FRAMED, mtime=0)


def _whole_records(cut):
  """The records whole in the first `cut` bytes of GZIPPED (inflated:
  none of them is read, their member's CRC cannot be checked)."""
  inflated = zlib.decompressobj(zlib.MAX_WBITS | 16).decompress(
      GZIPPED[:cut])
  return len(inflated) // (len(FRAMED) // len(RECORDS))


def _truncated(path, good=0, where="the file ends inside the member "
               "(gzip member 0, byte 0)"):
  """What the build says of a cut gzip TFRecord input: the records of a
  member it ends inside are not read (their CRC-32 cannot be checked)."""
  return (f"{path}: the file ends early ({where}): it is truncated (an "
          f"interrupted download or copy?) after {good} good records; "
          "replace it or leave it out of --input. Nothing from this build "
          "is published.")


HALF = len(GZIPPED) // 2

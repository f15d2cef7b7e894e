"""beam_tfrecords/core/array_record_files.py, on values: ArrayRecord files
(`--file-format array_record`) in plain Python: their records read in
order, and the writer's options checked. Real array-record (the
`array_record` extra; CI installs it)."""

import hashlib
import os
import random
import sys

import pytest

from beam_tfrecords import InputError
from beam_tfrecords.core import array_record_files as arf

if os.environ.get("BTR_REQUIRE_EXTRAS"):
  from array_record.python import array_record_module
else:
  array_record_module = pytest.importorskip(
      "array_record.python.array_record_module")


def _records(n: int, seed: int = 0):
  """Example-sized records that compress a little, as ours do."""
  rng = random.Random(seed)
  out = []
  for _ in range(n):
    half = bytes(rng.getrandbits(8) for _ in range(rng.randrange(5, 400)))
    out.append(half + half[: len(half) // 2])
  return out


def _write(path, records, options=arf.DEFAULT_OPTIONS) -> bytes:
  writer = array_record_module.ArrayRecordWriter(str(path), options)
  for record in records:
    writer.write(record)
  writer.close()
  with open(path, "rb") as f:
    return f.read()


def test_read_array_record_gives_every_record_in_order(tmp_path,
                                                       monkeypatch):
  monkeypatch.setattr(arf, "_READ_BATCH", 7)  # several reads, a last short one
  records = _records(50) + [b""]
  path = tmp_path / "train-00000-of-00001.array_record"
  _write(path, records)
  assert list(arf.read_array_record(str(path))) == records
  _write(path, [])
  assert list(arf.read_array_record(str(path))) == []


@pytest.mark.parametrize("content,message", [
    (None, "no such file"),
    (b"x" * 1000, "not an ArrayRecord file"),
], ids=["missing", "foreign"])
def test_read_array_record_refuses_what_is_not_one(tmp_path, content,
                                                   message):
  # array-record's own reader reports neither (ok() is False, 0 records).
  path = tmp_path / "a.array_record"
  if content is not None:
    path.write_bytes(content)
  with pytest.raises(ValueError, match=message):
    list(arf.read_array_record(str(path)))


def test_the_bytes_are_decided_by_the_records_and_options(tmp_path):
  """The same records give the same file, run after run and whatever
  max_parallelism says (the file records max_parallelism:1 anyway): so
  the default options need no max_parallelism:1 for deterministic
  shards. Several MB: many chunks in flight with 4 threads."""
  records = _records(4000, seed=1) * 4
  digests = set()
  for i, options in enumerate([arf.DEFAULT_OPTIONS] * 2 + [
      "group_size:1,max_parallelism:1", "group_size:1,max_parallelism:4",
      "group_size:1,zstd:3,window_log:20"]):
    digests.add(hashlib.sha256(_write(tmp_path / f"{i}.array_record",
                                      records, options)).hexdigest())
  assert len(digests) == 1
  reader = array_record_module.ArrayRecordReader(
      str(tmp_path / "0.array_record"))
  assert reader.writer_options_string() == (
      "group_size:1,transpose:false,pad_to_block_boundary:false,zstd:3,"
      "window_log:20,max_parallelism:1")
  assert reader.num_records() == len(records)
  reader.close()
  other = _write(tmp_path / "b.array_record", records,
                 "group_size:64,brotli:6")
  assert other == _write(tmp_path / "c.array_record", records,
                         "group_size:64,brotli:6")


@pytest.mark.parametrize("options,message", [
    ("group_size:0", r"--array-record-options 'group_size:0': "
     r"array-record says: Option group_size: invalid value: 0"),
    ("chunks:3", r"Unknown option chunks.*\(the default is "
     r"'group_size:1'\)"),
    ("zstd:3,uncompressed", "conflicts with option"),
], ids=["value", "unknown", "conflict"])
def test_bad_writer_options_are_refused_with_array_records_words(
    options, message):
  with pytest.raises(InputError, match=message):
    arf.check_options(options)


def test_good_writer_options_pass():
  for options in (arf.DEFAULT_OPTIONS, "group_size:64,brotli:6",
                  "group_size:1,uncompressed", "snappy"):
    arf.check_options(options)


@pytest.mark.parametrize("options,compression", [
    ("group_size:1", "ZSTD"), ("group_size:1,zstd:9", "ZSTD"),
    ("group_size:64,brotli:6", "BROTLI"), ("snappy", "SNAPPY"),
    ("group_size:1,uncompressed", "NONE"),
], ids=["default", "zstd", "brotli", "snappy", "uncompressed"])
def test_compression_of_names_the_chunks_compression(options, compression):
  assert arf.compression_of(options) == compression



def test_without_the_extra_the_error_says_how_to_install_it(monkeypatch,
                                                             tmp_path):
  for name in ("array_record", "array_record.python",
               "array_record.python.array_record_module"):
    monkeypatch.setitem(sys.modules, name, None)  # as if not installed
  for call in (lambda: arf.check_options(arf.DEFAULT_OPTIONS),
               lambda: list(arf.read_array_record(str(tmp_path / "a")))):
    with pytest.raises(InputError, match=r"need array-record: pip install "
                       r"'beam-tfrecords\[array_record\]'"):
      call()


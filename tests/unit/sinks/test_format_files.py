"""beam_tfrecords/sinks/format_files.py, on values: ArrayRecord shards
(`--file-format array_record`), written from the framed parts the
deterministic sink gives a shard's writer. Real array-record (the
`array_record` extra; CI installs it)."""

import hashlib
import os
import pickle
import tempfile

import pytest

from beam_tfrecords.core.tfrecord_files import frame_records
from beam_tfrecords.core.shard_formats import ARRAY_RECORD
from beam_tfrecords.sinks import format_files
from beam_tfrecords.sinks.parts import ShardWritten
from beam_tfrecords.sinks.codec import Codec

if os.environ.get("BTR_REQUIRE_EXTRAS"):
  from array_record.python import array_record_module
else:
  array_record_module = pytest.importorskip(
      "array_record.python.array_record_module")


def _shard(directory, codec: Codec, shard=1, n=4):
  assert codec.files is not None
  return codec.files(str(directory), "train", shard, n, codec, None, None,
                     0, 0)


def _read(path):
  reader = array_record_module.ArrayRecordReader(str(path))
  try:
    return reader.read(0, reader.num_records()) if reader.num_records() \
        else []
  finally:
    reader.close()


def _temporary_shards():
  return sorted(n for n in os.listdir(tempfile.gettempdir())
                if n.startswith("btr-") and n.endswith(".array_record"))


def test_the_parts_become_one_file_in_their_order(tmp_path):
  codec = format_files.codec_of(ARRAY_RECORD)
  assert (codec.suffix, codec.gzip, codec.empty_files) == (
      ".array_record", False, True)
  before = _temporary_shards()
  out = _shard(tmp_path, codec)
  part_file = tmp_path / "run.part"
  part_file.write_bytes(frame_records([b"c", b"d" * 300, b""]))
  out.inline(frame_records([b"a", b"b"]), 2)
  out.part_file(str(part_file), part_file.stat().st_size, 3)
  out.member(frame_records([b"e"]), 1)
  out.flush()
  [written] = out.close()
  path = tmp_path / "train-00001-of-00004.array_record"
  assert written == ShardWritten(
      "train", path.name, 6, path.stat().st_size, 1, 0,
      sha256=hashlib.sha256(path.read_bytes()).hexdigest())
  assert _read(path) == [b"a", b"b", b"c", b"d" * 300, b"", b"e"]
  # The local temporary file is gone.
  assert _temporary_shards() == before


def test_an_empty_shard_is_an_empty_array_record_file(tmp_path):
  """TFDS expects every shard its template names."""
  [written] = _shard(tmp_path, format_files.codec_of(ARRAY_RECORD),
                     shard=0, n=1).close()
  assert (written.file, written.records) == (
      "train-00000-of-00001.array_record", 0)
  assert written.bytes == (tmp_path / written.file).stat().st_size > 0
  assert _read(tmp_path / written.file) == []


def test_the_options_reach_the_writer(tmp_path):
  out = _shard(tmp_path, format_files.codec_of(
      ARRAY_RECORD, "group_size:8,uncompressed"))
  out.inline(frame_records([b"x" * 1000] * 20), 20)
  [written] = out.close()
  reader = array_record_module.ArrayRecordReader(
      str(tmp_path / written.file))
  assert reader.writer_options_string().startswith(
      "group_size:8,transpose:false,pad_to_block_boundary:false,"
      "uncompressed")
  reader.close()


def test_a_miscounted_part_is_a_defect_said_so(tmp_path):
  out = _shard(tmp_path, format_files.codec_of(ARRAY_RECORD))
  with pytest.raises(RuntimeError, match=r"train-00001-of-00004."
                     r"array_record: a part held 2 records, not the 3 "
                     r"counted"):
    out.inline(frame_records([b"a", b"b"]), 3)


def test_a_limit_is_refused():
  codec = format_files.codec_of(ARRAY_RECORD)
  with pytest.raises(ValueError, match="one file: no max_bytes"):
    format_files.FormatFiles("d", "train", 0, 1, codec, None, 1 << 20,
                             fmt=ARRAY_RECORD, writer_options="")


def test_the_codec_pickles_with_its_options(tmp_path):
  """It travels to the workers inside the sink's DoFns."""
  codec = pickle.loads(pickle.dumps(format_files.codec_of(
      ARRAY_RECORD, "group_size:2")))
  out = _shard(tmp_path, codec)
  out.inline(frame_records([b"a", b"b", b"c"]), 3)
  [written] = out.close()
  reader = array_record_module.ArrayRecordReader(
      str(tmp_path / written.file))
  assert reader.writer_options_string().startswith("group_size:2,")
  reader.close()

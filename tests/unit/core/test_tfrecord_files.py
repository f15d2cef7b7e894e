"""beam_tfrecords/core/tfrecord_files.py, on values: TFRecord files and Example
protos in plain Python (no TensorFlow)."""

import gzip

import pytest


def test_iter_tfrecords_cuts_records_out_of_chunks_and_checks_framing(
    tmp_path, monkeypatch):
  import struct
  from beam_tfrecords.core import tfrecord_files as records
  monkeypatch.setattr(records, "_READ_CHUNK", 7)  # records span chunks
  data = [b"", b"a", b"x" * 100, bytes(range(256)) * 3]
  framed = records.frame_records(data)
  path = tmp_path / "r.tfrecord"
  path.write_bytes(framed)
  assert list(records.iter_tfrecords(str(path))) == data
  (tmp_path / "r.tfrecord.gz").write_bytes(gzip.compress(framed))
  assert list(records.iter_tfrecords(str(tmp_path / "r.tfrecord.gz"))) == \
      data
  (tmp_path / "empty.tfrecord").write_bytes(b"")
  assert list(records.iter_tfrecords(str(tmp_path / "empty.tfrecord"))) == []

  def broken(raw, message):
    path.write_bytes(raw)
    with pytest.raises(ValueError, match=message):
      list(records.iter_tfrecords(str(path)))

  one = records.frame_record(b"hello")
  broken(one + one[:5], r"r\.tfrecord: truncated record header at record 2")
  broken(one + one[:14], r"r\.tfrecord: truncated record 2")
  broken(one[:-1] + b"\x00", r"corrupt data CRC at record 1")
  # A corrupt length (here 2**60) is refused, not read.
  huge = struct.pack("<Q", 1 << 60) + one[8:]
  broken(one + huge, r"corrupt length CRC at record 2")


def test_gzip_trailers_members_and_padding_as_the_gzip_module_reads_them(
    tmp_path):
  """Local gzip is inflated by zlib straight from large reads: a damaged
  CRC or length in the trailer still yields every record first, then
  fails; several members and zero padding read as gzip reads them."""
  from beam_tfrecords.core import tfrecord_files as records
  framed = records.frame_records([b"r%d" % i for i in range(40)])
  packed = gzip.compress(framed)
  for at in (-8, -1):  # the CRC, the length
    bad = bytearray(packed)
    bad[at] ^= 0xFF
    path = tmp_path / f"bad{at}.tfrecord.gz"
    path.write_bytes(bytes(bad))
    seen = []
    with pytest.raises(Exception):
      for r in records.iter_tfrecords(str(path)):
        seen.append(r)
    assert len(seen) == 40
  half = len(framed) // 2
  cut = framed.index(b"r20") - 12  # a record split across two members
  assert 0 < cut < half * 2
  path = tmp_path / "members.tfrecord.gz"
  path.write_bytes(gzip.compress(framed[:cut]) + gzip.compress(framed[cut:])
                   + bytes(100))
  assert list(records.iter_tfrecords(str(path))) == [
      b"r%d" % i for i in range(40)]


def test_an_array_record_file_is_refused_by_name(tmp_path):
  """An ArrayRecord shard's first bytes would be taken for a record's
  length (a MemoryError once): the reader names the format and how to
  read it instead."""
  from beam_tfrecords import InputError
  from beam_tfrecords.core.tfrecord_files import iter_tfrecords
  path = tmp_path / "train-00000-of-00001.array_record"
  path.write_bytes(b"\x8a\x00\x00\x00\x00\x00\x00\x7f" + b"\0" * 64)
  with pytest.raises(InputError, match=r"is an ArrayRecord file \(file_"
                     r"format array_record\), not a TFRecord file: read it "
                     r"with beam_tfrecords.core.array_record_files."
                     r"read_array_record"):
    list(iter_tfrecords(str(path)))

"""beam_tfrecords/core/tfrecord_files.py, on values: TFRecord files and Example
protos in plain Python (no TensorFlow)."""

import gzip

import pytest


def test_iter_tfrecords_cuts_records_out_of_chunks_and_checks_framing(
    tmp_path, monkeypatch):
  import struct
  from beam_tfrecords.core import shard_reader
  from beam_tfrecords.core import tfrecord_files as records
  from beam_tfrecords.core.errors import ShardDamagedError
  monkeypatch.setattr(shard_reader, "_READ_BYTES", 7)  # records span reads
  data = [b"", b"a", b"x" * 100, bytes(range(256)) * 3]
  framed = records.frame_records(data)
  path = tmp_path / "r.tfrecord"
  path.write_bytes(framed)
  assert list(shard_reader.iter_tfrecords(str(path))) == data
  (tmp_path / "r.tfrecord.gz").write_bytes(gzip.compress(framed))
  assert list(shard_reader.iter_tfrecords(
      str(tmp_path / "r.tfrecord.gz"))) == data
  (tmp_path / "empty.tfrecord").write_bytes(b"")
  assert list(shard_reader.iter_tfrecords(
      str(tmp_path / "empty.tfrecord"))) == []

  def broken(raw, message):
    path.write_bytes(raw)
    with pytest.raises(ShardDamagedError, match=message):
      list(shard_reader.iter_tfrecords(str(path)))

  one = records.frame_record(b"hello")
  broken(one + one[:5], r"r\.tfrecord: the file ends inside record 2 "
         r"\(byte 21\)")
  broken(one + one[:14], r"r\.tfrecord: the file ends inside record 2")
  broken(one[:-1] + b"\x00", r"corrupt data CRC at record 1 \(byte 0\)")
  # A corrupt length (here 2**60) is refused, not read: by its CRC, and
  # unchecked, by what is left of the file.
  huge = struct.pack("<Q", 1 << 60) + one[8:]
  broken(one + huge, r"corrupt length CRC at record 2 \(byte 21\)")
  path.write_bytes(one + huge)
  with pytest.raises(ShardDamagedError, match=r"record 2 says "
                     r"1,152,921,504,606,846,976 bytes, more than the file "
                     r"holds"):
    list(shard_reader.iter_tfrecords(str(path), check_crc=False))


def test_a_gzip_member_is_checked_before_its_records_leave(tmp_path):
  """A damaged CRC or length in a member's trailer fails before any of
  its records is handed out; several members (a record split across
  two), and zero padding, read as gzip reads them."""
  from beam_tfrecords.core import tfrecord_files as records
  from beam_tfrecords.core.errors import ShardDamagedError
  from beam_tfrecords.core.shard_reader import iter_tfrecords
  framed = records.frame_records([b"r%d" % i for i in range(40)])
  packed = gzip.compress(framed)
  for at in (-8, -1):  # the CRC, the length
    bad = bytearray(packed)
    bad[at] ^= 0xFF
    path = tmp_path / f"bad{at}.tfrecord.gz"
    path.write_bytes(bytes(bad))
    seen = []
    with pytest.raises(ShardDamagedError, match=r"bad-\d\.tfrecord\.gz: the "
                       r"member does not inflate \(.*\) \(gzip member 0, "
                       r"byte 0\)"):
      for r in iter_tfrecords(str(path)):
        seen.append(r)
    assert seen == []
  half = len(framed) // 2
  cut = framed.index(b"r20") - 12  # a record split across two members
  assert 0 < cut < half * 2
  path = tmp_path / "members.tfrecord.gz"
  path.write_bytes(gzip.compress(framed[:cut]) + gzip.compress(framed[cut:])
                   + bytes(100))
  assert list(iter_tfrecords(str(path))) == [b"r%d" % i for i in range(40)]
  # Garbage after the members is no gzip member.
  path.write_bytes(packed + b"garbage!")
  with pytest.raises(ShardDamagedError, match=r"gzip member 1, byte "
                     f"{len(packed):,}"):
    list(iter_tfrecords(str(path)))


def test_malformed_records_decode_to_an_input_error():
  """A record that is not an Example (another tool's, or damaged and read
  unchecked) is an InputError saying so, never a raw IndexError,
  UnicodeDecodeError or a list believed past the message's end."""
  from beam_tfrecords.core.errors import InputError
  from beam_tfrecords.core.tfrecord_files import decode_example
  for record, message in ((b"\x0f", "unsupported wire type 7"),
                          (b"\x08\xff", "a varint runs past byte 2"),
                          (b"\x0a\x7f", "field 1 runs past the message"),
                          (b"\x0a\x06\x0a\x04\x0a\x02\xff\xfe",
                           "a feature name is not UTF-8")):
    with pytest.raises(InputError, match=message):
      decode_example(record)


def test_an_array_record_file_is_refused_by_name(tmp_path):
  """An ArrayRecord shard's first bytes would be taken for a record's
  length (a MemoryError once): the reader names the format and how to
  read it instead."""
  from beam_tfrecords import InputError
  from beam_tfrecords.core.shard_reader import iter_tfrecords
  path = tmp_path / "train-00000-of-00001.array_record"
  path.write_bytes(b"\x8a\x00\x00\x00\x00\x00\x00\x7f" + b"\0" * 64)
  with pytest.raises(InputError, match=r"is an ArrayRecord file \(file_"
                     r"format array_record\), not a TFRecord file: read it "
                     r"with beam_tfrecords.core.array_record_files."
                     r"read_array_record"):
    list(iter_tfrecords(str(path)))

"""beam_tfrecords/core/members.py, on values: gzip members that say their
own size and record count, read by every gzip reader and found again by
hopping headers."""

import gzip
import struct
import zlib

import pytest

from beam_tfrecords.core.members import (HEADER_BYTES, Member, MemberError,
                                         member, member_table)
from beam_tfrecords.core.tfrecord_files import frame_records
from beam_tfrecords.core.shard_reader import iter_tfrecords

from tests.helpers.records import tf_read


def _member(records, level=6):
  framed = frame_records(records)
  deflater = zlib.compressobj(level, zlib.DEFLATED, -15)
  return member(deflater.compress(framed) + deflater.flush(), framed,
                len(records))


GROUPS = [[b"a", b"bb"], [], [bytes(range(256)) * 40], [b"x" * i
                                                         for i in range(50)]]


def test_members_are_found_by_their_headers(tmp_path):
  parts = [_member(g) for g in GROUPS]
  data = b"".join(parts)
  offsets = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
  assert member_table(data) == [
      Member(o, len(p), len(g)) for o, p, g in zip(offsets, parts, GROUPS)]
  # Counted from where the data sits in a file.
  assert member_table(parts[1], offset=offsets[1]) == [
      Member(offsets[1], len(parts[1]), 0)]
  # Every gzip reader reads them as one file: Python's, and ours.
  records = [r for g in GROUPS for r in g]
  assert gzip.decompress(data) == frame_records(records)
  (tmp_path / "s.tfrecord.gz").write_bytes(data)
  assert list(iter_tfrecords(str(tmp_path / "s.tfrecord.gz"))) == records


def test_tensorflow_reads_the_members_as_one_gzip_tfrecord_file(tf,
                                                                  tmp_path):
  def read(groups):
    path = tmp_path / "s.tfrecord.gz"
    path.write_bytes(b"".join(_member(g) for g in groups))
    return tf_read(tf, [str(path)])
  full = [g for g in GROUPS if g]
  assert read(full) == [r for g in full for r in g]
  # tf.data stops at an empty member (a standard one too), so a writer
  # puts one only in an empty file: then there is nothing after it.
  assert read(GROUPS) == GROUPS[0]
  assert read([[]]) == []


def test_a_member_is_these_bytes():
  """RFC 1952 with FEXTRA: the header (FLG 4, MTIME 0, XFL 0, OS 255),
  XLEN 12, the subfield BT of 8 bytes (the member's size, its records),
  the body as given, then CRC-32 and size of what it inflates to."""
  got = member(b"BODY", b"framed", 7)
  assert got == (b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff"
                 + struct.pack("<H2sHII", 12, b"BT", 8, 36, 7) + b"BODY"
                 + struct.pack("<II", zlib.crc32(b"framed"), 6))
  assert HEADER_BYTES == 24 and len(got) == 36
  assert member_table(got) == [Member(0, 36, 7)]


def test_tensorflow_stops_at_an_empty_standard_member_too(tf, tmp_path):
  """Why a writer puts no empty member inside a file (ours or gzip's)."""
  path = tmp_path / "s.tfrecord.gz"
  path.write_bytes(gzip.compress(frame_records([b"a"]), mtime=0)
                   + gzip.compress(b"", mtime=0)
                   + gzip.compress(frame_records([b"b"]), mtime=0))
  assert tf_read(tf, [str(path)]) == [b"a"]
  assert gzip.decompress(path.read_bytes()) == frame_records([b"a", b"b"])


def test_foreign_or_cut_members_are_refused():
  standard = gzip.compress(frame_records([b"a"]), mtime=0)
  with pytest.raises(MemberError, match="byte 0: no gzip member with a "
                     "size subfield starts here"):
    member_table(standard)
  good = _member(GROUPS[0])
  with pytest.raises(MemberError, match=f"byte {len(good):,}: no gzip "
                     "member"):
    member_table(good + standard)
  with pytest.raises(MemberError, match=f"byte 0: a member of {len(good):,} "
                     f"bytes but only {len(good) - 1:,} are left"):
    member_table(good[:-1])
  zero = bytearray(good)
  zero[16:20] = bytes(4)  # a header that says 0 bytes: no endless loop
  with pytest.raises(MemberError, match="says 0 bytes, less than a member "
                     "takes"):
    member_table(bytes(zero))
  other = bytearray(good)
  other[12:14] = b"XY"  # another writer's subfield
  with pytest.raises(MemberError, match="without the BT size subfield"):
    member_table(bytes(other))


def test_beams_tfrecord_reader_reads_the_members(tmp_path):
  """What ReadFromTFRecord does to a file: Beam's gzip file, then its
  TFRecord framing."""
  from apache_beam.io.filesystem import CompressedFile, CompressionTypes
  from apache_beam.io.tfrecordio import _TFRecordUtil
  full = [g for g in GROUPS if g]
  path = tmp_path / "s.tfrecord.gz"
  path.write_bytes(b"".join(_member(g) for g in full))
  got = []
  with open(path, "rb") as raw:
    f = CompressedFile(raw, CompressionTypes.GZIP)
    while (record := _TFRecordUtil.read_record(f)) is not None:
      got.append(record)
  assert got == [r for g in full for r in g]

"""beam_tfrecords/core/members.py, on values: gzip members that say their
own size and record count, read by every gzip reader and found again by
hopping headers."""

import gzip
import zlib

import pytest

from beam_tfrecords.core.members import (HEADER_BYTES, Member, MemberError,
                                         member, member_table)
from beam_tfrecords.core.tfrecord_files import frame_records, iter_tfrecords


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
    return [r.numpy() for r in tf.data.TFRecordDataset(
        str(path), compression_type="GZIP")]
  full = [g for g in GROUPS if g]
  assert read(full) == [r for g in full for r in g]
  # tf.data stops at an empty member (a standard one too), so a writer
  # puts one only in an empty file: then there is nothing after it.
  assert read(GROUPS) == GROUPS[0]
  assert read([[]]) == []


def test_the_same_body_makes_the_same_bytes():
  assert _member(GROUPS[3]) == _member(GROUPS[3])
  # The header: FEXTRA with the BT subfield, 24 bytes in all (14 more
  # than a standard member's).
  one = _member(GROUPS[0])
  assert HEADER_BYTES == 24 and one[3] == 4 and one[12:14] == b"BT"


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

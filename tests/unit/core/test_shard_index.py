"""beam_tfrecords/core/shard_index.py, on values: the index beside a gzip
TFRecord shard, tied to its shard by size and digests."""

import hashlib

import numpy as np
import pytest

from beam_tfrecords import ShardIndexError
from beam_tfrecords.core.members import Member
from beam_tfrecords.core.shard_index import MAGIC, ShardIndex

MEMBERS = [Member(0, 100, 3), Member(100, 50, 0), Member(150, 70, 4)]
SHARD = bytes(range(220))


def _index(shard=SHARD):
  return ShardIndex.from_members(
      MEMBERS, hashlib.sha256(shard[0:100]).digest(),
      hashlib.sha256(shard[150:220]).digest())


def test_an_index_is_these_bytes_and_reads_back():
  index = _index()
  data = index.to_bytes()
  assert data[:8] == MAGIC == b"BTRIDX01"
  assert int.from_bytes(data[8:16], "little") == 3
  # The arrays, little-endian uint64, each one longer than the members.
  offsets = np.frombuffer(data, "<u8", offset=80, count=4)
  first = np.frombuffer(data, "<u8", offset=112, count=4)
  assert offsets.tolist() == [0, 100, 150, 220]
  assert first.tolist() == [0, 3, 3, 7]
  assert len(data) == 80 + 16 * 4
  back = ShardIndex.from_bytes(data, "x.index")
  assert back == index
  assert (back.members, back.records, back.shard_bytes) == (3, 7, 220)
  # Record 3 is the first of the third member (the second holds none).
  assert back.member_of(np.arange(7)).tolist() == [0, 0, 0, 2, 2, 2, 2]


def test_foreign_and_cut_index_files_are_refused_by_name():
  with pytest.raises(ShardIndexError, match=r"a\.index is not a shard "
                     r"index written by beam_tfrecords"):
    ShardIndex.from_bytes(b"\x1f\x8b" + bytes(100), "a.index")
  with pytest.raises(ShardIndexError, match=r"b\.index: an index of 3 "
                     r"members takes 144 bytes, the file has 143"):
    ShardIndex.from_bytes(_index().to_bytes()[:-1], "b.index")


def test_check_names_both_files_for_a_stale_index():
  index = _index()
  read = lambda offset, length: SHARD[offset:offset + length]
  index.check(220, read, "i.index", "s.tfrecord.gz")  # its own shard
  with pytest.raises(ShardIndexError) as e:
    index.check(221, read, "i.index", "s.tfrecord.gz")
  assert str(e.value).startswith(
      "the index i.index does not belong to the shard s.tfrecord.gz: the "
      "index is of a shard of 220 bytes, the shard has 221. The index is "
      "stale")
  other = bytearray(SHARD)
  other[200] ^= 1  # the same size, another last member
  with pytest.raises(ShardIndexError, match=r"the shard's last member "
                     r"\(bytes 150-220\) is not the one indexed"):
    index.check(220, lambda o, n: bytes(other[o:o + n]), "i.index",
                "s.tfrecord.gz")


def test_an_index_starts_at_the_shards_start():
  with pytest.raises(ValueError, match="from the shard's start"):
    ShardIndex.from_members(MEMBERS[1:], b"", b"")

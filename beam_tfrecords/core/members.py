"""Gzip members that say their own size and record count, as BGZF (bgzip,
BAM files) does: where random access into a gzip TFRecord shard can start.

A deflate stream does not say where it ends, so a reader can find the
members of a shard only by inflating it. A member written here carries,
in its gzip header's extra field (FEXTRA), one subfield `BT` of 8 bytes:
the member's whole size and its record count (both little-endian
uint32). Every gzip reader skips the extra field (tf.data's
`TFRecordDataset(compression_type="GZIP")`, Beam's `ReadFromTFRecord`,
Python's gzip), and concatenated members are one gzip file, so a shard of
such members reads as any other. `member_table` finds them by hopping
from header to header, without inflating anything.

    body = deflater.compress(framed) + deflater.flush()   # raw deflate
    data = member(body, framed, records)
    member_table(data) == [Member(0, len(data), records)]

tf.data stops reading at an empty member (a standard one too; TF 2.21),
so a writer puts one only in an otherwise empty file.

The deflate itself is the caller's (sinks.shards places its compressor so
that the bytes depend only on the data); a member made here is the same
bytes for the same body, records and framed bytes.
"""

import struct
import zlib
from typing import List, NamedTuple

__all__ = ["Member", "member", "member_table", "MemberError", "SUBFIELD",
           "HEADER_BYTES"]

# ID1 ID2, CM deflate, FLG FEXTRA, MTIME 0, XFL 0, OS unknown (255).
_START = b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff"
SUBFIELD = b"BT"
# XLEN, then the subfield: SI1 SI2, LEN, size, records.
_EXTRA = struct.Struct("<H2sHII")
HEADER_BYTES = len(_START) + _EXTRA.size
_TRAILER = struct.Struct("<II")  # CRC-32 and size (mod 2**32) of the data
_LIMIT = 2**32


class MemberError(ValueError):
  """Bytes that are not a member written here (another gzip writer's, a
  cut file)."""


class Member(NamedTuple):
  """One member: where it starts, its bytes, the records it holds."""
  offset: int
  size: int
  records: int


def member(body: bytes, framed: bytes, records: int) -> bytes:
  """The gzip member of raw deflate `body`, which inflates to `framed`
  (the `records` framed records)."""
  size = HEADER_BYTES + len(body) + _TRAILER.size
  if size >= _LIMIT or records >= _LIMIT:
    raise ValueError(f"a member of {size:,} bytes and {records:,} records "
                     "is over 4 GiB or 2**32 records; cut it smaller")
  return b"".join((
      _START, _EXTRA.pack(_EXTRA.size - 2, SUBFIELD, 8, size, records),
      body, _TRAILER.pack(zlib.crc32(framed), len(framed) % _LIMIT)))


def member_table(data: bytes, offset: int = 0) -> List[Member]:
  """The members of `data` (members written by `member`, back to back),
  their offsets counted from `offset`.

  Raises:
    MemberError: a member without the `BT` subfield, or data that ends
      inside a member.
  """
  out: List[Member] = []
  at = 0
  while at < len(data):
    head = data[at:at + HEADER_BYTES]
    if len(head) < HEADER_BYTES or head[:len(_START)] != _START:
      raise MemberError(f"byte {offset + at:,}: no gzip member with a size "
                        "subfield starts here")
    xlen, name, length, size, records = _EXTRA.unpack_from(head,
                                                           len(_START))
    if (xlen, name, length) != (_EXTRA.size - 2, SUBFIELD, 8):
      raise MemberError(f"byte {offset + at:,}: a gzip member without the "
                        "BT size subfield")
    if size < HEADER_BYTES + _TRAILER.size:
      raise MemberError(f"byte {offset + at:,}: a member header that says "
                        f"{size:,} bytes, less than a member takes")
    if at + size > len(data):
      raise MemberError(f"byte {offset + at:,}: a member of {size:,} bytes "
                        f"but only {len(data) - at:,} are left")
    out.append(Member(offset + at, size, records))
    at += size
  return out

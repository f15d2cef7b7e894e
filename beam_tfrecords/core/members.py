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

The deflate itself is the caller's (sinks.deflate places its compressor so
that the bytes depend only on the data); a member made here is the same
bytes for the same body, records and framed bytes.
"""

import struct
import zlib
from typing import Any, Callable, List, NamedTuple, Optional, Tuple

from isal import isal_zlib

__all__ = ["Member", "member", "from_gzip", "member_table", "MemberError",
           "SUBFIELD", "HEADER_BYTES", "inflate", "Hopper", "member_size",
           "MEMBER_CAP"]

# ID1 ID2, CM deflate, FLG FEXTRA, MTIME 0, XFL 0, OS unknown (255).
_START = b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff"
SUBFIELD = b"BT"
# XLEN, then the subfield: SI1 SI2, LEN, size, records.
_EXTRA = struct.Struct("<H2sHII")
HEADER_BYTES = len(_START) + _EXTRA.size
_TRAILER = struct.Struct("<II")  # CRC-32 and size (mod 2**32) of the data
_LIMIT = 2**32
# The framed bytes of a member at most, by default (one record larger than
# this is a member of its own): where random access can enter a shard.
# 256 KiB costs +1.83% in shard size on the 1M flights (docs/design.md).
MEMBER_CAP = 256 * 1024
# A standard member's header as zlib and ISA-L write it (wbits 31): ID1
# ID2, CM deflate, FLG 0; then MTIME, XFL, OS (6 bytes) and the deflate.
_STANDARD = b"\x1f\x8b\x08\x00"
_STANDARD_HEADER_BYTES = 10


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
  return b"".join((_header(len(body) + _TRAILER.size, records), body,
                   _TRAILER.pack(zlib.crc32(framed), len(framed) % _LIMIT)))


def from_gzip(gz: bytes, records: int) -> bytes:
  """A standard gzip member without flags (what zlib and ISA-L write with
  wbits 31) of `records` framed records, as a member written here: the
  same deflate body and trailer (so no second pass over the data for its
  CRC), under a header with the BT subfield."""
  if gz[:len(_STANDARD)] != _STANDARD or len(gz) < (
      _STANDARD_HEADER_BYTES + _TRAILER.size):
    raise ValueError("not a gzip member with a plain 10-byte header")
  rest = memoryview(gz)[_STANDARD_HEADER_BYTES:]
  return b"".join((_header(len(rest), records), rest))


def _header(rest: int, records: int) -> bytes:
  """The header of a member whose body and trailer take `rest` bytes."""
  size = HEADER_BYTES + rest
  if size >= _LIMIT or records >= _LIMIT:
    raise ValueError(f"a member of {size:,} bytes and {records:,} records "
                     "is over 4 GiB or 2**32 records; cut it smaller")
  return _START + _EXTRA.pack(_EXTRA.size - 2, SUBFIELD, 8, size, records)


def member_size(head: bytes, at: int = 0) -> Tuple[int, int]:
  """(size, records) from the HEADER_BYTES of a member written here;
  MemberError for anything else (`at`: where it is, for the message)."""
  if head[:len(_START)] != _START:
    raise MemberError(f"byte {at:,}: no gzip member with a size subfield "
                      "starts here")
  xlen, name, length, size, records = _EXTRA.unpack_from(head, len(_START))
  if (xlen, name, length) != (_EXTRA.size - 2, SUBFIELD, 8):
    raise MemberError(f"byte {at:,}: a gzip member without the BT size "
                      "subfield")
  if size < HEADER_BYTES + _TRAILER.size:
    raise MemberError(f"byte {at:,}: a member header that says {size:,} "
                      "bytes, less than a member takes")
  return size, records


class Hopper:
  """Units that say their own size, found in data given piece by piece:
  members written here (the default), or TFRecord records
  (`Hopper(8, lambda head, at: (length + 16, 1))`). `feed` each piece in
  turn; `units` holds (offset, size, count) per unit, `first` and `last`
  the bytes of the first and the last whole unit; `done()` says whether
  the data ended between units."""

  def __init__(self, header_bytes: int = HEADER_BYTES,
               size_of: Callable[[bytes, int], Tuple[int, int]] = member_size,
               offset: int = 0):
    self._header_bytes, self._size_of = header_bytes, size_of
    self._at = offset  # where the unit in `_carry` starts
    self._carry = b""  # the bytes of the unit begun and not ended
    self.units: List[Member] = []
    self.first: Optional[bytes] = None
    self.last: Optional[bytes] = None

  def feed(self, piece: Any) -> None:
    data = self._carry + bytes(piece) if self._carry else piece
    pos, last = 0, None
    while True:
      if len(data) - pos < self._header_bytes:
        break
      size, count = self._size_of(bytes(data[pos:pos + self._header_bytes]),
                                  self._at)
      if len(data) - pos < size:
        break
      if self.first is None:
        self.first = bytes(data[pos:pos + size])
      last = (pos, size)  # copied once, after the loop
      self.units.append(Member(self._at, size, count))
      self._at += size
      pos += size
    if last is not None:
      self.last = bytes(data[last[0]:last[0] + last[1]])
    self._carry = bytes(data[pos:])

  def done(self) -> bool:
    return not self._carry


def inflate(data: Any) -> bytes:
  """The data of every gzip member in `data`, back to back (zlib's
  decompress with wbits 31 stops after the first). Checks each member's
  CRC-32 and size."""
  out = []
  view = memoryview(data)
  while len(view):
    d = isal_zlib.decompressobj(wbits=31)
    out.append(d.decompress(view))
    if not d.eof:
      raise MemberError("the data ends inside a gzip member")
    view = view[len(view) - len(d.unused_data):]
  return b"".join(out)


def member_table(data: bytes, offset: int = 0) -> List[Member]:
  """The members of `data` (members written by `member`, back to back),
  their offsets counted from `offset`.

  Raises:
    MemberError: a member without the `BT` subfield, or data that ends
      inside a member.
  """
  hopper = Hopper(offset=offset)
  hopper.feed(data)
  if not hopper.done():
    at = sum(u.size for u in hopper.units)
    if len(data) - at < HEADER_BYTES:
      raise MemberError(f"byte {offset + at:,}: no gzip member with a size "
                        "subfield starts here")
    size, _ = member_size(data[at:at + HEADER_BYTES], offset + at)
    raise MemberError(f"byte {offset + at:,}: a member of {size:,} bytes "
                      f"but only {len(data) - at:,} are left")
  return hopper.units

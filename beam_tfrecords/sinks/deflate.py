"""The gzip members of a TFRecord shard, deflated so that their bytes
depend only on the records: ISA-L at level 2 (zlib at a `gzip_level`),
members cut from framed records at a cap (core.members: each says its
size and record count), and the compressor placed where ISA-L's
address-dependent hash cannot reach the output (see below).

    gzip_members(framed, level=None, cap=MEMBER_CAP)   # our members
    gzip_member(framed, level=None)                    # one standard one
"""

import zlib
from typing import Optional

import google_crc32c
import numpy as np
from isal import isal_zlib

from beam_tfrecords.core.members import MEMBER_CAP, from_gzip
from beam_tfrecords.core.tfrecord_files import framed_ends


__all__ = ["ISAL_LEVEL", "compressor", "gzip_member", "gzip_members",
           "isal_address_slots", "isal_member_slots"]


# The default deflate: ISA-L (python-isal) at level 2 writes standard gzip.
# Measured on 57 MB of framed Examples (2 cores): ISA-L 2 at 588 MB/s,
# ratio 3.72; zlib 1 at 130 MB/s, ratio 3.69; zlib 6 at 55 MB/s, ratio
# 4.17. A `gzip_level` of 1-9 uses zlib at that level.
ISAL_LEVEL = 2


# ISA-L's deflate at levels 1 and 2 reads one byte position's hash from
# the compressor's memory address instead of from the data.
# isal_deflate_icf_body_hash_hist_01/02/04 (igzip_icf_body_h1_gr_bt.asm;
# so since ISA-L 2.21 of 2017, in 2.32.1 as python-isal 1.9.1 bundles it,
# and on master) handles a stream's first byte in .write_first_byte. There
# it computes the hash of position 2 as crc32(rcx >> 16), but rcx still
# holds the address of the isal_zstream. So position 2 goes into the hash slot
#   crc32c(((address of the stream) >> 16) & 0xffffffff) & hash_mask
# and not into its own. Most of the time that slot is unused and the bytes
# are the same at every address. When it is the slot of the member's
# position 0, 1 or 2, a later match is lost or gained and the member comes
# out a few bytes different. So the bytes depended on where the allocator
# put the compressor object (about 1 member in 10,000). flights150k's
# member 7 lost its 34-byte match to position 0 at 4,523 and came out
# 20,273 bytes instead of 20,269. Placing the compressor at an address of
# that slot reproduces those bytes exactly. With the compressor placed at
# an address of each of the 32,768 slots in turn, only the member's own
# three slots changed its bytes. tests/unit/sinks/test_shards.py crafts
# members for the slot of a compressor's address.
# The fix: a compressor whose address gives one of the member's three slots
# is not used. Another one is made while the first is kept alive, so the
# new one lies elsewhere.
_ISAL_HASH_MASKS = {1: 0x1FFF, 2: 0x7FFF}  # LVL1/LVL2_HASH_MASK


_CRC32C_OF_ZEROS = google_crc32c.value(b"\0\0\0\0")


# The isal_zstream starts at most this far into python-isal's compressor
# object (64 bytes in 1.9.1); its address is id() plus that offset.
_STREAM_OFFSET_MAX = 4096


_ISAL_TRIES = 64


def _isal_slot(four: bytes, mask: int) -> int:
  """ISA-L's hash slot of four bytes: the crc32 instruction (CRC-32C from
  0, without the standard's inversions) of them, little-endian."""
  return (google_crc32c.value(four) ^ _CRC32C_OF_ZEROS) & mask


def isal_address_slots(comp, mask: int = _ISAL_HASH_MASKS[ISAL_LEVEL]
                       ) -> set:
  """The slots an ISA-L compressor object may put position 2 in. This is
  one slot, or two if the stream could lie past a 64 KiB boundary."""
  start = id(comp)  # CPython: the object's address
  return {_isal_slot(((a >> 16) & 0xFFFFFFFF).to_bytes(4, "little"), mask)
          for a in (start, start + _STREAM_OFFSET_MAX)}


def isal_member_slots(data, mask: int = _ISAL_HASH_MASKS[ISAL_LEVEL]
                      ) -> set:
  """The hash slots of a member's positions 0, 1 and 2."""
  head = bytes(data[:6]).ljust(6, b"\0")
  return {_isal_slot(head[i:i + 4], mask) for i in range(3)}


def compressor(level: Optional[int] = None, data: bytes = b""):
  """A gzip-member compressor: ISA-L (default) or zlib at `level` 1-9.

  wbits 31 makes a gzip member; both write mtime 0. For ISA-L, `data` is
  the member (at least its first 6 bytes). The compressor returned is one
  whose address cannot change that member's bytes (see above), so the
  bytes depend only on the data and the level.
  """
  if level is not None:
    return zlib.compressobj(level, zlib.DEFLATED, 31)
  avoid = isal_member_slots(data)
  held = []
  for _ in range(_ISAL_TRIES):
    comp = isal_zlib.compressobj(ISAL_LEVEL, isal_zlib.DEFLATED, 31)
    if not isal_address_slots(comp) & avoid:
      return comp
    held.append(comp)  # alive, so the next one is allocated elsewhere
  raise RuntimeError(  # (chance about 1e-4 ** 64)
      f"no ISA-L compressor at an address safe for this member in "
      f"{_ISAL_TRIES} tries")


def gzip_member(data: bytes, level: Optional[int]) -> bytes:
  """`data` as one gzip member, compressed in one call by a new
  compressor."""
  comp = compressor(level, data)
  return comp.compress(data) + comp.flush()


def gzip_members(framed, level: Optional[int], cap: int = MEMBER_CAP
                 ) -> bytes:
  """Framed records as gzip members of at most `cap` framed bytes each (a
  larger record: a member of its own), each saying its size and record
  count (core.members), back to back. Cut greedily, so the bytes depend
  only on the records, the level and the cap."""
  if not len(framed):
    return from_gzip(gzip_member(b"", level), 0)
  ends = framed_ends(framed)
  view = memoryview(framed)
  out = []
  start = 0
  while start < len(ends):
    base = int(ends[start - 1]) if start else 0
    stop = max(int(np.searchsorted(ends, base + cap, side="right")),
               start + 1)
    out.append(from_gzip(gzip_member(view[base:int(ends[stop - 1])], level),
                         stop - start))
    start = stop
  return b"".join(out)

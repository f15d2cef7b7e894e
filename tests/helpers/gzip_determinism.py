"""What tests/e2e/test_gzip_determinism.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import itertools
import random

import google_crc32c
from isal import isal_zlib


MASK = 0x7FFF  # ISA-L level 2's hash table: 32 Ki slots
ZEROS = google_crc32c.value(b"\0\0\0\0")
# The stream lies within this many bytes of the compressor object's
# start (64 in python-isal 1.9.1).
STREAM_WITHIN = 4096


def _slot(four: bytes) -> int:
  """ISA-L's slot of four bytes: the crc32 instruction's CRC-32C (from 0,
  not inverted) masked."""
  return (google_crc32c.value(four) ^ ZEROS) & MASK


def _address_slots(comp) -> set:
  """The slots that ISA-L's first-byte code may put position 2 in for
  this compressor: crc32((address of its stream) >> 16)."""
  return {_slot(((a >> 16) & 0xFFFFFFFF).to_bytes(4, "little"))
          for a in (id(comp), id(comp) + STREAM_WITHIN)}


def _new():
  return isal_zlib.compressobj(2, isal_zlib.DEFLATED, 31)


def _compress(comp, data: bytes) -> bytes:
  return comp.compress(data) + comp.flush()


def _usual(data: bytes) -> bytes:
  """`data` compressed by a compressor whose address gives none of the
  slots of its positions 0-2. These are the bytes at nearly every
  address."""
  avoid = {_slot(data[i:i + 4]) for i in range(3)}
  held = []  # alive, so each new compressor lies elsewhere
  while True:
    comp = _new()
    if not _address_slots(comp) & avoid:
      return _compress(comp, data)
    held.append(comp)


_FOUR = {}  # slot -> four bytes in it


def _four_bytes_in(slot: int) -> bytes:
  if not _FOUR:
    for v in itertools.count(1 << 24):
      four = v.to_bytes(4, "little")
      _FOUR.setdefault(_slot(four), four)
      if len(_FOUR) == MASK + 1:
        break
  return _FOUR[slot]


def _member(position: int, slot: int, seed: int = 0) -> bytes:
  """About 1 KB whose bytes from `position` (0, 1 or 2) on are in `slot`,
  copied later on without the bytes before them. Whether ISA-L finds
  that position in its hash table changes the compressed bytes."""
  rng = random.Random(seed)
  head = _four_bytes_in(slot) + b"0123456789abcdef"
  filler = rng.randbytes(700)
  return b"QR"[:position] + head + filler + b"\xff\xfe" + head + filler[:300]

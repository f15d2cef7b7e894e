"""The gzip members of a built shard, and what smaller ones would cost:
the evidence for random access into gzip TFRecords (issue 47).

Builds --rows flight rows (the stats suite's data and schema) into one
shard, then prints:
- the members the build writes today (compressed and framed sizes, records
  per member): random access can start only at a member;
- for member caps of 16 KiB to 1 MiB of framed records: the members there
  would be, the shard's size (ISA-L level 2, the build's deflate) against
  today's, and the time to inflate one member (zlib and ISA-L): the cost
  of reading one record at random.
"""

import os
import struct
import sys
import time
import zlib

import numpy as np
from isal import isal_zlib

from common import run
from stats import flights_input

CAPS = (16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20)


def _members(data: bytes):
  """[(framed bytes, records)] and the members' compressed sizes."""
  framed, sizes, pos = [], [], 0
  while pos < len(data):
    inflater = zlib.decompressobj(31)
    raw = inflater.decompress(data[pos:])
    used = len(data) - pos - len(inflater.unused_data)
    framed.append(raw)
    sizes.append(used)
    pos += used
  return framed, np.array(sizes)


def _record_offsets(framed: bytes) -> np.ndarray:
  offsets, i = [], 0
  while i < len(framed):
    offsets.append(i)
    (length,) = struct.unpack_from("<Q", framed, i)
    i += 16 + length
  offsets.append(len(framed))
  return np.array(offsets)


def _inflate_us(member: bytes, inflate) -> float:
  rounds = 200
  started = time.perf_counter()
  for _ in range(rounds):
    inflate(member)
  return (time.perf_counter() - started) / rounds * 1e6


def _capped(framed: bytes, offsets: np.ndarray, cap: int):
  """The members of at most `cap` framed bytes (a record larger: alone)."""
  start = 0
  while start < len(offsets) - 1:
    end = int(np.searchsorted(offsets, offsets[start] + cap,
                              side="right")) - 1
    end = max(end, start + 1)
    deflater = isal_zlib.compressobj(2, isal_zlib.DEFLATED, 31)
    chunk = framed[offsets[start]:offsets[end]]
    yield deflater.compress(chunk) + deflater.flush(), end - start
    start = end


def members_suite(args) -> None:
  src, schema = flights_input(args.workdir, args.rows)
  out = os.path.join(args.workdir, f"members-{args.rows}")
  run([sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema, "--input", src,
       "--output", out, "--overwrite", "--num-shards", "1", "--no-report"])
  with open(os.path.join(out, "train-00000-of-00001.tfrecord.gz"),
            "rb") as f:
    data = f.read()
  pieces, sizes = _members(data)
  framed = b"".join(pieces)
  offsets = _record_offsets(framed)
  records = len(offsets) - 1
  print(f"\nmembers ({records:,} flight records, one shard of "
        f"{len(data):,} bytes, {len(framed) / records:.0f} framed bytes "
        "per record)")
  print(f"today: {len(sizes)} members, median {np.median(sizes):,.0f} bytes "
        f"compressed, {np.median([len(p) for p in pieces]):,.0f} framed")
  print(f"{'cap (framed)':>12} {'members':>8} {'records':>8} "
        f"{'shard bytes':>12} {'vs today':>9} {'zlib us':>8} {'isal us':>8}")
  for cap in CAPS:
    members = list(_capped(framed, offsets, cap))
    total = sum(len(m) for m, _ in members)
    middle = members[len(members) // 2][0]
    print(f"{cap >> 10:>9} KiB {len(members):>8,} "
          f"{records / len(members):>8.0f} {total:>12,} "
          f"{100 * (total / len(data) - 1):>+8.2f}% "
          f"{_inflate_us(middle, lambda m: zlib.decompress(m, 31)):>8.0f} "
          f"{_inflate_us(middle, lambda m: isal_zlib.decompress(m, wbits=31)):>8.0f}")

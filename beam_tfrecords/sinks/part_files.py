"""Parts on their way to a shard: how each travels (INLINE framed items,
a gzip MEMBER, or a PART_FILE path), and part files, written under the
staging folder's PARTS_DIR (core.layout), whose Slices the shuffle
carries instead of the bytes.
"""

import uuid
from typing import NamedTuple

from apache_beam.io.filesystem import CompressionTypes

from beam_tfrecords.core.beam_files import FileSystems

__all__ = ["INLINE", "MEMBER", "PART_FILE", "SPILL_BYTES", "open_part",
           "read_part", "Slice", "read_slice", "resolved", "write_part"]


# Compressed parts (and uncompressed ones of codecs without gzip) at least
# this large go to part files (see Gathered and WriteShards).
SPILL_BYTES = 256 * 1024


# How a part travels to its shard's writer.
INLINE, MEMBER, PART_FILE = 0, 1, 2


def open_part(path: str):
  return FileSystems.open(path, compression_type=(
      CompressionTypes.UNCOMPRESSED))


def read_part(path: str) -> bytes:
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED
                        ) as f:
    return f.read()


class Slice(NamedTuple):
  """Where a part's bytes are: `length` bytes at `offset` of a part file
  (what the shuffle carries instead of the bytes)."""
  path: str
  offset: int
  length: int


def read_slice(where: Slice) -> bytes:
  with open_part(where.path) as f:
    f.seek(where.offset)
    return f.read(where.length)


def resolved(part: tuple) -> tuple:
  """A part tuple with its bytes in place of their Slice."""
  if isinstance(part[2], Slice):
    return (part[0], part[1], read_slice(part[2]), part[3], part[4])
  return part


def write_part(directory: str, shard: int, data: bytes) -> str:
  path = FileSystems.join(directory, f"{shard:05d}-{uuid.uuid4().hex}.part")
  with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED
                          ) as f:
    f.write(data)
  return path

"""A batch's records in a part file, for runners that hold a stage's
whole output in memory.

Beam's DaskRunner keeps the result of the encoding task (every record of
its read unit, uncompressed) until all four of its consumers have run,
and runs the encoding tasks first: a 40M-row build held 9.8 GB per
worker (runners.gaps). There the encoder writes each batch's records to
a part file under the staging folder and emits a SpilledRecords, which
reads them back when iterated: what the runner holds is a path and two
numbers per batch.

    records = spill(directory, result.records)   # a Ragged
    list(records) == result.records.to_list()    # True
"""

import uuid
from typing import Iterator, List

import numpy as np
from isal import isal_zlib
from apache_beam.io.filesystem import CompressionTypes

from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.encoding.ragged import Ragged

__all__ = ["SpilledRecords", "spill"]


class SpilledRecords:
  """`count` records in the file at `path`: one zlib stream (ISA-L's
  fastest level) of their count + 1 offsets (int64, little-endian), then
  their bytes back to back. A batch's items: len() and iteration as a
  list of bytes has them. (Compressed: uncompressed, the records of a
  40M-row flights build took 19 GB of the staging folder.)"""

  __slots__ = ("path", "count")

  def __init__(self, path: str, count: int):
    self.path = path
    self.count = count

  def __reduce__(self):
    return SpilledRecords, (self.path, self.count)

  def __repr__(self) -> str:
    return f"SpilledRecords({self.path!r}, {self.count})"

  def __len__(self) -> int:
    return self.count

  def __iter__(self) -> Iterator[bytes]:
    return iter(self.load())

  def load(self) -> List[bytes]:
    """The records, read back."""
    with FileSystems.open(self.path, compression_type=(
        CompressionTypes.UNCOMPRESSED)) as f:
      stored = f.read()
    head = 8 * (self.count + 1)
    try:
      whole = isal_zlib.decompress(stored)
    except Exception as e:  # isal_zlib.error  # pylint: disable=broad-except
      raise IOError(f"{self.path}: a part file of {self.count} records is "
                    f"damaged or cut short ({len(stored):,} bytes: {e})"
                  ) from e
    o = np.frombuffer(whole, dtype="<i8", count=self.count + 1).tolist() \
        if len(whole) >= head else [0]
    if len(o) != self.count + 1 or len(whole) != head + o[-1]:
      raise IOError(f"{self.path}: a part file of {self.count} records "
                    f"holds {len(whole):,} bytes, not {head + o[-1]:,}")
    data = memoryview(whole)[head:]
    return [bytes(data[o[i]:o[i + 1]]) for i in range(self.count)]


def spill(directory: str, records: Ragged) -> SpilledRecords:
  """Writes the records to a new part file in `directory` (any Beam
  file system)."""
  path = FileSystems.join(directory, f"records-{uuid.uuid4().hex}.part")
  offsets = np.asarray(records.offsets, dtype="<i8")
  start = int(offsets[0])
  with FileSystems.create(
      path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
    f.write(isal_zlib.compress(
        (offsets - start).tobytes() +
        records.buf[start:int(offsets[-1])].tobytes(), 0))
  return SpilledRecords(path, len(records))

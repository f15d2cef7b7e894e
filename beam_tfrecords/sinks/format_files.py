"""Shards of a format of its own (core.shard_formats: ArrayRecord's, or
one registered beside it), written by the deterministic sink
(`--file-format array_record`), and the codec of each shard format.

The parts of such a shard travel as those of an uncompressed TFRecord
shard do (`Codec(..., gzip=False, empty_files=True)`: framed records, in
part files past a size), in the same key order, so a shard holds exactly
the records, in exactly the order, of the same build's TFRecord shard.
Only the shard's writer differs: `FormatFiles` unframes the parts into
the format's writer (`write(record)`, `close()`).

A format's writer writes a local file (array-record's writes local files
only), so each shard is built in a local temporary file (deleted after)
and then copied to its path through Beam's FileSystems (the staging
folder may be on gs:// or s3://). A shard is one file (no
`max_shard_size`), and every shard is written, even an empty one, as
TFDS expects every shard its template names. ArrayRecord's bytes are the
same on every run for the same records and options
(core.array_record_files.DEFAULT_OPTIONS says why).

    batches | WriteShards(directory, {"train": 4}, codec_of(ARRAY_RECORD))
    # -> a ShardWritten (split, file, records, bytes) per shard
"""

import functools
import hashlib
import os
import tempfile
from typing import Any, List, Optional

from apache_beam.io.filesystem import CompressionTypes

from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.shard_formats import (TFRECORD_GZIP, TFRECORD_PLAIN,
                                               ShardFormat)
from beam_tfrecords.core.shard_names import shard_name
from beam_tfrecords.core.shard_reader import iter_tfrecord_lists
from beam_tfrecords.core.tfrecord_files import frame_records, unframe_records
from beam_tfrecords.sinks import codec
from beam_tfrecords.sinks.codec import Codec
from beam_tfrecords.sinks.parts import ShardWritten

__all__ = ["FormatFiles", "codec_of"]

_COPY_BYTES = 8 * 1024 * 1024


def codec_of(fmt: ShardFormat, writer_options: Optional[str] = None) -> Codec:
  """How a format's record shards are written: gzip TFRecords, plain
  TFRecords, or a format of its own's files, its writer given
  `writer_options` (None: its default; --array-record-options)."""
  if fmt is TFRECORD_GZIP:
    return codec.TFRECORD_GZIP
  if fmt is TFRECORD_PLAIN:
    return codec.TFRECORD_PLAIN
  return Codec(fmt.suffix, frame_records, gzip=False, empty_files=True,
               files=functools.partial(
                   FormatFiles, fmt=fmt,
                   writer_options=(fmt.default_options
                                   if writer_options is None
                                   else writer_options)))


class FormatFiles:
  """One shard's records as one file of a format of its own.

  Takes the parts `_WriteShardFn` gives a shard writer of a codec without
  gzip, in key order: framed records (`inline`, `member`) and part files
  of framed records (`part_file`), as ShardFiles does. `close()` ends
  the file, copies it to DIR/<split>-00000-of-00004<suffix> and
  describes it.
  """

  def __init__(self, directory: str, split: str, shard: int, n: int,
               codec: Codec, level: Optional[int], limit: Optional[int],
               expected: int = 0, member_cap: int = 0, *,
               fmt: ShardFormat, writer_options: str):
    del level, expected, member_cap  # (gzip's, and the limit's)
    if limit is not None:
      raise ValueError(f"a {fmt.label} shard is one file: no max_bytes")
    self._fmt = fmt
    name = shard_name(split, shard, n, codec.suffix)
    self._path = FileSystems.join(directory, name)
    self._written = ShardWritten(split, name, 0, 0, shard, 0)
    self._writer_options = writer_options
    self._records = 0
    self._local: Optional[str] = None
    self._writer: Any = None
    self.files: List[ShardWritten] = []

  def _open(self) -> None:
    handle, self._local = tempfile.mkstemp(prefix="btr-",
                                           suffix=self._fmt.suffix)
    os.close(handle)
    assert self._fmt.writer is not None  # a format of its own
    self._writer = self._fmt.writer(self._local, self._writer_options)

  def _write(self, records, count: int, what: str) -> None:
    if self._writer is None:
      self._open()
    n = 0
    for record in records:
      self._writer.write(record)
      n += 1
    if n != count:
      raise RuntimeError(  # a defect here: the data is not what was counted
          f"{self._written.file}: {what} held {n:,} records, not the "
          f"{count:,} counted")
    self._records += n

  def inline(self, data: bytes, count: int) -> None:
    """Framed records."""
    self._write(unframe_records(data), count, "a part")

  def member(self, data: bytes, count: int) -> None:
    """Framed records (parts of a codec without gzip are never members)."""
    self.inline(data, count)

  def part_file(self, path: str, size: int, count: int) -> None:
    """A part file of framed records, read a few MB at a time."""
    del size
    lists = iter_tfrecord_lists(path, "none", check_crc=False)
    self._write((r for records in lists for r in records), count,
                f"part file {path}")

  def flush(self) -> None:
    """Nothing waits here: every record went to the writer."""

  def close(self) -> List[ShardWritten]:
    """Ends the file (an empty shard is an empty file of the format),
    copies it to the shard's path and returns its description."""
    if self._writer is None:
      self._open()
    assert self._local is not None  # _open() made it
    try:
      # (array-record's ok() is False once closed; its write() and
      # close() raise RuntimeError on a failure.)
      if not getattr(self._writer, "ok", lambda: True)():
        raise OSError(f"the {self._fmt.label} writer could not write "
                      f"{self._local} (for {self._path})")
      self._writer.close()
      size = os.path.getsize(self._local)
      digest = hashlib.sha256()
      with open(self._local, "rb") as source, FileSystems.create(
          self._path, mime_type="application/octet-stream",
          compression_type=CompressionTypes.UNCOMPRESSED) as copy:
        while True:
          data = source.read(_COPY_BYTES)
          if not data:
            break
          copy.write(data)
          digest.update(data)
    finally:
      os.remove(self._local)
    self.files = [self._written._replace(records=self._records, bytes=size,
                                         sha256=digest.hexdigest())]
    return self.files

  def __del__(self):
    # A shard abandoned by an exception: its temporary file goes too.
    local = getattr(self, "_local", None)
    if local and os.path.exists(local):
      try:
        os.remove(local)
      except OSError:
        pass

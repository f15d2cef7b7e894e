"""File access through Beam's FileSystems (local, gs://, s3://, ...)."""

import gzip
from typing import List, Sequence

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecords.errors import InputError
from beam_tfrecords.sources.base import InputFile

__all__ = ["match_inputs", "open_input", "read_range", "count_lines_before",
           "first_line"]


def match_inputs(patterns: Sequence[str]) -> List[InputFile]:
  """Expands globs to files, sorted by path; each pattern must match a file.

  Raises:
    InputError: a pattern matches nothing (or only directories).
  """
  files = {}
  for pattern in patterns:
    try:
      result = FileSystems.match([pattern])[0]
      metadata = result.metadata_list
    except Exception as e:  # BeamIOError and friends
      raise InputError(f"cannot list input {pattern!r}: {e}") from None
    matched = [m for m in metadata if not m.path.endswith("/")]
    if not matched:
      raise InputError(
          f"input {pattern!r} matches no file; check the path and quote "
          "globs so the shell does not expand them ('data/*.csv')")
    for m in matched:
      files[m.path] = InputFile(m.path, m.size_in_bytes)
  return [files[p] for p in sorted(files)]


def open_input(path: str):
  """A binary file object; .gz/.bz2/... are decompressed transparently."""
  return FileSystems.open(path, compression_type=CompressionTypes.AUTO)


def first_line(path: str, limit: int = 1 << 20) -> bytes:
  """The first line of a file (decompressed), without its newline."""
  try:
    with open_input(path) as f:
      line = f.readline(limit)
  except (OSError, EOFError, gzip.BadGzipFile, Exception) as e:
    raise InputError(f"{path}: cannot read the file: {e}") from None
  return line.rstrip(b"\r\n")


def read_range(path: str, start: int, end: int) -> bytes:
  """The whole lines that *start* in [start, end) of an uncompressed file."""
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED
                        ) as f:
    if start > 0:
      f.seek(start - 1)
      data = f.read(end - start + 1)
      if data[:1] == b"\n":
        data = data[1:]
      else:
        newline = data.find(b"\n", 1)
        if newline < 0 or newline + 1 >= len(data):
          return b""  # no line starts in this range
        data = data[newline + 1:]
    else:
      data = f.read(end)
    if data and not data.endswith(b"\n"):
      data += f.readline()  # the last line started here; finish it
    return data


def count_lines_before(path: str, offset: int, chunk: int = 1 << 22) -> int:
  """How many newlines the first `offset` bytes of a file hold."""
  count = 0
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED
                        ) as f:
    remaining = offset
    while remaining > 0:
      data = f.read(min(chunk, remaining))
      if not data:
        break
      count += data.count(b"\n")
      remaining -= len(data)
  return count

"""Input files on any file system (local, gs://, s3://, ...; beam_tfrecords.core.fs)."""

import bz2
import collections
import gzip
import io
import os
import re
import threading
import zlib
from typing import List, Optional, Sequence, Tuple

import numpy as np
from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.sources.base import InputFile

__all__ = ["match_inputs", "open_input", "open_range", "read_range", "count_lines_before",
           "count_records_before", "first_line"]


def match_inputs(patterns: Sequence[str]) -> List[InputFile]:
  """Expands globs to files, sorted by path; each pattern must match a file.

  Raises:
    InputError: a pattern matches nothing (or only directories).
  """
  files = {}
  for pattern in patterns:
    if "://" not in pattern:
      # Workers (on a cluster, or a portable runner's worker pool) do not
      # run in the launcher's directory: local paths become absolute.
      pattern = os.path.abspath(pattern)
    try:
      metadata = fs.match(pattern)
    except InputError:
      raise  # a folder that cannot be listed, said as such
    except Exception as e:  # BeamIOError and friends
      raise InputError(f"cannot list input {pattern!r}: {e}") from None
    matched = [m for m in metadata if not m.path.endswith("/")]
    if not matched:
      denied = _denied_directory(pattern) if "://" not in pattern else None
      if denied:
        folder, need = denied
        raise InputError(
            f"input {pattern!r}: permission denied: this user cannot "
            f"{need} the directory {folder}, so the files there cannot be "
            "found; give the user read and execute (r-x) permission on it "
            f"(chmod o+rx {folder}, or add the user to its group), or run "
            "the build as a user who can read it")
      raise InputError(
          f"input {pattern!r} matches no file; check the path and quote "
          "globs so the shell does not expand them ('data/*.csv')")
    for m in matched:
      files[m.path] = InputFile(m.path, m.size, m.mtime or 0.0)
  return [files[p] for p in sorted(files)]


def _denied_directory(pattern: str) -> Optional[Tuple[str, str]]:
  """Why a local pattern that matched nothing may have: the directory on
  its way this user may not enter (no x permission) or list (no r), with
  "enter" or "list"; None when nothing is denied (the path is missing).

  Asked only once nothing matched (the listing `fs.match` did cannot
  tell a missing file from one it may not see).
  """
  literal = re.match(r"[^[*?]*", pattern)
  assert literal is not None  # the regex matches the empty string too
  is_glob = literal.group(0) != pattern
  folder = os.path.dirname(literal.group(0) if is_glob else pattern)
  # Each directory from the root down must let us look up the next name.
  chain = [folder] if is_glob else [folder, pattern]
  while os.path.dirname(chain[0]) != chain[0]:
    chain.insert(0, os.path.dirname(chain[0]))
  for parent, child in zip(chain, chain[1:]):
    try:
      os.stat(child)
    except PermissionError:
      return parent, "enter"
    except OSError:  # missing (or not a directory): not a permission
      return None
  if not is_glob:
    return None
  # The glob lists `folder`, and its sub-folders when it reaches into
  # them (a "/" or "**" after the first wildcard).
  rest = pattern[len(folder):].lstrip("/")
  if "/" not in rest and "**" not in rest:
    try:
      with os.scandir(folder):
        return None
    except PermissionError:
      return folder, "list"
    except OSError:
      return None
  denied: List[str] = []

  def on_error(e: OSError) -> None:
    if isinstance(e, PermissionError) and e.filename:
      denied.append(e.filename)

  for _ in os.walk(folder, onerror=on_error):
    if denied:
      break
  return (denied[0], "list") if denied else None


class _Stream(io.RawIOBase):
  """A plain readable stream that turns decompression failures into
  InputErrors naming the file.

  Also adapts Beam's CompressedFile, whose `closed` is a method rather than
  a property (pyarrow, checking `file.closed`, takes it for a closed file).
  """

  def __init__(self, inner, path: str, kind: str):
    super().__init__()
    self._inner = inner
    self._path = path
    self._kind = kind

  def readable(self):
    return True

  def _call(self, fn, *args):
    try:
      return fn(*args)
    except EOFError:
      raise InputError(
          f"{self._path}: the {self._kind} data ends early: the file is "
          "truncated (an interrupted download or copy?); replace it or "
          "leave it out of the inputs. Nothing from this build is "
          "published.") from None
    except (OSError, zlib.error) as e:
      raise InputError(
          f"{self._path}: cannot decompress as {self._kind} ({e}): the file "
          f"is damaged or not {self._kind} despite its name; fix it, rename "
          "it, or leave it out of the inputs") from None

  def read(self, size=-1):
    if size is None or size < 0:
      return self._call(self._inner.read)
    return self._call(self._inner.read, size)

  def readinto(self, buffer):
    data = self.read(len(buffer))
    buffer[:len(data)] = data
    return len(data)

  def readline(self, size=-1):
    return self._call(self._inner.readline)

  def close(self):
    if not self.closed:
      self._inner.close()
    super().close()


_DECOMPRESSORS = {
    ".gz": ("gzip", lambda raw: gzip.GzipFile(fileobj=raw, mode="rb")),
    ".bz2": ("bzip2", lambda raw: bz2.BZ2File(raw, mode="rb")),
}


def open_input(path: str):
  """A binary file object; .gz / .bz2 are decompressed transparently.

  gzip and bzip2 go through Python's own readers, which notice a truncated
  file (EOFError) where a bare zlib stream would just stop early and leave
  the rest of the rows unread without a word.
  """
  for suffix, (kind, opener) in _DECOMPRESSORS.items():
    if path.endswith(suffix):
      raw = fs.open_read(path, fs.UNCOMPRESSED)
      return _Stream(opener(raw), path, kind)
  f = fs.open_read(path, fs.AUTO)
  return _Stream(f, path, "compressed") if callable(
      getattr(f, "closed", None)) else f


def first_line(path: str) -> bytes:
  """The first line of a file (decompressed), without its newline."""
  try:
    with open_input(path) as f:
      line = f.readline()  # Beam's CompressedFile.readline takes no limit
  except InputError:
    raise
  except Exception as e:  # OSError, EOFError, gzip.BadGzipFile, Beam's own
    raise InputError(f"{path}: cannot read the file: {e}") from None
  return line.rstrip(b"\r\n")


class _Window(io.RawIOBase):
  """Bytes [offset, end) of an open file, read as they are asked for."""

  def __init__(self, f, offset: int, end: int):
    super().__init__()
    self._f, self._left = f, end - offset
    f.seek(offset)

  def readable(self) -> bool:
    return True

  def readinto(self, b) -> int:
    data = self._f.read(min(len(b), self._left))
    self._left -= len(data)
    b[:len(data)] = data
    return len(data)

  def close(self) -> None:
    self._f.close()
    super().close()


def open_range(path: str, start: int, end: int):
  """The whole lines that *start* in [start, end) of an uncompressed file,
  as `read_range` gives them, but as a stream that reads them as it is
  read (a range is 64 MB: not held whole).

  Returns:
    (stream, offset): the stream, and the file offset where it begins.
  """
  f = fs.open_read(path, fs.UNCOMPRESSED)
  offset = start
  if start > 0:
    f.seek(start - 1)
    if f.read(1) != b"\n":
      f.readline()  # the line that started before the range
      offset = f.tell()
  if offset >= end:
    f.close()
    return io.BytesIO(b""), end  # no line starts in this range
  f.seek(end - 1)
  stop = end - 1 + len(f.readline())  # the last line started here
  return io.BufferedReader(_Window(f, offset, stop), 1 << 20), offset


def read_range(path: str, start: int, end: int) -> Tuple[bytes, int]:
  """The whole lines that *start* in [start, end) of an uncompressed file.

  Returns:
    (data, offset): the lines, and the file offset where the first begins.
  """
  stream, offset = open_range(path, start, end)
  with stream:
    return stream.read(), offset


def _prefix_chunks(path: str, offset: int, chunk: int):
  """The first `offset` bytes of an uncompressed file, in chunks."""
  with fs.open_read(path, fs.UNCOMPRESSED) as f:
    remaining = offset
    while remaining > 0:
      data = f.read(min(chunk, remaining))
      if not data:
        return
      remaining -= len(data)
      yield data


def count_lines_before(path: str, offset: int, chunk: int = 1 << 22) -> int:
  """How many newlines the first `offset` bytes of a file hold."""
  return sum(data.count(b"\n") for data in _prefix_chunks(path, offset,
                                                          chunk))


# Records counted before the offsets asked so far, per file (path, size,
# modification time): [(offset, records before it, whether the line it is
# in has text so far)], sorted. A unit's first row number counts the
# records before its start; the next unit of the same file counts on from
# the nearest offset below its own instead of from the file's start (the
# units of a file cost one pass over it, not one pass each).
_COUNTED: "collections.OrderedDict[tuple, List[Tuple[int, int, bool]]]" = (
    collections.OrderedDict())
_COUNTED_FILES = 256
_COUNTED_LOCK = threading.Lock()


def _identity(path: str) -> tuple:
  if fs.is_local(path):
    st = os.stat(path)
    return path, st.st_size, st.st_mtime_ns
  info = fs.match(path)
  return (path, info[0].size, info[0].mtime) if info else (path,)


def count_records_before(path: str, offset: int, chunk: int = 1 << 22) -> int:
  """How many non-empty lines end in the first `offset` bytes of a file.

  A line holding nothing or only "\\r" is empty; CSV readers skip those, so
  this is the number of CSV records before `offset` (when no quoted value
  holds a line break, which is when files are read in ranges).
  """
  ident = _identity(path)
  with _COUNTED_LOCK:
    points = _COUNTED.get(ident, [])
    below = [p for p in points if p[0] <= offset]
    start, count, has_text = below[-1] if below else (0, 0, False)
  with fs.open_read(path, fs.UNCOMPRESSED) as f:
    if start:
      f.seek(start)
    remaining = offset - start
    while remaining > 0:
      data = f.read(min(chunk, remaining))
      if not data:
        break
      remaining -= len(data)
      found, has_text = _records_in(data, has_text)
      count += found
  with _COUNTED_LOCK:
    points = _COUNTED.setdefault(ident, [])
    if (offset, count, has_text) not in points:
      points.append((offset, count, has_text))
      points.sort()
    _COUNTED.move_to_end(ident)
    while len(_COUNTED) > _COUNTED_FILES:
      _COUNTED.popitem(last=False)
  return count


def _records_in(data: bytes, has_text: bool) -> Tuple[int, bool]:
  """The non-empty lines that end in `data` (the first one's earlier
  part had text: `has_text`), and whether the line `data` ends in has
  text so far."""
  buf = np.frombuffer(data, dtype=np.uint8)
  newlines = np.flatnonzero(buf == 0x0A)
  if len(newlines) == 0:
    return 0, has_text or bool(np.any(buf != 0x0D))
  if b"\r" not in data:
    # Without \r a line has text when it has a byte: the gaps between
    # newlines, without a pass over every byte.
    has = np.diff(newlines, prepend=-1) > 1
    has[0] = has[0] or has_text
    return int(has.sum()), bool(newlines[-1] != len(data) - 1)
  # Text in each line: bytes other than \r between newlines.
  text = np.cumsum(buf != 0x0D)
  ends = text[newlines] - (buf[newlines] != 0x0D)  # exclude the \n
  starts = np.concatenate(([0], text[newlines[:-1]]))
  has = ends - starts > 0
  has[0] = has[0] or has_text
  return int(has.sum()), bool(np.any(buf[newlines[-1] + 1:] != 0x0D))

"""Reading the files a dataset's rows name (image and .npy paths).

The media encoder (encoding.media.MediaPreparer) knows which file each row
names and what to make of its bytes, but not how to read it: the build
hands it `fetch_files`, which reads through Beam's FileSystems (so gs://
and s3:// work on a cluster) on a small pool of threads shared by the
worker process (reading is I/O bound on object stores), and runs the
encoder's `then` on each file's bytes on the same thread, so decoding
images overlaps reading them.

A file that cannot be read is that row's problem, not the build's: it comes
back as a FetchError whose message names the path and says why.
"""

import concurrent.futures
import threading
from typing import Callable, List, Optional, Sequence, TypeVar, Union

from apache_beam.io.filesystem import CompressionTypes

from beam_tfrecords.core.beam_files import FileSystems

__all__ = ["fetch_files", "read_file", "FetchError", "IO_THREADS"]

# Threads per worker process that read files (image / npy paths).
IO_THREADS = 8

T = TypeVar("T")

_pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
_pool_lock = threading.Lock()


class FetchError(OSError):
  """Why one file cannot be read; str(e) is a reason for a person."""


def _io_pool() -> concurrent.futures.ThreadPoolExecutor:
  """The process's reading threads, made on first use (a worker that reads
  no files starts none)."""
  global _pool
  with _pool_lock:
    if _pool is None:
      _pool = concurrent.futures.ThreadPoolExecutor(
          IO_THREADS, thread_name_prefix="beam_tfrecords-io")
    return _pool


def read_file(path: str, limit: int) -> bytes:
  """A whole file through Beam's FileSystems (no decompression).

  Raises:
    FetchError: missing, unreadable, or larger than `limit` bytes.
  """
  try:
    with FileSystems.open(path, compression_type=(
        CompressionTypes.UNCOMPRESSED)) as f:
      data = f.read(limit + 1)
  except Exception as e:  # pylint: disable=broad-except
    try:
      exists = FileSystems.exists(path)
    except Exception:  # pylint: disable=broad-except
      exists = True
    if not exists:
      raise FetchError(f"{path}: no such file") from None
    raise FetchError(f"{path}: cannot be read ({type(e).__name__}: "
                     f"{str(e)[:200]})") from None
  if len(data) > limit:
    raise FetchError(f"{path}: the file is larger than max_record_bytes "
                     f"({limit:,} bytes)")
  return data


def fetch_files(paths: Sequence[str], limit: int,
                then: Callable[[bytes, str], T]
                ) -> List[Union[T, FetchError]]:
  """Per path, in order: then(data, path) of the file's bytes, or the
  FetchError that reading it raised. Files are read (and `then` runs) on
  the I/O threads; an exception `then` raises propagates.

  This is the `fetch` a build gives encoding.media.MediaPreparer.
  """
  def one(path: str) -> Union[T, FetchError]:
    try:
      data = read_file(path, limit)
    except FetchError as e:
      return e
    return then(data, path)

  return list(_io_pool().map(one, paths))

"""ArrayRecord files (`--file-format array_record`) in plain Python: their
records read in order, and the writer's options checked.

An ArrayRecord shard holds the same serialized Example / SequenceExample
records as a TFRecord shard, in the same order, in chunks that array-record
(Grain's and TFDS's random-access format; the `array_record` extra)
compresses itself and indexes in the file's footer.

    for record in read_array_record("out/train-00000-of-00002.array_record"):
      ...

array-record opens local files only, so a file elsewhere (gs://, s3://) is
copied into a local temporary file first. Its reader does not raise on a
missing or foreign file (it reports `ok() == False` and zero records):
`read_array_record` checks and raises.

array-record is not fork-safe. Its readers and writers start threads
(its 64-thread pool, and riegeli's background cleaner of zstd contexts)
whose locks a forked child inherits without the threads: a DataLoader
worker forked after its parent read ArrayRecord shards crashed with
SIGSEGV in riegeli's BackgroundCleaner (absl Mutex::UnlockSlow), in 2 of
3 runs of 300 loaders under load, every worker of that process.
`array_record_module()` so refuses, with an InputError saying what to do,
in a process forked from one that had loaded array-record; torch loaders
of ArrayRecord shards start their workers with "forkserver"
(read.torch.Loader).
"""

import os
import re
import shutil
import sys
import tempfile
from typing import Any, Iterator, List, Optional

from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import InputError

__all__ = ["read_array_record", "is_array_record", "array_record_module",
           "check_options", "compression_of", "open_writer", "open_random",
           "ARRAY_RECORD",
           "ARRAY_RECORD_SUFFIX", "DEFAULT_OPTIONS", "FILE_FORMATS"]

# The values of --file-format (TFDS's words for them).
ARRAY_RECORD = "array_record"
FILE_FORMATS = ("tfrecord", ARRAY_RECORD)
ARRAY_RECORD_SUFFIX = ".array_record"
# One record per chunk: what Grain's and TFDS's random access read one
# record at a time (TFDS writes its ArrayRecord files so). array-record
# 0.8.6 then compresses each chunk with zstd:3 (window_log:20). Its bytes
# do not depend on max_parallelism: the file records max_parallelism:1
# whatever is given, and the chunks are written in order (checked by
# tests/unit/core/test_array_record_files.py).
DEFAULT_OPTIONS = "group_size:1"
# Records per read call: reading a shard in order.
_READ_BATCH = 1024
_COPY_BYTES = 8 * 1024 * 1024
# array-record's compression options, and dataset.json's names for them.
_COMPRESSIONS = {"zstd": "ZSTD", "brotli": "BROTLI", "snappy": "SNAPPY",
                 "uncompressed": "NONE"}


_MODULE = "array_record.python.array_record_module"
# Set in a child forked from a process that had loaded array-record.
_FORKED_FROM_A_USER = False


def _after_fork_in_child() -> None:
  global _FORKED_FROM_A_USER  # pylint: disable=global-statement
  if _MODULE in sys.modules:
    _FORKED_FROM_A_USER = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _refuse_after_fork() -> None:
  """Raises InputError in a process forked from one that had loaded
  array-record."""
  if _FORKED_FROM_A_USER:
    raise InputError(
        "ArrayRecord files cannot be read or written in this process "
        f"(pid {os.getpid()}): it was forked from a process that had "
        "loaded array-record, whose threads do not survive a fork (its "
        "reader can crash the process). Start the workers with "
        "multiprocessing_context='forkserver' or 'spawn' (torch's "
        "DataLoader takes it; Dataset.loader() and IndexedDataset.loader() "
        "do so for ArrayRecord shards), or read the dataset as TFRecord "
        "shards")


def array_record_module() -> Any:
  """array-record's Python module.

  Raises:
    InputError: it is not installed, saying how to install it; or this
      process was forked from one that had loaded it (see the module's
      docstring), saying how to start it instead.
  """
  _refuse_after_fork()
  try:
    # pylint: disable=import-outside-toplevel
    from array_record.python import array_record_module as module
  except ImportError as e:
    raise InputError(
        "ArrayRecord files (--file-format array_record) need array-record: "
        "pip install 'beam-tfrecords[array_record]'") from e
  return module


def open_writer(local: str, writer_options: str) -> Any:
  """array-record's writer of a local file (`write(record)`, `ok()`,
  `close()`), with these writer options."""
  return array_record_module().ArrayRecordWriter(local, writer_options)


def open_random(local: str) -> "RandomReader":
  """A reader of a local file at random (`num_records()`,
  `read(positions)`, `close()`)."""
  return RandomReader(local)


# ArrayRecord positions at least this many in one shard are read by one
# call with the list of them (array_record's reader reads them in
# parallel, but a call costs about 0.5 ms; measured on a 43 MB shard: 1
# index, 2k records/s; 128, 66k/s; 1,024, 145k/s), fewer by one
# `read(i, i + 1)` each (89k/s). Batches of 1,024 over 8 shards (128 a
# shard) measured 30-69k/s by lists and 74-84k/s one by one: the lists pay
# only from a few hundred on.
LIST_READ = 512


class RandomReader:
  """array-record's reader of a local file, without read-ahead: a few
  records one at a time, many by one call (LIST_READ)."""

  def __init__(self, local: str):
    self._reader = array_record_module().ArrayRecordReader(
        local, "readahead_buffer_size:0")

  def num_records(self) -> int:
    return self._reader.num_records()

  def read(self, positions: List[int]) -> List[bytes]:
    _refuse_after_fork()  # (a reader its parent opened)
    if len(positions) >= LIST_READ:
      return list(self._reader.read(positions))
    read = self._reader.read
    return [read(i, i + 1)[0] for i in positions]

  def close(self) -> None:
    self._reader.close()


def random_access_note(writer_options: str) -> Optional[str]:
  """What reading shards written with these options at random costs, if
  more than it should: chunks of more than one record are decompressed
  whole for each record read."""
  sizes = re.findall(r"(?:^|,)group_size:(\d+)", writer_options)
  if not sizes or int(sizes[-1]) <= 1:
    return None
  return (f"its ArrayRecord shards hold {sizes[-1]} records per chunk "
          f"(--array-record-options {writer_options}): each random read "
          "decompresses a whole chunk. Grain's and our random access want "
          "group_size:1 (the default); build again with it for random "
          "access")


def is_array_record(path: str) -> bool:
  """Whether a shard's name says ArrayRecord (`.array_record`)."""
  return path.endswith(ARRAY_RECORD_SUFFIX)


def read_array_record(path: str) -> Iterator[bytes]:
  """The records of one ArrayRecord file, in order.

  Args:
    path: a local path, or any path Beam's file systems open.

  Raises:
    InputError: array-record is not installed.
    ValueError: the file is missing or not an ArrayRecord file.
  """
  module = array_record_module()
  if fs.is_local(path):
    yield from _records(module, path, path)
    return
  with tempfile.TemporaryDirectory(prefix="btr-array-record-") as folder:
    local = os.path.join(folder, "shard" + ARRAY_RECORD_SUFFIX)
    with fs.open_read(path, fs.UNCOMPRESSED) as source, \
        open(local, "wb") as copy:
      shutil.copyfileobj(source, copy, _COPY_BYTES)
    yield from _records(module, local, path)


def _records(module: Any, local: str, path: str) -> Iterator[bytes]:
  if not os.path.isfile(local):
    raise ValueError(f"{path}: no such file")
  reader = module.ArrayRecordReader(local)
  if not reader.ok():
    why = "array-record cannot read it"
    try:
      reader.close()  # raises what went wrong
    except RuntimeError as e:
      why = f"array-record says: {e}"
    raise ValueError(f"{path}: not an ArrayRecord file ({why})")
  try:
    n = reader.num_records()
    for start in range(0, n, _READ_BATCH):
      _refuse_after_fork()  # (a generator its parent started)
      yield from reader.read(start, min(n, start + _READ_BATCH))
  finally:
    reader.close()


def check_options(writer_options: str) -> None:
  """array-record's writer takes these options (--array-record-options).

  Raises:
    InputError: it does not (array-record's message, and the default), or
      array-record is not installed.
  """
  module = array_record_module()
  with tempfile.TemporaryDirectory(prefix="btr-array-record-") as folder:
    try:
      writer = module.ArrayRecordWriter(
          os.path.join(folder, "check" + ARRAY_RECORD_SUFFIX), writer_options)
      writer.close()
    except (ValueError, RuntimeError) as e:
      raise InputError(
          f"--array-record-options {writer_options!r}: array-record says: {e} "
          f"(the default is {DEFAULT_OPTIONS!r})") from None


def compression_of(writer_options: str) -> str:
  """How the chunks of files written with these options are compressed,
  as dataset.json's `compression` says it: ZSTD (array-record's default),
  BROTLI, SNAPPY or NONE (`uncompressed`); array-record refuses options
  that name two."""
  found = "ZSTD"
  for option in writer_options.split(","):
    name = option.split(":", 1)[0].strip()
    found = _COMPRESSIONS.get(name, found)
  return found

"""Which build's dataset a reader reads, and never a mix of two.

An overwrite replaces a dataset's files under the same names (the output
is flat, as readers glob it), so a reader that opened some shards before
the switch and others after would read a mix. Each publish writes its own
`_SUCCESS` (the build key and the run id of the build that published):
that text is the dataset's generation. A reader reads it before and after
dataset.json (one generation's description), and checks it again once it
has opened each file: the switch's first step moves `_SUCCESS` away and
its last writes the new one, so the same text after the open means the
file opened is the generation's own.

On local disk an open file stays the file it was when the switch renames
another over its name: a reader that holds it open reads it whole (tf.data
reads it through /proc/self/fd, see `pinned`). On object stores a file is
read by name, request after request: the generation is checked again when
the file was read to its end.

Why not versioned file names with dataset.json as the pointer (as Delta
and Iceberg do): the names are Beam's WriteToTFRecord names, which other
tools and plain globs read; they stay. A reader of an overwritten dataset
gets the old dataset whole, the new one whole, or DatasetReplacedError
("read it again"), never a silent mix, never a raw file-not-found.
"""

import hashlib
import os
import threading
import time
from collections import OrderedDict
from typing import Callable, Dict, Iterator, Optional, Sequence, Tuple, TypeVar

from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import (DatasetReplacedError, InputError,
                                        MalformedFileError)
from beam_tfrecords.core.layout import JOURNALS, STAGING_PREFIX, SUCCESS

__all__ = ["generation", "consistent", "sealed", "seal_of", "check_sealed",
           "Guard", "Pinned"]

# How long a reader that meets a switch waits for it to end (a local
# switch takes milliseconds) before it says so.
WAIT_SECONDS = 2.0

T = TypeVar("T")


def generation(path: str) -> Optional[str]:
  """The dataset's _SUCCESS text (its generation), None if it has none."""
  try:
    with fs.open_read(fs.join(path, SUCCESS), fs.UNCOMPRESSED) as f:
      return f.read(4096).decode("utf-8", "replace")
  except FileNotFoundError:
    return None
  except OSError:
    if not fs.exists(fs.join(path, SUCCESS)):
      return None
    raise


# _SUCCESS's second line: the SHA-256 of the dataset.json it published.
_SEAL = "dataset.json sha256 "


def sealed(success: str, description: bytes) -> str:
  """_SUCCESS's text for a publish of `description` (dataset.json's
  bytes): the publish's own line, then dataset.json's SHA-256, which
  readers check what they read against (`check_sealed`). A seal in
  `success` already is replaced."""
  line = success.split("\n")[0]
  return f"{line}\n{_SEAL}{hashlib.sha256(description).hexdigest()}\n"


def seal_of(token: str) -> Optional[str]:
  """The dataset.json SHA-256 (hex) a _SUCCESS text seals, None if none
  (a version before the seal)."""
  return next((line[len(_SEAL):].strip() for line in token.splitlines()
               if line.startswith(_SEAL)), None)


def check_sealed(file: str, token: str, description: bytes) -> None:
  """Raises MalformedFileError if dataset.json's bytes (`description`,
  read from `file`) are not the ones the publish whose _SUCCESS text is
  `token` wrote: damaged or changed since (a schema's feature renamed by
  one flipped bit decodes every record wrong, and silently). A _SUCCESS
  of a version before the seal has none to check."""
  want = seal_of(token)
  if want is None:
    return
  got = hashlib.sha256(description).hexdigest()
  if got != want:
    raise MalformedFileError(
        f"{file} is not the dataset.json its build published (its SHA-256 "
        f"is {got[:16]}..., _SUCCESS gives {want[:16]}...): it was damaged "
        "or edited since, and its records would be read by a description "
        "that is not theirs. Restore it from a copy, or build the dataset "
        "again", file)


def _publishing(path: str) -> bool:
  """Whether a publish into `path` is under way (or was cut short): a
  staging folder of ours with a journal."""
  if not fs.is_local(path):
    return any(fs.match(fs.join(path, STAGING_PREFIX + "*", journal))
               for journal in JOURNALS)
  try:
    names = os.listdir(path)
  except OSError:
    return False
  return any(n.startswith(STAGING_PREFIX) and any(
      os.path.exists(os.path.join(path, n, journal)) for journal in JOURNALS)
             for n in names)


def replaced_error(path: str, file: Optional[str] = None
                   ) -> DatasetReplacedError:
  where = f" ({file} was opened)" if file else ""
  return DatasetReplacedError(
      f"{path} was replaced by a newer build while it was read{where}: "
      "what was read so far is the old dataset's, and reading on would mix "
      "the two. Read it again (load, iter_records or RecordStream anew)")


def consistent(path: str, read: Callable[[], T],
               wait: float = WAIT_SECONDS) -> Tuple[T, str]:
  """`read()` (of dataset.json) and the generation it belongs to: the
  same _SUCCESS before and after it. A switch under way is waited for up
  to `wait` seconds.

  Raises:
    InputError: not a finished dataset (no _SUCCESS, no publish under way).
    DatasetReplacedError: it is being replaced, for longer than `wait`.
  """
  deadline = time.monotonic() + wait
  delay = 0.01
  while True:
    before = generation(path)
    if before is not None:
      value = read()
      if generation(path) == before:
        return value, before
    elif not _publishing(path) and generation(path) is None:
      # (looked at again: a publish that ended between the two looks wrote
      # its _SUCCESS before it removed its journal)
      raise InputError(
          f"{path} is not a finished dataset (no _SUCCESS file); its build "
          "failed, was killed or is still running")
    if time.monotonic() > deadline:
      raise DatasetReplacedError(
          f"{path} is being replaced by a new build right now (a publish "
          f"is under way, or one was cut short: the next build into it "
          "finishes it); read it again in a moment")
    time.sleep(delay)
    delay = min(delay * 2, 0.2)


class Guard:
  """The generations a reader read (dataset folder -> _SUCCESS text), and
  the check of a file against its dataset's."""

  def __init__(self, generations: Dict[str, Optional[str]]):
    # Longest first: a file belongs to the deepest folder that holds it.
    self._generations = OrderedDict(sorted(
        generations.items(), key=lambda kv: -len(kv[0])))
    # A local dataset's _SUCCESS as last seen to be its generation's:
    # (inode, mtime, size).
    self._stats: Dict[str, Tuple[int, int, int]] = {}

  def generation_of(self, file: str) -> Optional[str]:
    """The generation read of the dataset holding `file` (None: none)."""
    path = self.dataset_of(file)
    return None if path is None else self._generations[path]

  def still(self) -> None:
    """Raises DatasetReplacedError if a dataset is not the generation
    read any more. Cheap enough for every read: on local disk a stat of
    its _SUCCESS, read again only when the stat differs from the last
    one seen; elsewhere nothing (files are checked as they are opened)."""
    for path, want in self._generations.items():
      if want is None or not fs.is_local(path):
        continue
      try:
        st = os.stat(os.path.join(path, SUCCESS))
        seen: Optional[Tuple[int, int, int]] = (st.st_ino, st.st_mtime_ns,
                                                st.st_size)
      except OSError:
        seen = None
      if seen is not None and self._stats.get(path) == seen:
        continue
      if generation(path) != want:
        raise replaced_error(path)
      if seen is not None:
        self._stats[path] = seen

  def dataset_of(self, file: str) -> Optional[str]:
    for path in self._generations:
      if file.startswith(path.rstrip("/") + "/"):
        return path
    return None

  def check(self, file: str) -> None:
    """Raises DatasetReplacedError if the dataset holding `file` is not
    the generation read any more."""
    path = self.dataset_of(file)
    if path is None or self._generations[path] is None:
      return
    if generation(path) != self._generations[path]:
      raise replaced_error(path, file)

  def failed(self, file: str, error: BaseException) -> BaseException:
    """What a reader raises when opening or reading `file` failed: the
    dataset's replacement, if that is what happened; a file its
    dataset.json lists and that is not there, said so; else the error."""
    try:
      self.check(file)
    except DatasetReplacedError as replaced:
      replaced.__cause__ = error
      return replaced
    if isinstance(error, FileNotFoundError):
      missing = InputError(
          f"{file} is missing, and its dataset.json lists it: the dataset is "
          "incomplete (a file was removed or renamed after the build, or "
          "dataset.json was changed). Build it again or restore the file")
      missing.__cause__ = error
      return missing
    return error

  def lists(self, file: str, read: Iterator[T]) -> Iterator[T]:
    """A file's reads (an iterator that opens the file at its first
    step), checked: once the file is open, it is the generation's."""
    try:
      first = next(read, None)
    except Exception as e:  # pylint: disable=broad-except
      raise self.failed(file, e) from e
    self.check(file)
    if first is None:
      return
    yield first
    try:
      yield from read
    except Exception as e:  # pylint: disable=broad-except
      raise self.failed(file, e) from e


_PROC_FD = "/proc/self/fd"


class Pinned:
  """Files opened for a reader that names them by path (tf.data): each is
  opened here and checked against its generation, and read through
  /proc/self/fd/N, the inode opened, whatever a switch renames over its
  name later (local disk on Linux: `by_descriptor`); elsewhere by name,
  checked again when read to its end (`close(i)`).

  The reader opens /proc/self/fd/N itself (its own descriptor) as soon as
  it gets the path, in the same step; ours is closed once MAX_OPEN later
  files were opened (or with this object): so a read needs no step per
  file after its last record, and a number is never reused while a reader
  may still be about to open it."""

  MAX_OPEN = 16

  def __init__(self, guard: Guard, files: Sequence[str]):
    self._guard = guard
    self._files = list(files)
    self._open: "OrderedDict[int, Tuple[int, int]]" = OrderedDict()
    self._serial = 0
    self._mutex = threading.Lock()
    self.by_descriptor = os.path.isdir(_PROC_FD) and all(
        fs.is_local(f) for f in self._files)

  def open(self, i: int) -> str:
    """The path to read file i by, once checked."""
    file = self._files[i]
    if not self.by_descriptor:
      self._guard.check(file)
      return file
    try:
      fd = os.open(file, os.O_RDONLY)
    except OSError as e:
      raise self._guard.failed(file, e) from e
    try:
      self._guard.check(file)
    except BaseException:
      os.close(fd)
      raise
    with self._mutex:
      self._serial += 1
      self._open[self._serial] = (i, fd)
      while len(self._open) > self.MAX_OPEN:
        _, (_, old) = self._open.popitem(last=False)
        os.close(old)
    return f"{_PROC_FD}/{fd}"

  def close(self, i: int) -> None:
    """File i, read by name, was read to its end: its generation checked
    again."""
    self._guard.check(self._files[i])

  def __del__(self, _close: Callable[[int], None] = os.close) -> None:
    # os.close bound at definition: at interpreter exit the module's globals
    # may already be None when the last Pinned is collected
    for _, fd in self._open.values():
      try:
        _close(fd)
      except OSError:
        pass

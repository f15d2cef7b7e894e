"""A finished dataset checked against the checksums its build recorded.

    beam-tfrecords verify out/movies          # exit 0: every file intact
    result = btr.verify("s3://bucket/movies") # any Beam file system
    result.ok, result.problems                # [Problem(file, kind, detail)]

Every file dataset.json lists (shards, their indexes, errors/, the
report, statistics.pb, the card, ...) is read once and its size and
SHA-256 compared with what the build took as it wrote it. Each problem
names its file and is one of:

    missing     listed, not there;
    truncated   shorter than listed (a copy cut short);
    resized     longer than listed;
    damaged     the size listed, other bytes (bit rot, a bad copy);
    extra       there, not listed (left by another tool or build);
    croissant   croissant.json disagrees with dataset.json (it records
                dataset.json's own SHA-256, and every shard's), or is not
                a croissant.json a build writes;
    unreadable  not a regular file (a FIFO, a device, a folder, or a
                symbolic link to one: not opened), or it cannot be read
                (no permission).

dataset.json's SHA-256 is in _SUCCESS (the publish seals it; readers
check it too) and in croissant.json; _SUCCESS is the publish's token. A dataset
written before checksums (no `sha256`) has its shards and indexes
checked by size and its other files found, and says so. Files are read
by a few threads at once (hashlib releases the GIL; remote reads wait on
the network).

verify knows the dataset can be replaced while it reads (an overwrite,
core.generations): it reads dataset.json as readers do (the same
_SUCCESS before and after it), and _SUCCESS again once it has read every
file. A dataset replaced meanwhile (or being replaced) is a
DatasetReplacedError, "replaced while verifying": its files were of two
builds, so their sizes say nothing of damage. And it is bounded: only
regular files are read (a local one is stat-ed first), each to at most
one byte more than the size dataset.json gives (or than its size as
listed, where it gives none), so that no file can keep it reading
forever.
"""

import concurrent.futures
import dataclasses
import glob
import hashlib
import os
import stat
from typing import Dict, List, Optional, Sequence, Tuple, Union

from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import (DatasetReplacedError, InputError,
                                        MalformedFileError)
from beam_tfrecords.core.generations import consistent, generation, seal_of
from beam_tfrecords.core.info import DatasetInfo, listed_files
from beam_tfrecords.core.layout import (DATASET_JSON, LOCK_FILE,
                                        STAGING_PREFIX, SUCCESS, UNITS_DIR)
from beam_tfrecords.publish.croissant import checksums_of

__all__ = ["verify", "Verified", "Problem", "KINDS", "lines"]

KINDS = ("missing", "truncated", "resized", "damaged", "extra", "croissant",
         "unreadable")
_THREADS = 4
# Files a finished dataset has besides what dataset.json lists: its own
# description and the publish's token; and what a build in progress puts
# beside it (the output's lock, staging folders, the finished units a
# killed build left for its rerun).
_OWN = (SUCCESS, DATASET_JSON)
_BESIDE = (LOCK_FILE, STAGING_PREFIX, UNITS_DIR + "/")
# What a file that is not a regular one is (stat's tests, in order).
_SPECIAL = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
            (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


@dataclasses.dataclass(frozen=True)
class Problem:
  """One file that is not as the build wrote it."""
  file: str
  kind: str  # one of KINDS
  detail: str

  def line(self) -> str:
    return f"{self.kind}: {self.file}: {self.detail}"


@dataclasses.dataclass(frozen=True)
class Verified:
  """What `verify` found.

  Attributes:
    path: the dataset folder.
    checked: files whose size and SHA-256 matched.
    num_bytes: the bytes read.
    problems: every file not as written, in file order.
    unchecked: files listed without a checksum (a dataset written before
      checksums): their sizes were compared, not their bytes.
  """
  path: str
  checked: int
  num_bytes: int
  problems: Tuple[Problem, ...]
  unchecked: Tuple[str, ...] = ()

  @property
  def ok(self) -> bool:
    return not self.problems


# A listed file as read: (its bytes, the SHA-256 of those read, the bytes
# read: fewer when it is longer than listed); the Problem that kept it
# from being read; None: not there.
Found = Union[Tuple[int, str, int], Problem, None]


def _present(path: str) -> Dict[str, int]:
  """{path relative to the dataset: size} of every file under it."""
  root = path.rstrip("/") + "/"
  out = {}
  # (a local folder's name may hold glob characters: escaped)
  folder = glob.escape(path) if fs.is_local(path) else path
  for f in fs.match(fs.join(folder, "**")):
    if f.path.endswith("/"):  # a "folder" made in a bucket's console
      continue
    name = f.path[len(root):] if f.path.startswith(root) else f.path
    out[name] = f.size
  return out


def _wanted(info: DatasetInfo) -> Dict[str, Tuple[Optional[int],
                                                  Optional[str]]]:
  """What dataset.json lists, with the size and SHA-256 it gives (None:
  not recorded: a dataset written before checksums)."""
  out: Dict[str, Tuple[Optional[int], Optional[str]]] = {
      name: (None, None) for name in listed_files(info.to_json())}
  out.update(info.file_checksums())
  return out


def _special(file: str, mode: int) -> str:
  """What a file that is not a regular one is, in words."""
  what = next((name for test, name in _SPECIAL if test(mode)),
              "not a regular file")
  return what + (" (through a symbolic link)" if os.path.islink(file)
                 else "")


def _read(path: str, name: str, size: Optional[int],
          listed: Optional[int]) -> Found:
  """A listed file's (bytes, SHA-256, bytes read). A local file is
  stat-ed first, and read only if it is a regular one; any is read to at
  most one byte past `size` (the size dataset.json gives; else its size
  as found): enough to tell that it is longer, and a file that grows as
  it is read cannot keep verify reading."""
  file = fs.join(path, name)
  try:
    if fs.is_local(file):
      found = os.stat(file)
      if not stat.S_ISREG(found.st_mode):
        return Problem(name, "unreadable", f"{_special(file, found.st_mode)}"
                       ", not a regular file: not read")
      listed = found.st_size  # (newer than the listing)
    limit = (size if size is not None else listed or 0) + 1
    got, sha = fs.sha256_of(file, limit=limit)
  except FileNotFoundError:
    return None
  except OSError as e:
    return Problem(name, "unreadable", f"cannot be read ({e.strerror or e})")
  # Cut at the limit: longer than that (its size as found, if more).
  return (max(got, listed or 0) if got == limit else got), sha, got


def _compare(name: str, want: Tuple[Optional[int], Optional[str]],
             found: Found) -> Optional[Problem]:
  size, sha = want
  if found is None:
    return Problem(name, "missing", "listed in dataset.json, not there")
  if isinstance(found, Problem):
    return found
  got_size, got_sha, _ = found
  if size is not None and got_size < size:
    return Problem(name, "truncated",
                   f"{got_size:,} bytes, {size:,} written")
  if size is not None and got_size > size:
    return Problem(name, "resized", f"{got_size:,} bytes, {size:,} written")
  if sha is not None and got_sha != sha:
    return Problem(name, "damaged", f"SHA-256 {got_sha[:16]}..., "
                   f"{sha[:16]}... written: its bytes changed")
  return None


def _described(path: str) -> Tuple[DatasetInfo, Tuple[int, str]]:
  """dataset.json, typed (its `generation` set), and its own (bytes,
  SHA-256): read as readers read it, the same _SUCCESS before and after.

  Raises:
    InputError: not a finished dataset, or no dataset.json.
    MalformedFileError: its dataset.json is not one a build writes.
    DatasetReplacedError: it is being replaced (for over 2 s).
  """
  file = fs.join(path, DATASET_JSON)

  def read() -> Optional[bytes]:
    try:
      if fs.is_local(file):
        mode = os.stat(file).st_mode
        if not stat.S_ISREG(mode):
          raise MalformedFileError(
              f"{file}: {_special(file, mode)}, not a regular file: not "
              "read", file)
      with fs.open_read(file, fs.UNCOMPRESSED) as f:
        return f.read()
    except FileNotFoundError:
      return None  # (said below, unless a switch took it: read again)

  data, token = consistent(path, read)
  if data is None:
    raise InputError(f"{path} has a _SUCCESS file and no {DATASET_JSON}: "
                     "it is not a dataset a build published, or it lost "
                     "its description; build it again")
  info = DatasetInfo.from_bytes(data, file)
  return (dataclasses.replace(info, generation=token),
          (len(data), hashlib.sha256(data).hexdigest()))


def _croissant(path: str, info: DatasetInfo, dataset_json: Tuple[int, str],
               listed: int) -> List[Problem]:
  """croissant.json against dataset.json: dataset.json's own SHA-256 and
  every file's it repeats."""
  name = info.croissant
  assert name is not None
  file = fs.join(path, name)
  try:
    with fs.open_read(file, fs.UNCOMPRESSED) as f:
      described = checksums_of(f.read(listed + 1), file)
  except OSError as e:
    return [Problem(name, "croissant", f"cannot be read ({e})")]
  except MalformedFileError as e:
    # (the line names the file: the message without it)
    return [Problem(name, "croissant", str(e)[len(file):].lstrip(": "))]
  want = {DATASET_JSON: dataset_json[1]}
  want.update((n, s) for n, (_, s) in info.file_checksums().items() if s)
  problems = []
  for file_name, sha in described.items():
    if file_name in want and sha != want[file_name]:
      problems.append(Problem(
          name, "croissant", f"gives {file_name} the SHA-256 "
          f"{str(sha)[:16]}..., which is {want[file_name][:16]}..."
          + (" (dataset.json was changed since it was published)"
             if file_name == DATASET_JSON else "")))
  return problems


def _replaced(path: str) -> DatasetReplacedError:
  return DatasetReplacedError(
      f"{path} was replaced while verifying: a newer build published over "
      "it (or is publishing) after its dataset.json was read, so the files "
      "read were not all of the build it describes, and their sizes and "
      "checksums say nothing of damage. Verify it again")


def verify(path: str, beam_args: Optional[Sequence[str]] = None,
           threads: int = _THREADS) -> Verified:
  """Checks every file of a finished dataset against dataset.json.

  Args:
    path: the dataset folder, on any Beam file system.
    beam_args: Beam's options for its file systems (--s3_endpoint_url,
      credentials, ...), when not set already.
    threads: files read at once.

  Raises:
    InputError: not a finished dataset (no _SUCCESS) or no dataset.json.
    MalformedFileError: its dataset.json is not one a build writes (named).
    DatasetReplacedError: a newer build replaced it while it was read
      ("replaced while verifying": verify it again), or is replacing it.
  """
  if beam_args:
    # pylint: disable=import-outside-toplevel
    from beam_tfrecords.core.beam_files import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions
    FileSystems.set_options(PipelineOptions(list(beam_args)))
  path = path.rstrip("/") if len(path) > 1 else path
  info, own = _described(path)
  wanted = _wanted(info)
  present = _present(path)
  # (a local name not listed may still be there: a folder, a dangling
  # link; stat says which)
  names = sorted(n for n in wanted if n in present or fs.is_local(path))
  with concurrent.futures.ThreadPoolExecutor(max(1, threads)) as pool:
    found = dict(zip(names, pool.map(
        lambda n: _read(path, n, wanted[n][0], present.get(n)), names)))
  problems = [p for p in (_compare(n, wanted[n], found.get(n))
                          for n in sorted(wanted)) if p is not None]
  expected = set(wanted) | set(_OWN) | (
      {info.croissant} if info.croissant else set())
  problems += [Problem(n, "extra", f"{present[n]:,} bytes, not listed in "
                       "dataset.json") for n in sorted(present)
               if n not in expected and not n.startswith(_BESIDE)]
  if info.croissant and isinstance(found.get(info.croissant), tuple):
    problems += _croissant(path, info, own, present.get(info.croissant, 0))
  seal = seal_of(info.generation or "")
  if seal is not None and seal != own[1]:
    problems.append(Problem(DATASET_JSON, "damaged", (
        f"SHA-256 {own[1][:16]}..., _SUCCESS gives {seal[:16]}... (changed "
        "since it was published)")))
  if generation(path) != info.generation:
    raise _replaced(path)
  # (croissant.json has no checksum of its own: it is checked against
  # dataset.json instead, so it is not "unchecked".)
  unchecked = tuple(n for n in sorted(wanted)
                    if wanted[n][1] is None and n != info.croissant)
  bad = {p.file for p in problems}
  sums = [f for f in found.values() if isinstance(f, tuple)]
  return Verified(path, sum(1 for n in names if n not in bad
                            and wanted[n][1] is not None
                            and isinstance(found[n], tuple)),
                  sum(read for _, _, read in sums) + own[0],
                  tuple(sorted(problems, key=lambda p: (p.file, p.kind))),
                  unchecked)


def lines(result: Verified) -> Sequence[str]:
  """The lines `beam-tfrecords verify` prints."""
  out = [p.line() for p in result.problems]
  if result.unchecked:
    out.append(f"note: {len(result.unchecked)} file(s) have no checksum "
               "(written before beam-tfrecords recorded them): their sizes "
               "were compared where dataset.json gives one (shards and "
               "indexes), the others only found")
  if result.ok:
    out.append(f"{result.path}: {result.checked} file(s) intact "
               f"({result.num_bytes:,} bytes read)")
  else:
    out.append(f"{result.path}: {len(result.problems)} problem(s); "
               f"{result.checked} file(s) intact")
  return out

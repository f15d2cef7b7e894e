"""A finished dataset checked against the checksums its build recorded.

    beam-tfrecords verify out/movies          # exit 0: every file intact
    result = btr.verify("s3://bucket/movies") # any Beam file system
    result.ok, result.problems                # [Problem(file, kind, detail)]

Every file dataset.json lists (shards, their indexes, errors/, the
report, statistics.pb, the card, ...) is read once and its size and
SHA-256 compared with what the build took as it wrote it. Each problem
names its file and is one of:

    missing    listed, not there;
    truncated  shorter than listed (a copy cut short);
    resized    longer than listed;
    damaged    the size listed, other bytes (bit rot, a bad copy);
    extra      there, not listed (left by another tool or build);
    croissant  croissant.json disagrees with dataset.json (it records
               dataset.json's own SHA-256, and every shard's).

dataset.json and _SUCCESS have no checksum of their own: croissant.json
holds dataset.json's, and _SUCCESS is the publish's token. A dataset
written before checksums (no `sha256`) has its shards and indexes
checked by size and its other files found, and says so. Files are read
by a few threads at once (hashlib releases the GIL; remote reads wait on
the network).
"""

import concurrent.futures
import dataclasses
import glob
import json
from typing import Dict, List, Optional, Sequence, Tuple

from beam_tfrecords.core import fs
from beam_tfrecords.core.info import DATASET_JSON, DatasetInfo, listed_files
from beam_tfrecords.read.window import finished

__all__ = ["verify", "Verified", "Problem", "KINDS", "lines"]

KINDS = ("missing", "truncated", "resized", "damaged", "extra", "croissant")
_THREADS = 4
# Files a finished dataset has besides what dataset.json lists: its own
# description and the publish's token; and what a build in progress puts
# beside it (the output's lock, staging folders).
_OWN = ("_SUCCESS", DATASET_JSON)
_BESIDE = (".beam-tfrecords.lock", ".staging-")


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


def _compare(name: str, want: Tuple[Optional[int], Optional[str]],
             found: Optional[Tuple[int, str]]) -> Optional[Problem]:
  size, sha = want
  if found is None:
    return Problem(name, "missing", "listed in dataset.json, not there")
  got_size, got_sha = found
  if size is not None and got_size < size:
    return Problem(name, "truncated",
                   f"{got_size:,} bytes, {size:,} written")
  if size is not None and got_size > size:
    return Problem(name, "resized", f"{got_size:,} bytes, {size:,} written")
  if sha is not None and got_sha != sha:
    return Problem(name, "damaged", f"SHA-256 {got_sha[:16]}..., "
                   f"{sha[:16]}... written: its bytes changed")
  return None


def _croissant(path: str, info: DatasetInfo,
               dataset_json: Tuple[int, str]) -> List[Problem]:
  """croissant.json against dataset.json: dataset.json's own SHA-256 and
  every file's it repeats."""
  name = info.croissant
  assert name is not None
  try:
    with fs.open_read(fs.join(path, name), fs.UNCOMPRESSED) as f:
      described = json.loads(f.read().decode("utf-8"))
  except (OSError, ValueError) as e:
    return [Problem(name, "croissant", f"cannot be read as JSON ({e})")]
  want = {DATASET_JSON: dataset_json[1]}
  want.update((n, s) for n, (_, s) in info.file_checksums().items() if s)
  problems = []
  for entry in described.get("distribution", []):
    if entry.get("@type") != "cr:FileObject":
      continue
    file, sha = entry.get("contentUrl"), entry.get("sha256")
    if file in want and sha != want[file]:
      problems.append(Problem(
          name, "croissant", f"gives {file} the SHA-256 {str(sha)[:16]}..., "
          f"which is {want[file][:16]}..."
          + (" (dataset.json was changed since it was published)"
             if file == DATASET_JSON else "")))
  return problems


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
  """
  if beam_args:
    # pylint: disable=import-outside-toplevel
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions
    FileSystems.set_options(PipelineOptions(list(beam_args)))
  path = path.rstrip("/") if len(path) > 1 else path
  info = finished(path)
  wanted = _wanted(info)
  present = _present(path)
  names = sorted(n for n in wanted if n in present)
  with concurrent.futures.ThreadPoolExecutor(max(1, threads)) as pool:
    sums = dict(zip(names, pool.map(lambda n: fs.sha256_of(fs.join(path, n)),
                                    names)))
    own = pool.submit(fs.sha256_of, fs.join(path, DATASET_JSON)).result()
  problems = [p for p in (_compare(n, wanted[n], sums.get(n))
                          for n in sorted(wanted)) if p is not None]
  expected = set(wanted) | set(_OWN) | (
      {info.croissant} if info.croissant else set())
  problems += [Problem(n, "extra", f"{present[n]:,} bytes, not listed in "
                       "dataset.json") for n in sorted(present)
               if n not in expected and not n.startswith(_BESIDE)]
  if info.croissant and info.croissant in present:
    problems += _croissant(path, info, own)
  # (croissant.json has no checksum of its own: it is checked against
  # dataset.json instead, so it is not "unchecked".)
  unchecked = tuple(n for n in sorted(wanted)
                    if wanted[n][1] is None and n != info.croissant)
  bad = {p.file for p in problems}
  return Verified(path, sum(1 for n in names if n not in bad
                            and wanted[n][1] is not None),
                  sum(s for s, _ in sums.values()) + own[0],
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

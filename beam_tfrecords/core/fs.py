"""Paths on any file system, importing Apache Beam only where needed.

Local paths (no `scheme://`) are read with the standard library; others
(gs://, s3://, hdfs://, ...) through Beam's FileSystems, imported on first
use. So `inspect`, `validate` and `infer-schema` on local files start in a
fraction of a second instead of the two seconds an import of Beam takes.

`match` follows Beam's own rules for local patterns (a `*` stays inside one
folder, `**` crosses folders, `?` is one character, `[...]` a class; a
pattern without wildcards names one path; a trailing `/` means its files),
so a glob matches the same files here as in a build.
"""

import bz2
import fnmatch
import glob
import gzip
import hashlib
import io
import lzma
import os
import re
import shutil
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from beam_tfrecords.core.errors import InputError

__all__ = ["FileInfo", "is_local", "join", "exists", "open_read", "match",
           "write_bytes", "sha256_of", "copy", "link_or_copy", "delete",
           "AUTO", "GZIP", "UNCOMPRESSED"]

# Compression names, as Beam's CompressionTypes spells them.
AUTO, GZIP, UNCOMPRESSED = "auto", "gzip", "uncompressed"
# Local files whose suffix names a compression the standard library reads
# (Beam also knows .deflate and .zst: those go through Beam).
_OPENERS: Dict[str, Callable[..., io.BufferedIOBase]] = {
    ".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open,
    ".lzma": lzma.open}
_BEAM_ONLY_SUFFIXES = (".deflate", ".zst", ".zstd")


class FileInfo(NamedTuple):
  path: str
  size: int
  mtime: float


def is_local(path: str) -> bool:
  return "://" not in path


def _beam() -> Any:
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.core.beam_files import FileSystems
  return FileSystems


def join(base: str, *names: str) -> str:
  if is_local(base):
    return os.path.join(base, *names)
  return _beam().join(base, *names)


def exists(path: str) -> bool:
  if is_local(path):
    return os.path.exists(path)
  return _beam().exists(path)


def open_read(path: str,
              compression: str = AUTO) -> io.BufferedIOBase:
  """A binary reader; `compression` auto (by the suffix), gzip or
  uncompressed."""
  lower = path.lower()
  if not is_local(path) or (compression == AUTO
                            and lower.endswith(_BEAM_ONLY_SUFFIXES)):
    return _beam().open(path, compression_type=compression)
  if compression == GZIP:
    return gzip.open(path, "rb")
  if compression == AUTO:
    for suffix, opener in _OPENERS.items():
      if lower.endswith(suffix):
        return opener(path, "rb")
  return open(path, "rb")


def sha256_of(path: str, read_bytes: int = 8 << 20,
              limit: Optional[int] = None) -> Tuple[int, str]:
  """(bytes, SHA-256 hex) of a file as stored (a .gz one not inflated),
  read `read_bytes` at a time; of its first `limit` bytes at most, when
  given (so that a file that grows while it is read cannot keep the
  reader forever)."""
  digest = hashlib.sha256()
  size = 0
  with open_read(path, UNCOMPRESSED) as f:
    while limit is None or size < limit:
      data = f.read(read_bytes if limit is None
                    else min(read_bytes, limit - size))
      if not data:
        break
      size += len(data)
      digest.update(data)
  return size, digest.hexdigest()


def write_bytes(path: str, data: bytes) -> None:
  """Writes a small file whole (a local one through a temporary name, so
  it is never seen half-written)."""
  if not is_local(path):
    with _beam().create(path) as f:
      f.write(data)
    return
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  temp = f"{path}.tmp-{os.getpid()}"
  with open(temp, "wb") as f:
    f.write(data)
  os.replace(temp, path)


def copy(source: str, target: str, read_bytes: int = 8 << 20) -> None:
  """Copies a file: by the store itself where both are on one remote file
  system (GCS and S3 copy server side), else streamed."""
  if not is_local(source) and (source.split("://")[0]
                               == target.split("://")[0]):
    _beam().copy([source], [target])
    return
  if is_local(target):
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    writer: Any = open(target, "wb")
  else:
    writer = _beam().create(target)
  with open_read(source, UNCOMPRESSED) as f, writer:
    while True:
      data = f.read(read_bytes)
      if not data:
        break
      writer.write(data)


def link_or_copy(source: str, target: str) -> None:
  """Local `target` as a hard link of `source` (the same inode: no byte
  copied), or a copy where the two are on different file systems or
  links are refused."""
  try:
    os.link(source, target)
  except OSError:
    shutil.copyfile(source, target)


def delete(paths: List[str]) -> None:
  """Deletes files (local ones with os.remove; a missing one is not an
  error), others through Beam's FileSystems (paths, not globs). On GCS,
  where a server refuses batch requests (the batch endpoint is not part
  of every GCS API server: fake-gcs-server, emulators), one request per
  object instead."""
  remote = [glob.escape(p) for p in paths if not is_local(p)]
  for path in paths:
    if is_local(path):
      try:
        os.remove(path)
      except FileNotFoundError:
        pass
  if not remote:
    return
  gcs = [p for p in remote if p.startswith("gs://")]
  if remote != gcs or not _NO_GCS_BATCHES:
    try:
      _beam().delete(remote)
      return
    except Exception as e:  # pylint: disable=broad-except
      if not (gcs and remote == gcs and _refused_batch(e)):
        raise
      _NO_GCS_BATCHES.append(True)
  client = _gcsio()
  for path in gcs:
    client.delete(path)


# Set once a GCS server refused a batch request (this process).
_NO_GCS_BATCHES: List[bool] = []


def _refused_batch(error: BaseException) -> bool:
  """Whether a failed FileSystems call on GCS was a batch request the
  server did not answer as one (google-cloud-storage's ValueError "Bad
  response:  not multi-part", possibly wrapped)."""
  while error is not None:
    if "not multi-part" in str(error):
      return True
    error = error.__cause__ or error.__context__  # type: ignore
  return False


def _gcsio() -> Any:
  # pylint: disable=import-outside-toplevel
  from apache_beam.io.gcp import gcsio
  from beam_tfrecords.core.beam_files import pipeline_options
  return gcsio.GcsIO(pipeline_options=pipeline_options())


def _regex(pattern: str) -> "re.Pattern":
  """A glob as a regex over whole paths (Beam's local glob rules)."""
  out, i, n = [], 0, len(pattern)
  while i < n:
    c = pattern[i]
    if pattern.startswith("**", i):
      out.append(".*")
      i += 2
      continue
    i += 1
    if c == "*":
      out.append(r"[^/\\]*")
    elif c == "?":
      out.append(".")
    elif c == "[":
      j = i + (1 if pattern[i:i + 1] in ("!", "]") else 0)
      j = pattern.find("]", j + (1 if pattern[j:j + 1] == "]" else 0))
      if j < 0:
        out.append(r"\[")
        continue
      body = pattern[i:j].replace("\\", "\\\\")
      if body.startswith("!"):
        body = "^" + body[1:]
      elif body.startswith("^"):
        body = "\\" + body
      out.append(f"[{body}]")
      i = j + 1
    else:
      out.append(re.escape(c))
  return re.compile("(?ms)" + "".join(out) + r"\Z")


def _could_hold(pattern: str, root: str, folder: str) -> bool:
  """Whether files under `folder` (found walking from `root`) could match
  the local `pattern`: a `**` crosses folders; else each of the folder's
  names must match the pattern's name at its depth."""
  if "**" in pattern:
    return True
  rel = os.path.relpath(folder, root or ".").split(os.sep)
  wanted = os.path.relpath(pattern, root or ".").split(os.sep)
  return len(rel) < len(wanted) and all(
      fnmatch.fnmatchcase(name, want) for name, want in zip(rel, wanted))


def match(pattern: str) -> List[FileInfo]:
  """The files a pattern names, sorted by path."""
  if not is_local(pattern):
    result = _beam().match([pattern])[0]
    return sorted((FileInfo(m.path, m.size_in_bytes,
                            m.last_updated_in_seconds)
                   for m in result.metadata_list), key=lambda f: f.path)
  if pattern.endswith("/"):
    pattern += "*"
  literal = re.match(r"[^[*?]*", pattern)
  assert literal is not None  # the regex matches the empty string too
  prefix = literal.group(0)
  if prefix == pattern:
    if not os.path.exists(pattern):
      return []
    return [FileInfo(pattern, os.path.getsize(pattern),
                     os.path.getmtime(pattern))]
  wanted = _regex(pattern)
  root = os.path.dirname(prefix)
  found = []

  def unreadable(error: OSError) -> None:
    # A folder that could hold matches and cannot be listed: never
    # silently fewer files.
    if isinstance(error, PermissionError) and error.filename and \
        _could_hold(pattern, root, str(error.filename)):
      folder = error.filename
      raise InputError(
          f"input {pattern!r}: permission denied: this user cannot list "
          f"the directory {folder}, so the files there cannot be found; "
          "give the user read and execute (r-x) permission on it (chmod "
          f"o+rx {folder}, or add the user to its group), or run the build "
          "as a user who can read it")
  for folder, _, names in os.walk(root or ".", onerror=unreadable):
    for name in names:
      path = os.path.join(folder, name) if root else os.path.relpath(
          os.path.join(folder, name))
      if wanted.match(path):
        try:
          found.append(FileInfo(path, os.path.getsize(path),
                                os.path.getmtime(path)))
        except OSError:  # gone since listed
          pass
  return sorted(found, key=lambda f: f.path)

"""The file operations of a publish: each announced first (a test hook,
the lock guard), each done the cheapest way for its file system: os calls
on local disk, one reused client on S3, Beam's FileSystems elsewhere.
"""

import functools
import json
import os
from typing import Any, Callable, Optional


from beam_tfrecords.core import fs
from beam_tfrecords.core.beam_files import FileSystems, pipeline_options

__all__ = ["before_operation", "guard", "local", "join", "s3_client",
           "exists", "op", "move", "remove", "write", "read", "read_json"]

# Called before each file operation of a publish with (operation, paths):
# tests set it to kill the process there.
before_operation: Optional[Callable[[str, tuple], None]] = None


def local(path: str) -> bool:
  return "://" not in path


def join(base: str, name: str) -> str:
  return FileSystems.join(base, *name.split("/"))


@functools.lru_cache(maxsize=2)
def _s3io_for(pipeline_options: Any) -> Any:
  from apache_beam.io.aws import s3io  # pylint: disable=import-outside-toplevel
  return s3io.S3IO(options=pipeline_options)


def s3_client(path: str) -> Any:
  """One of Beam's S3IO for s3:// paths (its calls that FileSystems has
  not: list_files, delete_files, rename), None for other paths."""
  if not path.startswith("s3://"):
    return None
  # The options the build gave FileSystems (endpoint, credentials).
  return _s3io_for(pipeline_options())


def exists(path: str) -> bool:
  if local(path):
    return os.path.exists(path)
  s3 = s3_client(path)
  return s3.exists(path) if s3 else FileSystems.exists(path)


# The publish in progress checks, before each file operation, that its
# build still holds the output's lock (renewing it): set by
# `journal.publish(guard=...)`.
guard: Optional[Callable[[], None]] = None


def op(name: str, *paths: str) -> None:
  if before_operation is not None:
    before_operation(name, paths)
  if guard is not None:
    guard()


def move(src: str, dst: str) -> None:
  op("move", src, dst)
  if local(src):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.rename(src, dst)  # atomic (both are inside the output folder)
  elif s3_client(src):
    s3_client(src).rename(src, dst)  # copy, then delete
  else:
    # Copy, then delete: what FileSystems.rename does, one object at a
    # time (GCS's rename sends even one copy in a batch request, which
    # some GCS API servers, fake-gcs-server among them, do not take).
    fs.copy(src, dst)
    fs.delete([src])


def remove(path: str) -> None:
  op("delete", path)
  if s3_client(path):
    s3_client(path).delete(path)
    return
  fs.delete([path])  # (escaped: FileSystems.delete takes globs)


def write(path: str, text: str) -> None:
  op("write", path)
  if local(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)
    os.replace(tmp, path)  # whole or absent
  else:
    s3 = s3_client(path)
    with (s3.open(path, "wb") if s3 else FileSystems.create(path)) as f:
      f.write(text.encode("utf-8"))  # object stores: whole or absent


def read(path: str, limit: int = -1) -> bytes:
  if local(path):
    with open(path, "rb") as f:
      return f.read(limit)
  s3 = s3_client(path)
  with (s3.open(path, "rb") if s3 else FileSystems.open(path)) as f:
    return f.read(limit)


def read_json(path: str) -> Any:
  return json.loads(read(path).decode("utf-8"))

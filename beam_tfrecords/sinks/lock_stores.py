"""Where an output's lock lives: one small object with create-if-absent,
compare-and-swap replace and compare-and-delete, on each file system.

- local disk: created by `link()` of a finished temporary file (O_EXCL
  where a mount has no hard links); replaced by renaming a new file over
  it, and removed, under `flock` on the lock file;
- s3://: PutObject with `If-None-Match: *`, then `If-Match: <ETag>`;
- gs://: uploads and deletes with generation preconditions;
- other file systems (hdfs://, ...): Beam's FileSystems, exists-then-
  create: not atomic (a warning says so).
"""

import contextlib
import errno
import fcntl
import logging
import os
import uuid

from beam_tfrecords.errors import OutputBusyError

__all__ = ["store_for"]

_LOG = logging.getLogger(__name__)


# -- stores: create-if-absent, read, compare-and-swap, compare-and-delete.
# A token is what a compare checks: the content (local), ETag (S3) or
# generation (GCS).

class _LocalStore:

  def __init__(self, path: str):
    self.path = path

  def create(self, data: bytes):
    tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as f:
      f.write(data)
    try:
      os.link(tmp, self.path)  # atomic; fails if the lock exists
    except FileExistsError:
      return None
    except OSError as e:
      if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
        raise
      # No hard links (some FUSE / SMB mounts): O_EXCL, then the content.
      try:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o664)
      except FileExistsError:
        return None
      with os.fdopen(fd, "wb") as f:
        f.write(data)
    finally:
      os.unlink(tmp)
    return data

  @contextlib.contextmanager
  def _held(self):
    """The lock file's descriptor under flock, None if there is none (the
    inode checked: a file unlinked meanwhile is not the lock any more)."""
    for _ in range(100):
      try:
        fd = os.open(self.path, os.O_RDWR)
      except FileNotFoundError:
        yield None
        return
      except PermissionError:
        raise OutputBusyError(
            f"cannot open the lock {self.path} to check or renew it "
            "(permission denied): another user's build holds it, or the "
            "folder is not writable for you") from None
      try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
          linked = os.stat(self.path)
        except FileNotFoundError:
          linked = None
        mine = os.fstat(fd)
        if linked is None or (linked.st_ino, linked.st_dev) == (
            mine.st_ino, mine.st_dev):
          yield fd if linked is not None else None
          return
      finally:
        os.close(fd)
    raise OSError(f"{self.path} keeps changing")

  @staticmethod
  def _content(fd) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0)

  def read(self):
    with self._held() as fd:
      if fd is None:
        return None
      data = self._content(fd)
      return data, data

  def replace(self, data: bytes, token):
    with self._held() as fd:
      if fd is None or self._content(fd) != token:
        return None
      # A new file renamed over the lock: never a half-written lock (a
      # waiting flock sees the inode change and looks again).
      tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
      with open(tmp, "wb") as f:
        f.write(data)
      os.rename(tmp, self.path)
      return data

  def delete(self, token) -> bool:
    with self._held() as fd:
      if fd is None or self._content(fd) != token:
        return False
      os.unlink(self.path)
      return True


class _S3Store:

  def __init__(self, path: str, options):
    # pylint: disable=import-outside-toplevel
    from apache_beam.io.aws.clients.s3.boto3_client import Client
    self.client = Client(options).client
    self.bucket, _, self.key = path[len("s3://"):].partition("/")

  @staticmethod
  def _failed(e) -> bool:
    code = getattr(e, "response", {}).get("Error", {}).get("Code", "")
    return code in ("PreconditionFailed", "412", "NoSuchKey", "404",
                    "ConditionalRequestConflict", "409")

  def create(self, data: bytes):
    try:
      return self.client.put_object(Bucket=self.bucket, Key=self.key,
                                    Body=data, IfNoneMatch="*")["ETag"]
    except Exception as e:  # pylint: disable=broad-except
      if self._failed(e):
        return None
      raise

  def read(self):
    try:
      got = self.client.get_object(Bucket=self.bucket, Key=self.key)
    except Exception as e:  # pylint: disable=broad-except
      if self._failed(e):
        return None
      raise
    return got["Body"].read(), got["ETag"]

  def replace(self, data: bytes, token):
    try:
      return self.client.put_object(Bucket=self.bucket, Key=self.key,
                                    Body=data, IfMatch=token)["ETag"]
    except Exception as e:  # pylint: disable=broad-except
      if self._failed(e):
        return None
      raise

  def delete(self, token) -> bool:
    try:
      self.client.delete_object(Bucket=self.bucket, Key=self.key,
                                IfMatch=token)
      return True
    except Exception as e:  # pylint: disable=broad-except
      if self._failed(e):
        return False
      raise


class _GcsStore:

  def __init__(self, path: str, options):
    # pylint: disable=import-outside-toplevel
    from apache_beam.io.gcp.gcsio import GcsIO
    from google.api_core import exceptions
    self._skip = (exceptions.PreconditionFailed, exceptions.NotFound)
    bucket, _, key = path[len("gs://"):].partition("/")
    self.blob_of = lambda: GcsIO(pipeline_options=options).client.bucket(
        bucket).blob(key)

  def create(self, data: bytes):
    blob = self.blob_of()
    try:
      blob.upload_from_string(data, if_generation_match=0)
    except self._skip[0]:  # PreconditionFailed: it exists (a missing
      return None          # bucket's NotFound is raised)
    return blob.generation

  def read(self):
    blob = self.blob_of()
    try:
      data = blob.download_as_bytes()
    except self._skip:
      return None
    return data, blob.generation

  def replace(self, data: bytes, token):
    blob = self.blob_of()
    try:
      blob.upload_from_string(data, if_generation_match=token)
    except self._skip:
      return None
    return blob.generation

  def delete(self, token) -> bool:
    try:
      self.blob_of().delete(if_generation_match=token)
      return True
    except self._skip:
      return False


class _BeamStore:
  """Any other file system through Beam's FileSystems: not atomic."""

  def __init__(self, path: str):
    # pylint: disable=import-outside-toplevel
    from apache_beam.io.filesystems import FileSystems
    self.fs, self.path = FileSystems, path

  def create(self, data: bytes):
    if self.fs.exists(self.path):
      return None
    with self.fs.create(self.path) as f:
      f.write(data)
    return data

  def read(self):
    if not self.fs.exists(self.path):
      return None
    with self.fs.open(self.path) as f:
      data = f.read()
    return data, data

  def replace(self, data: bytes, token):
    current = self.read()
    if current is None or current[1] != token:
      return None
    with self.fs.create(self.path) as f:
      f.write(data)
    return data

  def delete(self, token) -> bool:
    current = self.read()
    if current is None or current[1] != token:
      return False
    self.fs.delete([self.path])
    return True


def store_for(path: str, options):
  if "://" not in path:
    return _LocalStore(path)
  if path.startswith("s3://"):
    return _S3Store(path, options)
  if path.startswith("gs://"):
    return _GcsStore(path, options)
  _LOG.warning("%s: this file system has no create-if-absent; the output "
               "lock is checked, not atomic (two builds starting within "
               "the same moment could both run)", path)
  return _BeamStore(path)

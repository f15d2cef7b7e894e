"""One build at a time per output: a lock object with a lease.

`OUTPUT/.beam-tfrecords.lock` holds who builds there (run id, host, pid,
start time) and when the owner last renewed its lease. It is created with
the store's create-if-absent primitive and renewed, taken over and removed
with compare-and-swap (the stores below), so two builds can never both
hold it.

A lock is stale when its owner's lease expired (no renewal for
`lease_seconds`), or at once when its owner ran on this host (same boot,
same pid namespace) and its process has ended. A build takes a stale lock over (with a log line); a
live one makes it fail with `OutputBusyError` naming the owner.
"""

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any, Dict, Iterator, Optional, Tuple

from beam_tfrecords.core.errors import OutputBusyError
from beam_tfrecords.core.layout import LOCK_FILE

__all__ = ["OutputLock", "LEASE_SECONDS", "store_for", "new_run"]


# Where an output's lock lives: one small object with create-if-absent,
# compare-and-swap replace and compare-and-delete, on each file system.

_LOG = logging.getLogger(__name__)


# -- stores: create-if-absent, read, compare-and-swap, compare-and-delete.
# A token is what a compare checks: the content (local), ETag (S3) or
# generation (GCS).
Token = Any
# Beam's PipelineOptions (not imported here: `verify` of a local folder
# imports no Beam).
BeamOptions = Any

class _LocalStore:

  def __init__(self, path: str):
    self.path = path

  def create(self, data: bytes) -> Optional[Token]:
    tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
    try:
      with open(tmp, "wb") as f:
        f.write(data)
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
      # Also when the temporary file could not be written (a full disk).
      with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    return data

  @contextlib.contextmanager
  def _held(self) -> Iterator[Optional[int]]:
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
  def _content(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0)

  def read(self) -> Optional[Tuple[bytes, Token]]:
    with self._held() as fd:
      if fd is None:
        return None
      data = self._content(fd)
      return data, data

  def replace(self, data: bytes, token: Token) -> Optional[Token]:
    with self._held() as fd:
      if fd is None or self._content(fd) != token:
        return None
      # Rewritten in place under the flock (every reader takes it first,
      # so none sees it half-written): a renewal allocates nothing, and a
      # full disk cannot make it fail (the lease must not be the write
      # that fails in the middle of a publish).
      os.pwrite(fd, data, 0)
      os.ftruncate(fd, len(data))
      return data

  def delete(self, token: Token) -> bool:
    with self._held() as fd:
      if fd is None or self._content(fd) != token:
        return False
      os.unlink(self.path)
      return True


class _S3Store:

  def __init__(self, path: str, pipeline_options: BeamOptions):
    # pylint: disable=import-outside-toplevel
    from apache_beam.io.aws.clients.s3.boto3_client import Client
    self.client = Client(pipeline_options).client
    self.bucket, _, self.key = path[len("s3://"):].partition("/")

  @staticmethod
  def _failed(e: BaseException) -> bool:
    code = getattr(e, "response", {}).get("Error", {}).get("Code", "")
    return code in ("PreconditionFailed", "412", "NoSuchKey", "404",
                    "ConditionalRequestConflict", "409")

  def create(self, data: bytes) -> Optional[Token]:
    try:
      return self.client.put_object(Bucket=self.bucket, Key=self.key,
                                    Body=data, IfNoneMatch="*")["ETag"]
    except Exception as e:  # pylint: disable=broad-except
      if self._failed(e):
        return None
      raise

  def read(self) -> Optional[Tuple[bytes, Token]]:
    try:
      got = self.client.get_object(Bucket=self.bucket, Key=self.key)
    except Exception as e:  # pylint: disable=broad-except
      if self._failed(e):
        return None
      raise
    return got["Body"].read(), got["ETag"]

  def replace(self, data: bytes, token: Token) -> Optional[Token]:
    try:
      return self.client.put_object(Bucket=self.bucket, Key=self.key,
                                    Body=data, IfMatch=token)["ETag"]
    except Exception as e:  # pylint: disable=broad-except
      if self._failed(e):
        return None
      raise

  def delete(self, token: Token) -> bool:
    try:
      self.client.delete_object(Bucket=self.bucket, Key=self.key,
                                IfMatch=token)
      return True
    except Exception as e:  # pylint: disable=broad-except
      if self._failed(e):
        return False
      raise


class _GcsStore:

  def __init__(self, path: str, pipeline_options: BeamOptions):
    # pylint: disable=import-outside-toplevel
    from apache_beam.io.gcp.gcsio import GcsIO
    from google.api_core import exceptions
    self._skip = (exceptions.PreconditionFailed, exceptions.NotFound)
    bucket, _, key = path[len("gs://"):].partition("/")
    self.blob_of = lambda: GcsIO(
        pipeline_options=pipeline_options).client.bucket(
        bucket).blob(key)

  def create(self, data: bytes) -> Optional[Token]:
    blob = self.blob_of()
    try:
      blob.upload_from_string(data, if_generation_match=0)
    except self._skip[0]:  # PreconditionFailed: it exists (a missing
      return None          # bucket's NotFound is raised)
    return blob.generation

  def read(self) -> Optional[Tuple[bytes, Token]]:
    blob = self.blob_of()
    try:
      data = blob.download_as_bytes()
    except self._skip:
      return None
    return data, blob.generation

  def replace(self, data: bytes, token: Token) -> Optional[Token]:
    blob = self.blob_of()
    try:
      blob.upload_from_string(data, if_generation_match=token)
    except self._skip:
      return None
    return blob.generation

  def delete(self, token: Token) -> bool:
    try:
      self.blob_of().delete(if_generation_match=token)
      return True
    except self._skip:
      return False


class _BeamStore:
  """Any other file system through Beam's FileSystems: not atomic."""

  def __init__(self, path: str):
    # pylint: disable=import-outside-toplevel
    from beam_tfrecords.core.beam_files import FileSystems
    self.fs, self.path = FileSystems, path

  def create(self, data: bytes) -> Optional[Token]:
    if self.fs.exists(self.path):
      return None
    with self.fs.create(self.path) as f:
      f.write(data)
    return data

  def read(self) -> Optional[Tuple[bytes, Token]]:
    if not self.fs.exists(self.path):
      return None
    with self.fs.open(self.path) as f:
      data = f.read()
    return data, data

  def replace(self, data: bytes, token: Token) -> Optional[Token]:
    current = self.read()
    if current is None or current[1] != token:
      return None
    with self.fs.create(self.path) as f:
      f.write(data)
    return data

  def delete(self, token: Token) -> bool:
    current = self.read()
    if current is None or current[1] != token:
      return False
    self.fs.delete([self.path])
    return True


def store_for(path: str, pipeline_options: BeamOptions) -> Any:
  if "://" not in path:
    return _LocalStore(path)
  if path.startswith("s3://"):
    return _S3Store(path, pipeline_options)
  if path.startswith("gs://"):
    return _GcsStore(path, pipeline_options)
  _LOG.warning("%s: this file system has no create-if-absent; the output "
               "lock is checked, not atomic (two builds starting within "
               "the same moment could both run)", path)
  return _BeamStore(path)


# A build renews its lease every LEASE_SECONDS / 4; a lock not renewed for
# LEASE_SECONDS is stale (clocks of builds on different hosts must agree
# to well within this).
LEASE_SECONDS = 120.0

def _boot_id() -> str:
  try:
    with open("/proc/sys/kernel/random/boot_id") as f:
      return f.read().strip()
  except OSError:
    return ""


def _pid_namespace() -> str:
  """This process's pid namespace (containers on one host have their own:
  a pid says something only inside the same one)."""
  try:
    return str(os.stat("/proc/self/ns/pid").st_ino)
  except OSError:
    return ""


def _pid_start(pid: int) -> Optional[str]:
  """The process's start time in clock ticks since boot (tells a reused
  pid from the owner), None where /proc does not say."""
  try:
    with open(f"/proc/{pid}/stat") as f:
      # The command name (field 2) may hold spaces: count after its ")".
      return f.read().rsplit(")", 1)[1].split()[19]
  except (OSError, IndexError):
    return None


def _alive(pid: int, started: Optional[str]) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # someone else's process: it exists
    pass
  now = _pid_start(pid)
  return started is None or now is None or now == started


def describe(info: Dict[str, Any], now: Optional[float] = None) -> str:
  """The lock's owner, in words."""
  now = time.time() if now is None else now
  try:
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC",
                            time.gmtime(float(info["started"])))
    return (f"run {info['run']} on host {info['host']}, pid {info['pid']}, "
            f"started {started}, lease renewed "
            f"{max(0, now - float(info['renewed'])):.0f} s ago")
  except (KeyError, TypeError, ValueError):
    return f"an unreadable lock ({str(info)[:200]})"


def stale_reason(info: Dict[str, Any], now: Optional[float] = None
                 ) -> Optional[str]:
  """Why the lock's owner is no longer running; None if it may be."""
  now = time.time() if now is None else now
  try:
    host, pid = info["host"], int(info["pid"])
    renewed, lease = float(info["renewed"]), float(info["lease_seconds"])
  except (KeyError, TypeError, ValueError):
    return None  # unreadable: judged by how long it stays so (acquire)
  if (host == socket.gethostname() and info.get("boot") == _boot_id()
      and info.get("pid_ns") == _pid_namespace()
      and not _alive(pid, info.get("pid_start"))):
    return f"its process (pid {pid} on this host) has ended"
  if now - renewed > lease:
    return f"its lease expired {now - renewed - lease:.0f} s ago"
  return None


def new_run() -> str:
  """A new build's run id (its lock's, and its staging folder's name)."""
  return uuid.uuid4().hex[:12]


class OutputLock:
  """The lock of one output, held by this build (`acquire`)."""

  def __init__(self, output: str, pipeline_options: BeamOptions = None,
               lease_seconds: float = LEASE_SECONDS,
               run: Optional[str] = None):
    self.output = output
    self.path = (os.path.join(output, LOCK_FILE) if "://" not in output
                 else output + "/" + LOCK_FILE)
    self.lease_seconds = lease_seconds
    # The build's run id: new, or given (a pipeline step taking the lock
    # for the build that planned it). A lock that holds it is this
    # build's: taken again (a retried step), it is adopted (_create).
    self.run = run or new_run()
    self._store = store_for(self.path, pipeline_options)
    self._token = None
    self._lost: Optional[str] = None
    self._stop = threading.Event()
    self._thread: Optional[threading.Thread] = None
    self._created_folder = False
    self._released = False
    self._mutex = threading.Lock()
    self._renewed_at = 0.0
    self.started = time.time()

  def _content(self, started: float) -> bytes:
    return json.dumps({
        "tool": "beam-tfrecords", "run": self.run,
        "host": socket.gethostname(), "boot": _boot_id(),
        "pid_ns": _pid_namespace(), "pid": os.getpid(),
        "pid_start": _pid_start(os.getpid()), "started": started,
        "renewed": time.time(), "lease_seconds": self.lease_seconds,
        "output": self.output}, sort_keys=True).encode("utf-8")

  def _mine(self) -> Optional[Any]:
    """The lock's token if it holds this build's run id (a client retry
    after a write that landed sees a failed compare), else None."""
    current = self._store.read()
    if current is None:
      return None
    try:
      run = json.loads(current[0].decode("utf-8")).get("run")
    except (ValueError, AttributeError):
      return None
    return current[1] if run == self.run else None

  def _create(self) -> Optional[Token]:
    for _ in range(3):
      if "://" not in self.output and not os.path.isdir(self.output):
        os.makedirs(self.output, exist_ok=True)
        self._created_folder = True
      try:
        token = self._store.create(self._content(self.started))
      except FileNotFoundError:  # the folder was removed meanwhile
        continue
      return token if token is not None else self._mine()
    return None

  def acquire(self) -> "OutputLock":
    """Takes the lock (a stale one is taken over) and starts renewing it.

    Raises:
      OutputBusyError: another build that may still be running holds it.
    """
    try:
      return self._acquire()
    except BaseException:
      if self._created_folder:  # made for the lock: only if still empty
        with contextlib.suppress(OSError):
          os.rmdir(self.output)
      raise

  def _acquire(self) -> "OutputLock":
    for _ in range(10):
      self._token = self._create()
      if self._token is not None:
        break
      current = self._store.read()
      if current is None:  # released meanwhile: try again
        continue
      data, token = current
      try:
        info = json.loads(data.decode("utf-8"))
        readable = isinstance(info, dict)
      except ValueError:
        readable = False
      if not readable:
        raise OutputBusyError(
            f"{self.output}: the lock {self.path} is not a lock this tool "
            f"wrote ({data[:80]!r}); remove it if no build is running")
      why = stale_reason(info)
      if why is None:
        raise OutputBusyError(
            f"{self.output} is being built by another build ({describe(info)}"
            f"; lock {self.path}). Two builds into one output would mix "
            "their files: wait for it to end. If it died, its lock is taken "
            "over once its lease has not been renewed for "
            f"{info.get('lease_seconds', self.lease_seconds):.0f} s (at once "
            "on the same host); remove the lock file only if you are sure no "
            "build is running")
      self._token = (self._store.replace(self._content(self.started), token)
                     or self._mine())
      if self._token is not None:
        _LOG.warning("%s: took over the lock of a build that is not running "
                     "(%s): %s", self.output, describe(info), why)
        break
    else:
      raise OutputBusyError(f"{self.output}: could not take the lock "
                            f"{self.path}; other builds keep taking it")
    self._renewed_at = time.monotonic()
    self._thread = threading.Thread(target=self._renew, daemon=True,
                                    name="beam-tfrecords-lock")
    self._thread.start()
    return self

  def renew(self) -> bool:
    """Renews the lease now (compare-and-swap); False if the lock is not
    this build's any more."""
    with self._mutex:
      if self._lost or self._released or self._token is None:
        return False
      token = (self._store.replace(self._content(self.started), self._token)
               or self._mine())
      if token is None:
        if self._store.read() is None:
          # Released by the pipeline's last step, which published.
          self._released = True
        else:
          self._lost = ("another build took the lock over (this build's "
                        "lease was not renewed in time)")
          _LOG.error("%s: %s", self.path, self._lost)
        return False
      self._token = token
      self._renewed_at = time.monotonic()
      return True

  def _renew(self) -> None:
    while not self._stop.wait(self.lease_seconds / 4):
      try:
        if not self.renew():
          return
      except Exception as e:  # pylint: disable=broad-except
        _LOG.warning("could not renew the lock %s (will retry): %s",
                     self.path, e)

  def check(self) -> None:
    """Raises OutputBusyError unless this build still holds the lock (the
    lease is renewed on the way)."""
    if not self.renew() and not self._lost:
      self._lost = "the lock was removed or taken over by another build"
    if self._lost:
      raise OutputBusyError(f"{self.output}: {self._lost}; this build "
                            "publishes nothing")

  def release(self) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
    with self._mutex:
      if self._token is not None and self._lost is None \
          and not self._released:
        try:
          if not self._store.delete(self._token):
            # Renewed meanwhile by the pipeline's last step: still ours.
            mine = self._mine()
            if mine is not None:
              self._store.delete(mine)
        except Exception:  # pylint: disable=broad-except
          _LOG.warning("could not remove the lock %s", self.path,
                       exc_info=True)
      self._token = None
    if self._created_folder:
      with contextlib.suppress(OSError):
        os.rmdir(self.output)  # only if empty: nothing was built

  def __enter__(self) -> "OutputLock":
    return self.acquire()

  def __exit__(self, *exc: Any) -> None:
    self.release()

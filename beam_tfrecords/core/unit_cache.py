"""Units of work whose results are kept: what a build reuses when it runs
again after a kill, a failed job or with one more input file.

A build reads its inputs as read units (a file, or a byte range of one:
sources.ReadUnit). What encoding one unit gives (each batch's records,
dead letters, statistics partials and counts) is kept in a store under
the unit's key, a SHA-256 of everything the results depend on: the unit
(path, format, byte range, reader options), its file's size and
modification time, the schema, the options that change records, and the
library's and native core's versions. A store is a folder:

    <store>/<key[:2]>/<key>/00000.batch ... one file per batch
    <store>/<key[:2]>/<key>/unit.json      the unit is complete: its batches

    store = UnitStore("/data/out/.units")
    results = store.load(key)           # [batch results] or None
    store.put(key, 0, result); store.complete(key, batches=1)

A batch file is written whole (a temporary name, then renamed) and holds
its payload's SHA-256: a unit is complete, every batch checked, or it is
computed again (a damaged or missing batch file is a miss, never
published). A unit is complete when unit.json is there and every batch
it counts loads. Entries are compressed by ISA-L's fastest level.

`evict` keeps a store under a size bound, least recently used units
first (`load` marks a unit used); two builds may share a store: entries
are written under new names and renamed, and a unit evicted while a build
loads it is a miss for that build.
"""

import hashlib
import json
import logging
import os
import pickle
import shutil
import time
import uuid
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional

from isal import isal_zlib

from beam_tfrecords.core import fs
from beam_tfrecords.core.layout import UNITS_DIR

_LOG = logging.getLogger(__name__)

__all__ = ["UnitStore", "StoredUnit", "unit_key", "output_units",
           "drop_output_units", "MANIFEST"]

MANIFEST = "unit.json"
_MAGIC = b"BTRUNIT1"
_HEAD = len(_MAGIC) + 32  # magic, SHA-256 of the payload
_SUFFIX = ".batch"


def unit_key(material: Mapping[str, Any]) -> str:
  """The SHA-256 (hex) of what a unit's results depend on, as canonical
  JSON (sorted keys: the same on every machine)."""
  text = json.dumps(material, sort_keys=True, separators=(",", ":"),
                    default=repr)
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


class StoredUnit(NamedTuple):
  """One unit in a store: its key, bytes on disk, batches and when it
  was last used (seconds since the epoch)."""
  key: str
  bytes: int
  batches: int
  used: float


class UnitStore:
  """A folder of units' results (local disk; see the module's docstring).

  Args:
    root: the folder (made when the first unit is written).
  """

  def __init__(self, root: str):
    if not fs.is_local(root):
      raise ValueError(f"{root}: a unit store is a local folder")
    self.root = root

  def _folder(self, key: str) -> str:
    return os.path.join(self.root, key[:2], key)

  def _batch(self, key: str, i: int) -> str:
    return os.path.join(self._folder(key), f"{i:05d}{_SUFFIX}")

  def put(self, key: str, i: int, result: Any) -> bool:
    """Keeps batch `i` of the unit `key` (any picklable value). Keeping
    is an optimization: a file that cannot be written (a full disk) is
    logged and not kept, and False returned; the build goes on."""
    payload = isal_zlib.compress(pickle.dumps(result, protocol=5), 0)
    return self._write(self._batch(key, i),
                       _MAGIC + hashlib.sha256(payload).digest() + payload)

  def complete(self, key: str, batches: int,
               about: Optional[Mapping[str, Any]] = None) -> bool:
    """Marks the unit complete with this many batches (`about`: what the
    unit was, for `units`' readers); False if it could not (as `put`)."""
    text = json.dumps({"batches": batches, "unit": dict(about or {})},
                      sort_keys=True, default=repr)
    return self._write(os.path.join(self._folder(key), MANIFEST),
                       text.encode("utf-8"))

  def _write(self, path: str, data: bytes) -> bool:
    """Writes a file whole (a temporary name, then renamed), or logs why
    not and leaves nothing."""
    temp = f"{path}.tmp-{uuid.uuid4().hex}"
    try:
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open(temp, "wb") as f:
        f.write(data)
      os.replace(temp, path)
      return True
    except OSError as e:
      try:
        os.remove(temp)
      except OSError:
        pass
      _LOG.warning("%s: not kept for reuse (%s)", path, e)
      return False

  def load(self, key: str) -> Optional[List[Any]]:
    """The unit's batch results in order, or None: not complete, or a
    batch file is missing or damaged (then the unit is removed, to be
    computed again)."""
    folder = self._folder(key)
    try:
      with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
        batches = int(json.load(f)["batches"])
    except (OSError, ValueError, KeyError, TypeError):
      return None
    out = []
    for i in range(batches):
      result = self._read(key, i)
      if result is None:
        self.remove(key)
        return None
      out.append(result)
    try:
      os.utime(os.path.join(folder, MANIFEST))  # used now (evict: LRU)
    except OSError:
      pass
    return out

  def _read(self, key: str, i: int) -> Optional[Any]:
    try:
      with open(self._batch(key, i), "rb") as f:
        data = f.read()
    except OSError:
      return None
    payload = data[_HEAD:]
    if (data[:len(_MAGIC)] != _MAGIC
        or hashlib.sha256(payload).digest() != data[len(_MAGIC):_HEAD]):
      return None
    try:
      return pickle.loads(isal_zlib.decompress(payload))
    except Exception:  # pylint: disable=broad-except
      return None

  def has(self, key: str) -> bool:
    """Whether the unit is marked complete (its batches unchecked)."""
    return os.path.exists(os.path.join(self._folder(key), MANIFEST))

  def remove(self, key: str) -> None:
    shutil.rmtree(self._folder(key), ignore_errors=True)

  def units(self) -> Iterator[StoredUnit]:
    """Every complete unit in the store."""
    if not os.path.isdir(self.root):
      return
    for head in sorted(os.listdir(self.root)):
      top = os.path.join(self.root, head)
      if len(head) != 2 or not os.path.isdir(top):
        continue
      for key in sorted(os.listdir(top)):
        folder = os.path.join(top, key)
        manifest = os.path.join(folder, MANIFEST)
        try:
          with open(manifest, encoding="utf-8") as f:
            batches = int(json.load(f)["batches"])
          used = os.stat(manifest).st_mtime
          size = sum(os.path.getsize(os.path.join(folder, n))
                     for n in os.listdir(folder))
        except (OSError, ValueError, KeyError, TypeError):
          continue
        yield StoredUnit(key, size, batches, used)

  def size(self) -> int:
    """Bytes on disk, incomplete units included."""
    total = 0
    for folder, _, names in os.walk(self.root):
      for name in names:
        try:
          total += os.path.getsize(os.path.join(folder, name))
        except OSError:
          pass
    return total

  def evict(self, max_bytes: int, keep: Optional[float] = None
            ) -> List[str]:
    """Removes least recently used complete units until the store holds
    at most `max_bytes` (units used at `keep` or later stay: the running
    build's). Returns the keys removed."""
    units = sorted(self.units(), key=lambda u: u.used)
    total = self.size()
    removed = []
    for unit in units:
      if total <= max_bytes:
        break
      if keep is not None and unit.used >= keep:
        continue
      self.remove(unit.key)
      total -= unit.bytes
      removed.append(unit.key)
    return removed

  def clear(self) -> int:
    """Removes every unit; returns the bytes freed."""
    freed = self.size()
    shutil.rmtree(self.root, ignore_errors=True)
    return freed


def output_units(output: str) -> Optional[str]:
  """An output's own store, `.units/` (--resume), or None for an output
  that is not on local disk."""
  return os.path.join(output, UNITS_DIR) if fs.is_local(output) else None


def drop_output_units(output: str) -> None:
  """Removes an output's `.units/`, if there; never raises."""
  units = output_units(output)
  if units is not None and os.path.isdir(units):
    UnitStore(units).clear()


def describe_store(root: str) -> Dict[str, Any]:
  """{units, batches, bytes, oldest, newest} of a store (the `cache`
  command's summary)."""
  units = list(UnitStore(root).units())
  return {"units": len(units), "batches": sum(u.batches for u in units),
          "bytes": UnitStore(root).size(),
          "oldest": min((u.used for u in units), default=None),
          "newest": max((u.used for u in units), default=None),
          "now": time.time()}

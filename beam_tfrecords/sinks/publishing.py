"""Publishing a committed staging folder into the output, and finishing
publishes that a kill interrupted.

The output is flat (`OUTPUT/train-*.tfrecord.gz`, as readers glob it), so
a switch from an old dataset to a new one is a series of renames, kept
recoverable by a journal (`STAGING/publish.json`, written before the
first rename):

1. the old `_SUCCESS` moves into `STAGING/previous/` (from here on the
   output does not look finished);
2. the old dataset's files (those its dataset.json lists, and itself) move
   into `STAGING/previous/`; a marker file says this step is done;
3. the new files move in, dataset.json last;
4. `_SUCCESS` is written;
5. the staging folder (with the old files) is removed.

Every step is idempotent: a later build into the output (holding its
lock) runs the same steps from the journal, which finishes the switch; a
kill at any point thus ends in the new dataset, whole, and until then the
old one is kept whole in `previous/`. Nothing else in the output is
touched: a file that the new dataset would overwrite and the old one does
not list stops the publish before the first rename.
"""

import functools
import glob
import json
import logging
import os
import re
from typing import Any, Callable, Dict, List, Optional

from apache_beam.io.filesystems import FileSystems

from beam_tfrecords.errors import InputError
from beam_tfrecords.sinks.metadata import (DATASET_JSON, ERRORS_DIR,
                                           STAGING_PREFIX, SUCCESS,
                                           TFT_TEMP_DIR, TRANSFORMED_DIR)
from beam_tfrecords.sinks.shards import PARTS_DIR

__all__ = ["publish", "recover", "remove_staging", "remove_parts",
           "previous_dataset", "check_output_files", "JOURNAL"]

JOURNAL = "publish.json"
PREVIOUS = "previous"
ASIDE_DONE = "ASIDE_DONE"

_LOG = logging.getLogger(__name__)
# Our staging folders' names (a run id of 12 hex digits).
_STAGING_NAME = re.compile(re.escape(STAGING_PREFIX) + "[0-9a-f]{12}")

# Called before each file operation of a publish with (operation, paths):
# tests set it to kill the process there.
before_operation: Optional[Callable[[str, tuple], None]] = None


def _local(path: str) -> bool:
  return "://" not in path


def _join(base: str, name: str) -> str:
  return FileSystems.join(base, *name.split("/"))


@functools.lru_cache(maxsize=2)
def _s3io_for(options):
  from apache_beam.io.aws import s3io  # pylint: disable=import-outside-toplevel
  return s3io.S3IO(options=options)


def _s3(path: str):
  """One S3 client for s3:// paths (Beam's S3 file system makes a new
  boto3 client, ~0.2 s, for every call), None for other paths."""
  if not path.startswith("s3://"):
    return None
  # The options the build gave FileSystems (endpoint, credentials).
  return _s3io_for(FileSystems._pipeline_options)  # pylint: disable=protected-access


def _exists(path: str) -> bool:
  if _local(path):
    return os.path.exists(path)
  s3 = _s3(path)
  return s3.exists(path) if s3 else FileSystems.exists(path)


# The publish in progress checks, before each file operation, that its
# build still holds the output's lock (renewing it): `publish(guard=...)`.
_guard: Optional[Callable[[], None]] = None


def _op(name: str, *paths: str) -> None:
  if before_operation is not None:
    before_operation(name, paths)
  if _guard is not None:
    _guard()


def _move(src: str, dst: str) -> None:
  _op("move", src, dst)
  if _local(src):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.rename(src, dst)  # atomic (both are inside the output folder)
  elif _s3(src):
    _s3(src).rename(src, dst)  # copy, then delete
  else:
    FileSystems.rename([src], [dst])  # copy, then delete


def _remove(path: str) -> None:
  _op("delete", path)
  if _s3(path):
    _s3(path).delete(path)
    return
  # FileSystems.delete matches its arguments as globs: escape [, *, ?.
  FileSystems.delete([glob.escape(path)])


def _write(path: str, text: str) -> None:
  _op("write", path)
  if _local(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)
    os.replace(tmp, path)  # whole or absent
  else:
    s3 = _s3(path)
    with (s3.open(path, "wb") if s3 else FileSystems.create(path)) as f:
      f.write(text.encode("utf-8"))  # object stores: whole or absent


def _read(path: str, limit: int = -1) -> bytes:
  if _local(path):
    with open(path, "rb") as f:
      return f.read(limit)
  s3 = _s3(path)
  with (s3.open(path, "rb") if s3 else FileSystems.open(path)) as f:
    return f.read(limit)


def _read_json(path: str) -> Any:
  return json.loads(_read(path).decode("utf-8"))


def listed(meta: Dict[str, Any]) -> List[str]:
  """The files a dataset.json says its dataset has (relative paths)."""
  names = [shard["file"] for split in meta.get("splits", {}).values()
           for shard in split.get("shards", [])]
  names += [e["file"] for e in meta.get("errors", {}).get("files", [])]
  transform = meta.get("transform", {})
  names += [shard["file"] for split in transform.get("splits", {}).values()
            for shard in split.get("shards", [])]
  names += list(transform.get("files", []))
  for key in ("tfmd_schema", "tfdv_statistics", "report"):
    if meta.get(key):
      names.append(meta[key])
  return names


def _sized_files_under(directory: str) -> List[tuple]:
  """(path, size) of every file under a directory, sorted."""
  if _s3(directory):
    return sorted(_s3(directory).list_files(directory.rstrip("/") + "/"))
  pattern = FileSystems.join(glob.escape(directory), "**")
  return sorted((m.path, m.size_in_bytes)
                for r in FileSystems.match([pattern])
                for m in r.metadata_list)


def _files_under(directory: str) -> List[str]:
  return [path for path, _ in _sized_files_under(directory)]


def _relative(output: str) -> List[str]:
  """Every file in `output`, relative to it."""
  if _local(output):
    if not os.path.isdir(output):
      return []
    return sorted(os.path.relpath(os.path.join(root, f), output)
                  for root, _, files in os.walk(output) for f in files)
  prefix = output.rstrip("/") + "/"
  # Keys ending in "/" are folders made in a console, not files.
  return [p[len(prefix):] for p in _files_under(output)
          if p.startswith(prefix) and not p.endswith("/")]


def previous_dataset(output: str) -> Optional[Dict[str, Any]]:
  """The dataset.json in `output` if a build of ours wrote it."""
  path = FileSystems.join(output, DATASET_JSON)
  if not _exists(path):
    return None
  try:
    meta = _read_json(path)
  except (ValueError, OSError):
    return None
  if not isinstance(meta, dict) or meta.get("tool", {}).get(
      "name") != "beam-tfrecords":
    return None
  return meta


def _old_files(meta: Optional[Dict[str, Any]], present) -> List[str]:
  """The previous dataset's files that exist (relative names)."""
  if meta is None:
    return []
  return [n for n in dict.fromkeys(listed(meta)) if n in present] + [
      DATASET_JSON]


def _ours_success(output: str) -> bool:
  path = FileSystems.join(output, SUCCESS)
  if not _exists(path):
    return False
  try:
    return _read(path, 64).startswith(b"beam-tfrecords")
  except OSError:
    return False


def _success_matches(output: str, text: str) -> bool:
  path = FileSystems.join(output, SUCCESS)
  try:
    return _exists(path) and _read(path).decode("utf-8", "replace") == text
  except OSError:
    return False


def check_output_files(output: str) -> None:
  """Refuses an output folder that holds files but no dataset of ours
  (hidden files, our lock and staging folders aside)."""
  meta = previous_dataset(output)
  if meta is not None:
    return
  others = [n for n in _relative(output)
            if not n.startswith(".") and not (n == SUCCESS
                                              and _ours_success(output))]
  if others:
    shown = ", ".join(others[:5]) + (
        f" and {len(others) - 5} more" if len(others) > 5 else "")
    raise InputError(
        f"output {output} holds files that no beam-tfrecords build wrote "
        f"({shown}); a dataset gets a folder of its own (new, empty, or "
        "holding a dataset of ours): give another --output, or move those "
        "files away")


def publish(staging: str, output: str, meta: Dict[str, Any],
            success_text: str,
            guard: Optional[Callable[[], None]] = None) -> None:
  """Switches `output` from its previous dataset (if any) to the one
  committed in `staging`. The caller holds the output's lock.

  Raises:
    InputError: a file of the new dataset exists in `output` and the
      previous dataset does not list it (nothing was changed).
  """
  global _guard
  journal_path = FileSystems.join(staging, JOURNAL)
  if _exists(journal_path):
    # A retried last step (runners retry a failed bundle): this build's
    # own publish began; finish it.
    _guard = guard
    try:
      _advance(staging, output, _read_json(journal_path))
    finally:
      _guard = None
    return
  if not _relative(staging) and _success_matches(output, success_text):
    return  # a retry after this build's publish ended
  present = set(_relative(output))
  old = _old_files(previous_dataset(output), present)
  new = [n for n in dict.fromkeys(listed(meta)) if n != DATASET_JSON]
  new.append(DATASET_JSON)  # last: the dataset's description
  staged = set(_relative(staging))
  missing = [n for n in new if n not in staged]
  if missing:
    raise RuntimeError(f"staged files are missing: {missing[:3]}; not "
                       "publishing")
  kept = set(old)
  foreign = [n for n in new if n not in kept and n in present]
  if SUCCESS in present and not _ours_success(output):
    foreign.append(SUCCESS)
  if foreign:
    raise InputError(
        f"{output} holds {', '.join(foreign[:3])}, which the new dataset "
        "would overwrite and no dataset of ours lists: nothing was "
        f"published (the new files are in {staging}); move "
        f"{'it' if len(foreign) == 1 else 'them'} away and build again")
  journal = {"old": old, "old_success": _ours_success(output), "new": new,
             "success": success_text}
  _guard = guard
  try:
    _write(FileSystems.join(staging, JOURNAL), _dumps(journal))
    _advance(staging, output, journal)
  finally:
    _guard = None


def _dumps(value: Any) -> str:
  return json.dumps(value, indent=1, sort_keys=True) + "\n"


def _advance(staging: str, output: str, journal: Dict[str, Any]) -> None:
  """Runs the switch's steps from wherever they stopped (idempotent)."""
  previous = FileSystems.join(staging, PREVIOUS)
  aside_done = FileSystems.join(previous, ASIDE_DONE)
  success = FileSystems.join(output, SUCCESS)
  if not _exists(aside_done):
    if not all(_exists(_join(staging, n)) for n in journal["new"]):
      raise InputError(
          f"an interrupted publish into {output} cannot be finished: "
          f"files of the new dataset are missing from {staging}; the "
          "previous dataset is untouched or kept whole in "
          f"{previous}: restore it from there, then remove {staging}")
    if _exists(success):
      _move_once(success, FileSystems.join(previous, SUCCESS))
    for name in journal["old"]:
      _move_once(_join(output, name), _join(previous, name))
    _write(aside_done, "done\n")  # not empty: Beam cannot upload that to S3
    _remove_empty_folders(output, journal["old"])
  lost = [n for n in journal["new"] if not _exists(_join(staging, n))
          and not _exists(_join(output, n))]
  if lost:
    raise InputError(
        f"an interrupted publish into {output} cannot be finished: "
        f"{', '.join(lost[:3])} of the new dataset are gone; the previous "
        f"dataset is kept whole in {previous}: restore it from there, then "
        f"remove {staging}")
  for name in journal["new"]:
    _move_once(_join(staging, name), _join(output, name))
  errors = FileSystems.join(output, ERRORS_DIR)
  if _local(errors):  # errors/ is there even without errors (local disk)
    os.makedirs(errors, exist_ok=True)
  _write(success, journal["success"])
  # The journal goes first: a kill while the staging folder is removed
  # leaves a leftover, not a publish to finish.
  _remove(FileSystems.join(staging, JOURNAL))
  remove_staging(staging)


def _move_once(src: str, dst: str) -> None:
  """Moves src to dst unless that is done; on an object store, a move cut
  short after its copy leaves both (the same bytes): the source goes."""
  if not _exists(src):
    return
  if _exists(dst):
    if _local(src):
      raise RuntimeError(f"cannot move {src}: {dst} exists")
    _remove(src)
    return
  _move(src, dst)


def _remove_empty_folders(output: str, names: List[str]) -> None:
  if not _local(output):
    return  # object stores have no folders
  folders = {os.path.dirname(n) for n in names if "/" in n}
  for folder in sorted(folders, key=len, reverse=True):
    path = os.path.join(output, folder)
    while path != output and os.path.isdir(path) and not os.listdir(path):
      os.rmdir(path)
      path = os.path.dirname(path)


def recover(output: str, keep: str) -> List[str]:
  """Under the output's lock: finishes the publishes of builds that were
  killed while publishing, and removes the staging folders of builds that
  ended without publishing (all but `keep`). Returns what it did, a line
  each (also logged)."""
  done = []
  for name in _staging_folders(output):
    staging = FileSystems.join(output, name)
    if staging.rstrip("/") == keep.rstrip("/"):
      continue
    journal_path = FileSystems.join(staging, JOURNAL)
    if _exists(journal_path):
      _advance(staging, output, _read_json(journal_path))
      line = (f"finished the publish of an earlier build that was "
              f"interrupted ({name})")
    else:
      size = remove_staging(staging)
      line = (f"removed {name}, the staging folder of an earlier build that "
              f"did not finish ({size / 1e6:.1f} MB)")
    _LOG.warning("%s: %s", output, line)
    done.append(line)
  return done


def _staging_folders(output: str) -> List[str]:
  if _local(output):
    if not os.path.isdir(output):
      return []
    return sorted(n for n in os.listdir(output)
                  if _STAGING_NAME.fullmatch(n)
                  and os.path.isdir(os.path.join(output, n)))
  return sorted({n.split("/", 1)[0] for n in _relative(output)
                 if "/" in n and _STAGING_NAME.fullmatch(n.split("/", 1)[0])})


def remove_parts(staging: str) -> None:
  """Deletes the part files of a build (its records' compressed parts);
  what stays in a failed build's staging directory is the shards, errors/
  and dataset.json, for a look."""
  for parts in (FileSystems.join(staging, PARTS_DIR),
                FileSystems.join(staging, ERRORS_DIR, PARTS_DIR),
                FileSystems.join(staging, TRANSFORMED_DIR, PARTS_DIR),
                FileSystems.join(staging, TFT_TEMP_DIR)):
    files = _files_under(parts)
    if files:
      FileSystems.delete(files)
    if FileSystems.exists(parts):  # a directory on local disk
      FileSystems.delete([glob.escape(parts)])


def remove_staging(staging: str) -> int:
  """Deletes a staging directory and everything in it, on any file system
  (object stores have no directories to delete recursively); returns the
  bytes it held."""
  found = _sized_files_under(staging)
  size = sum(size for _, size in found)
  files = [path for path, _ in found]
  if files:
    _op("delete", staging)
    if _s3(staging):
      failed = [(p, e) for p, e in _s3(staging).delete_files(files) if e]
      if failed:
        raise OSError(f"could not delete {failed[0][0]}: {failed[0][1]}")
    else:
      FileSystems.delete(files)
  if _exists(staging):  # a directory on local disk
    FileSystems.delete([glob.escape(staging)])
  return size

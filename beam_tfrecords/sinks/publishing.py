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

import glob
import json
import logging
import os
import re
from typing import Any, Callable, Dict, List, Mapping, Optional

from apache_beam.io.filesystems import FileSystems

from beam_tfrecords.errors import InputError
from beam_tfrecords.sinks.metadata import (DATASET_JSON, ERRORS_DIR,
                                           STAGING_PREFIX, SUCCESS,
                                           TFT_TEMP_DIR, TRANSFORMED_DIR)
from beam_tfrecords.sinks import file_ops as ops
from beam_tfrecords.sinks.shards import PARTS_DIR
from beam_tfrecords.sinks.tfds_files import TFDS_FILES

__all__ = ["publish", "recover", "remove_staging", "remove_parts",
           "previous_dataset", "check_output_files", "JOURNAL"]

JOURNAL = "publish.json"
PREVIOUS = "previous"
ASIDE_DONE = "ASIDE_DONE"

_LOG = logging.getLogger(__name__)
# Our staging folders' names (a run id of 12 hex digits).
_STAGING_NAME = re.compile(re.escape(STAGING_PREFIX) + "[0-9a-f]{12}")

def listed(meta: Mapping[str, Any]) -> List[str]:
  """The files a dataset.json says its dataset has (relative paths; a
  DatasetInfo, or the JSON object of any version's dataset.json)."""
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
  if meta.get("anomalies"):
    names.append(meta["anomalies"]["file"])
  if (meta.get("options") or {}).get("tfds"):
    names += list(TFDS_FILES)
  return names


def _sized_files_under(directory: str) -> List[tuple]:
  """(path, size) of every file under a directory, sorted."""
  if ops.s3_client(directory):
    return sorted(ops.s3_client(directory).list_files(directory.rstrip("/") + "/"))
  pattern = FileSystems.join(glob.escape(directory), "**")
  return sorted((m.path, m.size_in_bytes)
                for r in FileSystems.match([pattern])
                for m in r.metadata_list)


def _files_under(directory: str) -> List[str]:
  return [path for path, _ in _sized_files_under(directory)]


def _relative(output: str) -> List[str]:
  """Every file in `output`, relative to it."""
  if ops.local(output):
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
  if not ops.exists(path):
    return None
  try:
    meta = ops.read_json(path)
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
  if not ops.exists(path):
    return False
  try:
    return ops.read(path, 64).startswith(b"beam-tfrecords")
  except OSError:
    return False


def _success_matches(output: str, text: str) -> bool:
  path = FileSystems.join(output, SUCCESS)
  try:
    return ops.exists(path) and ops.read(path).decode("utf-8", "replace") == text
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


def publish(staging: str, output: str, meta: Mapping[str, Any],
            success_text: str,
            guard: Optional[Callable[[], None]] = None) -> None:
  """Switches `output` from its previous dataset (if any) to the one
  committed in `staging`. The caller holds the output's lock.

  Raises:
    InputError: a file of the new dataset exists in `output` and the
      previous dataset does not list it (nothing was changed).
  """
  journal_path = FileSystems.join(staging, JOURNAL)
  if ops.exists(journal_path):
    # A retried last step (runners retry a failed bundle): this build's
    # own publish began; finish it.
    ops.guard = guard
    try:
      _advance(staging, output, ops.read_json(journal_path))
    finally:
      ops.guard = None
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
  ops.guard = guard
  try:
    ops.write(FileSystems.join(staging, JOURNAL), _dumps(journal))
    _advance(staging, output, journal)
  finally:
    ops.guard = None


def _dumps(value: Any) -> str:
  return json.dumps(value, indent=1, sort_keys=True) + "\n"


def _advance(staging: str, output: str, journal: Dict[str, Any]) -> None:
  """Runs the switch's steps from wherever they stopped (idempotent)."""
  previous = FileSystems.join(staging, PREVIOUS)
  aside_done = FileSystems.join(previous, ASIDE_DONE)
  success = FileSystems.join(output, SUCCESS)
  if not ops.exists(aside_done):
    if not all(ops.exists(ops.join(staging, n)) for n in journal["new"]):
      raise InputError(
          f"an interrupted publish into {output} cannot be finished: "
          f"files of the new dataset are missing from {staging}; the "
          "previous dataset is untouched or kept whole in "
          f"{previous}: restore it from there, then remove {staging}")
    if ops.exists(success):
      _move_once(success, FileSystems.join(previous, SUCCESS))
    for name in journal["old"]:
      _move_once(ops.join(output, name), ops.join(previous, name))
    ops.write(aside_done, "done\n")  # not empty: Beam cannot upload that to S3
    _remove_empty_folders(output, journal["old"])
  lost = [n for n in journal["new"] if not ops.exists(ops.join(staging, n))
          and not ops.exists(ops.join(output, n))]
  if lost:
    raise InputError(
        f"an interrupted publish into {output} cannot be finished: "
        f"{', '.join(lost[:3])} of the new dataset are gone; the previous "
        f"dataset is kept whole in {previous}: restore it from there, then "
        f"remove {staging}")
  for name in journal["new"]:
    _move_once(ops.join(staging, name), ops.join(output, name))
  errors = FileSystems.join(output, ERRORS_DIR)
  if ops.local(errors):  # errors/ is there even without errors (local disk)
    os.makedirs(errors, exist_ok=True)
  ops.write(success, journal["success"])
  # The journal goes first: a kill while the staging folder is removed
  # leaves a leftover, not a publish to finish.
  ops.remove(FileSystems.join(staging, JOURNAL))
  remove_staging(staging)


def _move_once(src: str, dst: str) -> None:
  """Moves src to dst unless that is done; on an object store, a move cut
  short after its copy leaves both (the same bytes): the source goes."""
  if not ops.exists(src):
    return
  if ops.exists(dst):
    if ops.local(src):
      raise RuntimeError(f"cannot move {src}: {dst} exists")
    ops.remove(src)
    return
  ops.move(src, dst)


def _remove_empty_folders(output: str, names: List[str]) -> None:
  if not ops.local(output):
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
    if ops.exists(journal_path):
      _advance(staging, output, ops.read_json(journal_path))
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
  if ops.local(output):
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
    ops.op("delete", staging)
    if ops.s3_client(staging):
      failed = [(p, e) for p, e in ops.s3_client(staging).delete_files(files) if e]
      if failed:
        raise OSError(f"could not delete {failed[0][0]}: {failed[0][1]}")
    else:
      FileSystems.delete(files)
  if ops.exists(staging):  # a directory on local disk
    FileSystems.delete([glob.escape(staging)])
  return size

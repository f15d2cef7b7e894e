"""Publishing a committed staging folder into the output, and finishing
publishes that a kill interrupted.

The output is flat (`OUTPUT/train-*.tfrecord.gz`, as readers glob it), so
a switch from an old dataset to a new one is a series of renames, kept
recoverable by a journal (`STAGING/publish.json`). What the switch needs
is made first, so that the switch itself writes nothing (a full disk
cannot stop it halfway): `previous/` and the folders files move into,
the new `_SUCCESS` (`STAGING/SUCCESS_NEXT`) and the marker of step 2
(`STAGING/ASIDE_DONE`); then the journal, and then only renames:

1. the old `_SUCCESS` moves into `STAGING/previous/` (from here on the
   output does not look finished);
2. the old dataset's files (those its dataset.json lists, and itself) move
   into `STAGING/previous/`; the marker moves there: this step is done;
3. the new files move in, dataset.json last;
4. `SUCCESS_NEXT` becomes the output's `_SUCCESS`: published;
5. the journal is removed, then the staging folder (with the old files).

Every step is idempotent: a later build into the output (holding its
lock) runs the same steps from the journal, which finishes the switch; a
kill at any point thus ends in the new dataset, whole, and until then the
old one is kept whole in `previous/`. A step that fails (an error, not a
kill) is undone instead: the journal becomes `STAGING/rollback.json` and
the renames are reversed (the old dataset back in place, the staging
folder then removed); a rollback cut short is finished by the next build
the same way. After step 4 the dataset is published: a failure while
cleaning up (5) is a warning, the next build removes what is left.
Nothing else in the output is touched: a file that the new dataset would
overwrite and the old one does not list stops the publish before the
first rename.
"""

import errno
import glob
import json
import logging
import os
import re
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional


from beam_tfrecords.core import fs
from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.errors import (InputError, OutputBusyError,
                                        OutputError, PublishInterruptedError)
from beam_tfrecords.core.generations import sealed
from beam_tfrecords.core.info import listed_files
from beam_tfrecords.core.layout import (ASIDE_DONE, CARD_FILE, CROISSANT_FILE,
                                        DATASET_JSON, ERRORS_DIR, JOURNAL,
                                        PARTS_DIR, PREVIEW_DIR, PREVIOUS,
                                        ROLLBACK,
                                        STAGING_PREFIX, SUCCESS, SUCCESS_NEXT,
                                        TFT_TEMP_DIR, TRANSFORMED_DIR)
from beam_tfrecords.publish import file_ops as ops

__all__ = ["publish", "state", "recover", "has_journal", "remove_staging",
           "remove_parts",
           "previous_dataset", "check_output_files"]

_LOG = logging.getLogger(__name__)
# Our staging folders' names (a run id of 12 hex digits).
_STAGING_NAME = re.compile(re.escape(STAGING_PREFIX) + "[0-9a-f]{12}")

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


def _old_files(meta: Optional[Dict[str, Any]],
               present: Collection[str]) -> List[str]:
  """The previous dataset's files that exist (relative names)."""
  if meta is None:
    return []
  return [n for n in dict.fromkeys(listed_files(meta)) if n in present] + [
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
  """Whether the output's _SUCCESS is of the publish whose _SUCCESS text
  is `text`: the same first line (version, build key, run id; the seal of
  its dataset.json follows it, core.generations.sealed)."""
  path = FileSystems.join(output, SUCCESS)
  try:
    return ops.exists(path) and ops.read(path).decode(
        "utf-8", "replace").split("\n")[0] == text.split("\n")[0]
  except OSError:
    return False


def check_output_files(output: str) -> None:
  """Refuses an output folder that holds files but no dataset of ours
  (hidden files, our lock and staging folders aside)."""
  meta = previous_dataset(output)
  if meta is not None:
    _check_described_files(output, meta)
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


def _check_described_files(output: str, meta: Mapping[str, Any]) -> None:
  """Refuses, before the build runs, a README.md, croissant.json or
  preview/ in the output that its dataset does not list: the publish
  would refuse to replace them at the end (they are not ours to)."""
  kept = set(listed_files(meta))
  foreign = [n for n in _relative(output)
             if n not in kept and (n in (CARD_FILE, CROISSANT_FILE)
                                   or n.startswith(PREVIEW_DIR + "/"))]
  if foreign:
    raise InputError(
        f"output {output} holds {', '.join(foreign[:5])}, which a build "
        "writes (the dataset card, croissant.json, the previews) and the "
        "dataset there does not list: a file of yours, or one an older "
        "beam-tfrecords left when it overwrote a newer one's dataset. "
        "Move it away (or delete it, if it is an old description), then "
        "build again")


def publish(staging: str, output: str, meta: Mapping[str, Any],
            success_text: str,
            guard: Optional[Callable[[], None]] = None) -> None:
  """Switches `output` from its previous dataset (if any) to the one
  committed in `staging`. The caller holds the output's lock.

  Raises:
    InputError: a file of the new dataset exists in `output` and the
      previous dataset does not list it (nothing was changed).
    OutputError: the switch could not be made (a full disk, a file that
      cannot be moved): nothing was published, the previous dataset is in
      place as it was.
    PublishInterruptedError: the switch failed and could not be undone
      either: the next build into the output finishes it.
    OutputBusyError: the lock was lost (from `guard`): the build that has
      it finishes the switch.
  """
  journal_path = FileSystems.join(staging, JOURNAL)
  ops.guard = guard
  try:
    now = state(staging, output, success_text)
    if now == "began":
      # A retried last step (runners retry a failed bundle): this build's
      # own publish began; finish it (or its rollback).
      _resume(staging, output)
      return
    if now == "ended":
      return  # a retry after this build's publish ended
    # _SUCCESS seals the dataset.json it publishes: readers check it.
    success_text = sealed(success_text, ops.read(
        FileSystems.join(staging, DATASET_JSON)))
    journal = _journal(staging, output, meta, success_text)
    try:
      _prepare(staging, output, journal)
      ops.write(journal_path, _dumps(journal))
    except OutputBusyError:
      _forget_journal(journal_path)
      raise
    except Exception as e:  # pylint: disable=broad-except
      # The switch has not begun: the output is as it was.
      _forget_journal(journal_path)
      raise OutputError(_not_published(output, staging, e)) from e
    _switch_or_undo(staging, output, journal)
  finally:
    ops.guard = None


def state(staging: str, output: str, success_text: str) -> str:
  """Where this build's publish is: "began" (its journal, or its
  rollback, is in the staging folder: a retried last step finishes it),
  "ended" (the staging folder is empty or gone and the output's
  _SUCCESS is this build's: nothing is left to do), else ""."""
  if ops.exists(FileSystems.join(staging, JOURNAL)) or ops.exists(
      FileSystems.join(staging, ROLLBACK)):
    return "began"
  if not _relative(staging) and _success_matches(output, success_text):
    return "ended"
  return ""


def _journal(staging: str, output: str, meta: Mapping[str, Any],
             success_text: str) -> Dict[str, Any]:
  """The switch's journal: what moves aside, what moves in."""
  present = set(_relative(output))
  old = _old_files(previous_dataset(output), present)
  new = [n for n in dict.fromkeys(listed_files(meta)) if n != DATASET_JSON]
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
  return {"old": old, "old_success": _ours_success(output), "new": new,
          "success": success_text}


def _prepare(staging: str, output: str, journal: Dict[str, Any]) -> None:
  """Makes what the switch needs, so that the switch only renames: the
  folders files move into, the new _SUCCESS and the marker of step 2."""
  previous = FileSystems.join(staging, PREVIOUS)
  if ops.local(output):
    folders = {previous, FileSystems.join(output, ERRORS_DIR)}
    folders.update(os.path.dirname(ops.join(previous, n))
                   for n in journal["old"])
    folders.update(os.path.dirname(ops.join(output, n))
                   for n in journal["new"])
    for folder in sorted(folders):
      os.makedirs(folder, exist_ok=True)
  ops.write(FileSystems.join(staging, SUCCESS_NEXT), journal["success"])
  # Not empty: Beam cannot upload that to S3.
  ops.write(FileSystems.join(staging, ASIDE_DONE), "done\n")


def _forget_journal(journal_path: str) -> None:
  """Removes a journal whose switch never began (its write may have
  landed before the error); never raises."""
  try:
    if ops.exists(journal_path):
      ops.remove(journal_path)
  except Exception:  # pylint: disable=broad-except
    _LOG.warning("could not remove %s", journal_path, exc_info=True)


def _not_published(output: str, staging: str, error: Exception) -> str:
  """Says that the switch did not begin, its staging folder removed (a
  full disk gets its space back) or left for the next build."""
  try:
    remove_staging(staging)
    where = "its staging folder was removed"
  except Exception:  # pylint: disable=broad-except
    where = f"the next build removes its staging folder, {staging}"
  return (f"could not publish {output}: {_said(error)}; nothing was "
          f"published and {output} keeps its previous content ({where}). "
          + _fix(error))


def _said(error: Exception) -> str:
  if isinstance(error, OSError) and error.strerror:
    return error.strerror.lower() + (
        f" ({error.filename})" if error.filename else "")
  return f"{type(error).__name__}: {error}"


def _fix(error: Exception) -> str:
  code = getattr(error, "errno", None)
  if code in (errno.ENOSPC, errno.EDQUOT):
    return "Free space there, or write the dataset elsewhere"
  if code in (errno.EROFS, errno.EACCES, errno.EPERM):
    return "Make the folder writable for you, or write the dataset elsewhere"
  return "Build again once the cause is fixed"


def has_journal(staging: str) -> bool:
  """Whether a publish (or its rollback) began from `staging`: then the
  folder holds the only copy of a dataset, and only a publish's steps
  may remove it."""
  return any(ops.exists(FileSystems.join(staging, name))
             for name in (JOURNAL, ROLLBACK))


def _switch_or_undo(staging: str, output: str,
                    journal: Dict[str, Any]) -> None:
  """The switch from its journal; a step that fails is undone (the old
  dataset put back), or else left for the next build to finish."""
  try:
    _switch(staging, output, journal)
  except OutputBusyError:
    raise  # the lock is another build's: it finishes the switch
  except Exception as e:  # pylint: disable=broad-except
    if _success_matches(output, journal["success"]):
      _LOG.warning("%s: published; cleaning up failed (the next build "
                   "removes %s): %s", output, staging, _said(e))
      return
    try:
      _undo(staging, output)
    except OutputBusyError:
      raise
    except Exception as undo_error:  # pylint: disable=broad-except
      raise PublishInterruptedError(
          f"the publish of {output} was interrupted ({_said(e)}) and could "
          f"not be undone ({_said(undo_error)}): {output} holds no finished "
          f"dataset now, and nothing is lost: the new dataset is whole in "
          f"{staging}, the previous one in {staging}/{PREVIOUS}. Run the "
          "same build again (once the cause is fixed) to finish the "
          "publish") from e
    raise OutputError(
        f"could not publish {output}: {_said(e)}; the switch was undone: "
        f"{output} holds its previous content, whole. " + _fix(e)) from e
  _clean_up(staging, output, journal)


def _dumps(value: Any) -> str:
  return json.dumps(value, indent=1, sort_keys=True) + "\n"


def _resume(staging: str, output: str) -> None:
  """Finishes what a journal (or a rollback's) in `staging` began."""
  rollback = FileSystems.join(staging, ROLLBACK)
  if ops.exists(rollback):
    _undo(staging, output)
    return
  journal = ops.read_json(FileSystems.join(staging, JOURNAL))
  _switch(staging, output, journal)
  _clean_up(staging, output, journal)


def _switch(staging: str, output: str, journal: Dict[str, Any]) -> None:
  """Runs the switch's steps 1-4 from wherever they stopped
  (idempotent; renames only)."""
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
    marker = FileSystems.join(staging, ASIDE_DONE)
    if ops.exists(marker):
      ops.move(marker, aside_done)
    else:  # a journal of an earlier version: no marker made beforehand
      ops.write(aside_done, "done\n")
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
  success_next = FileSystems.join(staging, SUCCESS_NEXT)
  if ops.exists(success_next):
    _move_once(success_next, success)
  elif not _success_matches(output, journal["success"]):
    ops.write(success, journal["success"])  # an earlier version's journal


def _clean_up(staging: str, output: str, journal: Dict[str, Any]) -> None:
  """Step 5, once published: the emptied folders, the journal, then the
  staging folder; a failure is a warning (the next build removes what is
  left)."""
  try:
    _remove_empty_folders(output, [n for n in journal["old"]
                                   if n not in journal["new"]])
    # The journal goes first: a kill while the staging folder is removed
    # leaves a leftover, not a publish to finish.
    ops.remove(FileSystems.join(staging, JOURNAL))
    remove_staging(staging)
  except OutputBusyError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    _LOG.warning("%s: published; cleaning up failed (the next build "
                 "removes %s): %s", output, staging, _said(e))


def _undo(staging: str, output: str) -> None:
  """Reverses a switch that failed (idempotent, renames only): the journal
  becomes the rollback's; the new files that moved in go back to the
  staging folder, the old ones and their _SUCCESS (last) back in place;
  then the rollback's journal and the staging folder go."""
  journal_path = FileSystems.join(staging, JOURNAL)
  rollback = FileSystems.join(staging, ROLLBACK)
  if ops.exists(journal_path):
    ops.move(journal_path, rollback)  # from here on, undone, never redone
  journal = ops.read_json(rollback)
  previous = FileSystems.join(staging, PREVIOUS)
  # A new file leaves the staging folder only once every old one is
  # aside: one in the output, and not in the staging folder, is new.
  for name in reversed(journal["new"]):
    if not ops.exists(ops.join(staging, name)):
      _move_once(ops.join(output, name), ops.join(staging, name))
  for name in journal["old"] + [SUCCESS]:
    if not ops.exists(ops.join(output, name)):
      _move_once(ops.join(previous, name), ops.join(output, name))
  ops.remove(rollback)
  try:
    remove_staging(staging)
  except Exception:  # pylint: disable=broad-except
    _LOG.warning("could not remove %s (the next build removes it)",
                 staging, exc_info=True)


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
  """The folders the old dataset's files left empty, but errors/ (on
  local disk it is there, empty, when no row was rejected)."""
  if not ops.local(output):
    return  # object stores have no folders
  folders = {os.path.dirname(n) for n in names if "/" in n}
  keep = {output, os.path.join(output, ERRORS_DIR)}
  for folder in sorted(folders, key=len, reverse=True):
    path = os.path.join(output, folder)
    while path not in keep and os.path.isdir(path) and not os.listdir(path):
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
    if ops.exists(FileSystems.join(staging, ROLLBACK)):
      _resume(staging, output)
      line = (f"finished undoing the publish of an earlier build that "
              f"failed ({name}); the dataset before it is in place")
    elif ops.exists(FileSystems.join(staging, JOURNAL)):
      _resume(staging, output)
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
      fs.delete(files)
    if FileSystems.exists(parts):  # a directory on local disk
      FileSystems.delete([glob.escape(parts)])


def remove_staging(staging: str) -> int:
  """Deletes a staging directory and everything in it, on any file system
  (object stores have no directories to delete recursively); returns the
  bytes it held. Never one whose publish began (it may hold the only copy
  of a dataset): that raises RuntimeError."""
  if has_journal(staging):
    raise RuntimeError(f"{staging} holds a publish's journal; only the "
                       "publish's own steps remove it")
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
      fs.delete(files)
  if ops.exists(staging):  # a directory on local disk
    FileSystems.delete([glob.escape(staging)])
  return size

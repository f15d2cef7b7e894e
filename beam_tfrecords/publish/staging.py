"""The stage phase of a publish (publish.publication), the same for
`btr.build` and `btr.WriteDataset`: the output checked and locked, the
publishes of killed builds finished and their staging folders removed
(recover), a finished dataset kept unless overwritten (or, for build(),
found up to date), the staging folder with TensorFlow Metadata's
schema.pbtxt.

build() stages on the launcher before its pipeline runs; WriteDataset
only plans when its graph is built (building.planning), and stages in the
pipeline's first step when it runs (publish.publication's StageOutput),
as Beam's file sinks do: a graph built and never run leaves nothing. Both
call `Publication.stage`, which calls `stage` here.
"""

import errno
from typing import Any, Dict, NamedTuple, Optional, Tuple


from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.errors import InputError, OutputError, write_errno
from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.core.layout import TFMD_FILE, staging_name
from beam_tfrecords.publish.journal import (check_output_files, has_journal,
                                            recover, remove_staging)
from beam_tfrecords.publish.lock import OutputLock
from beam_tfrecords.publish.output import (check_output, finished_with_key,
                                           success_text)

__all__ = ["Staged", "stage", "release", "output_failure", "output_errno"]


class Staged(NamedTuple):
  """What the stage phase did: the output locked for the build and its
  staging folder made (`staging`), or, with `if_changed`, a finished
  dataset of the same build key found (`previous`: up to date; nothing
  staged, no lock held)."""
  staging: Optional[str] = None
  previous: Optional[DatasetInfo] = None


# The locks this process took for its builds ({(output, run): lock}): held,
# and renewed by their thread, until the build's publish removes them (or
# `release`, or the process ends: then a next build takes them over).
_HELD: Dict[Tuple[str, str], OutputLock] = {}


def stage(output: str, run: str, key: str, tfmd: str, *, overwrite: bool,
          overwrite_hint: str, if_changed: bool,
          pipeline_options: Any) -> Staged:
  """Locks and prepares `output` (an absolute path or URL) for the build
  `run`, whose staging folder is staging_name(run) in it. Safe to run
  again for the same run (a retried step, a runner that runs a side
  input's step in each task that reads it): the lock is adopted, the
  other builds' staging folders removed again, the schema written again.

  Args:
    key: the build key (building.planning.build_key).
    tfmd: TensorFlow Metadata's schema, written into the staging folder.
    overwrite: replace a finished dataset of another key.
    overwrite_hint: how the caller's user says "overwrite" (in the error
      when the output holds another finished dataset).
    if_changed: build() without force: a finished dataset of the same
      key is kept (Staged.previous), found without the lock when it can
      be (a read-only mount, say), else under it once killed builds'
      publishes are finished.
    pipeline_options: the pipeline options (the lock's file system reads them).
  """
  check_output(output)
  if if_changed:
    previous = _up_to_date(output, key)
    if previous is not None:
      return Staged(previous=DatasetInfo.from_json(previous))
  staging = FileSystems.join(output, staging_name(run))
  lock = _HELD.get((output, run))
  if lock is None or not lock.renew():  # (released by a publish: again)
    lock = _locked(output, pipeline_options, run)
    _HELD[(output, run)] = lock
  try:
    recover(output, keep=staging)
    check_output_files(output)
    published = success_text(output)
    previous = (finished_with_key(output, key)
                if if_changed and published is not None else None)
    if previous is None:
      _check_overwrite(output, published, overwrite, overwrite_hint)
      _write_tfmd(output, staging, tfmd)
  except BaseException as e:
    _HELD.pop((output, run), None)
    _unstage(output, staging, lock, e)
    raise
  if previous is not None:  # up to date: nothing to stage
    release(output, run)
    return Staged(previous=DatasetInfo.from_json(previous))
  return Staged(staging)


def release(output: str, run: str) -> None:
  """The lock this process holds for the build `run`, released (when
  the build ends, published or not; one its publish removed stays
  removed)."""
  lock = _HELD.pop((output, run), None)
  if lock is not None:
    lock.release()


def _locked(output: str, pipeline_options: Any, run: str) -> OutputLock:
  """The output's lock, taken for the build `run`."""
  try:
    return OutputLock(output, pipeline_options, run=run).acquire()
  except OSError as e:
    failure = output_failure(output, None, e)
    if failure is None:
      raise
    raise failure from e


def _check_overwrite(output: str, published: Optional[str], overwrite: bool,
                     hint: str) -> None:
  if published is not None and not overwrite:
    raise InputError(f"{output} already holds a finished dataset; pass "
                     f"{hint} to replace it")


def _write_tfmd(output: str, staging: str, text: str) -> None:
  """TensorFlow Metadata's schema in the staging folder, for TFDV / TFT /
  TFX tools."""
  try:
    with FileSystems.create(FileSystems.join(staging, TFMD_FILE)) as f:
      f.write(text.encode("utf-8"))
  except Exception as e:  # pylint: disable=broad-except
    failure = output_failure(output, staging, e)
    if failure is not None:
      raise failure from e
    raise


def _unstage(output: str, staging: str, lock: OutputLock,
             error: BaseException) -> None:
  """After a failure while staging: the staging folder removed (unless
  its failure already did), the lock released; an OSError of the output
  raised as its OutputError."""
  if isinstance(error, OSError):
    lock.release()
    failure = output_failure(output, None, error)
    if failure is not None:
      raise failure from error
    return
  # Interrupted (Ctrl-C, SIGTERM) or refused after the staging folder was
  # made: it goes too (nothing of it was published).
  try:
    remove_staging(staging)
  except Exception:  # pylint: disable=broad-except
    pass
  lock.release()


def _up_to_date(output: str, key: str) -> Optional[Dict[str, Any]]:
  """The dataset.json of the finished dataset of this build key in
  `output`, read without writing (None: not finished, or another key)."""
  try:
    published = success_text(output)
    if published is None or published == "<unreadable>":
      return None
    previous = finished_with_key(output, key)
    # The same _SUCCESS after dataset.json was read: not replaced between.
    if previous is None or success_text(output) != published:
      return None
    return previous
  except Exception:  # pylint: disable=broad-except
    return None  # decided under the lock


# What a failed write into the output says, by errno: (what happened,
# what to do).
_OUTPUT_ERRNOS = {
    errno.ENOSPC: ("no space left on the device",
                   "free space there or write the dataset elsewhere"),
    errno.EDQUOT: ("the disk quota is exceeded",
                   "free space there or write the dataset elsewhere"),
    errno.EROFS: ("it is on a read-only file system",
                  "give an --output on a writable file system"),
    errno.EACCES: ("permission denied",
                   "give an --output you can write to, or make the folder "
                   "writable for you"),
    errno.EPERM: ("operation not permitted",
                  "give an --output you can write to, or make the folder "
                  "writable for you"),
    errno.ELOOP: ("a symbolic link in its path loops",
                  "give an --output whose path resolves to a folder"),
    errno.EEXIST: ("its path exists but is not a folder (a dangling or "
                   "looping symbolic link?)",
                   "give an --output whose path resolves to a folder"),
    errno.ENOTDIR: ("a part of its path is a file, not a folder",
                    "give an --output whose path resolves to a folder"),
}


def output_errno(error: BaseException, output: str) -> Optional[int]:
  """The errno of a failed write into `output` (errors.write_errno over
  the errnos said here)."""
  return write_errno(error, output, tuple(_OUTPUT_ERRNOS))


def output_failure(output: str, staging: Optional[str],
                   error: BaseException) -> Optional[OutputError]:
  """The OutputError of a write into `output` that failed (None when
  `error` is no such failure), the build's staging folder removed unless
  its publish began: a staging folder with a journal is left for the
  next build, which finishes (or undoes) the switch."""
  code = output_errno(error, output)
  if code is None:
    return None
  what, fix = _OUTPUT_ERRNOS[code]
  said = "nothing was published"
  if staging is not None:
    if has_journal(staging):
      said = ("its publish began and is finished (or undone) by the next "
              f"build into {output}; nothing is lost")
    else:
      try:
        remove_staging(staging)
        said = "the build's staging folder was removed; nothing was published"
      except Exception:  # pylint: disable=broad-except
        said = (f"nothing was published (the next build removes {staging})")
  return OutputError(
      f"cannot write the dataset to {output}: {what} ({said}; a finished "
      f"dataset that was there is as it was); {fix}")



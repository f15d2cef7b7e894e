"""Errors that name where the problem is and what to do about it.

`SchemaError` is raised while a schema file is loaded, before any data is
read. `InputError` is raised while inputs are planned (globs that match
nothing, CSV files whose headers differ), also before the pipeline runs.
`EncodingError` describes one bad value in one row; inside a pipeline it
becomes a dead-letter row instead of failing the job.
"""

import errno
import functools
import re
from typing import Any, Optional, Sequence, Tuple

__all__ = ["BeamTFRecordsError", "SchemaError", "InputError", "NoInputError",
           "OutputBusyError", "OutputError", "PublishInterruptedError",
           "DatasetReplacedError", "ShardIndexError", "ShardDamagedError",
           "MalformedFileError",
           "EncodingError",
           "BadRowsError", "AnomalyError", "reason_category", "from_worker", "is_disk_full", "write_errno",
           "preview"]


# How much of a value an error message shows.
PREVIEW_CHARS = 120


def preview(value: Any) -> str:
  """repr(value) for an error message, cut to PREVIEW_CHARS characters
  (the full length said) so that a huge value cannot flood the message."""
  text = repr(value)
  if len(text) <= PREVIEW_CHARS:
    return text
  return f"{text[:PREVIEW_CHARS]}… ({len(text):,} characters)"


class BeamTFRecordsError(ValueError):
  """Base class of this package's errors."""


class SchemaError(BeamTFRecordsError):
  """A schema file is invalid.

  Attributes:
    path: the schema file (or "<dict>" for a schema given as a dict).
    key: the key path inside it, e.g. "features.age.type".
  """

  def __init__(self, message: str, path: str = "<dict>", key: str = ""):
    self.path = path
    self.key = key
    where = f"{path}: {key}: " if key else f"{path}: "
    super().__init__(where + message)


class InputError(BeamTFRecordsError):
  """The inputs cannot be read as asked (checked before the run)."""


class NoInputError(InputError):
  """Nothing to build: no input exists for the requested date / span."""


class OutputBusyError(InputError):
  """Another build holds the output's lock (or took it over meanwhile)."""


class OutputError(InputError):
  """The output cannot be written (a full disk, a read-only mount, no
  permission, a path that loops): nothing was published, and a finished
  dataset that was there is as it was."""


class PublishInterruptedError(BeamTFRecordsError):
  """A publish began (the switch's journal is written) and could not end:
  the new dataset is whole in the staging folder, the previous one whole
  in its `previous/` folder, and the next build into the output (the same
  command) finishes the switch. Not published yet, nothing lost."""


class JobFailedError(BeamTFRecordsError):
  """The runner could not run the build's job, or the engine failed it
  (a job server that did not start, a lost worker the engine did not
  recover from): nothing was published, and the output keeps its
  previous content."""


class DatasetReplacedError(InputError):
  """A dataset was replaced by a newer build (or is being replaced) while
  it was read: what was read so far is the old dataset's, and reading on
  would mix the two. Read it again."""


class ShardIndexError(InputError):
  """A shard's index does not belong to the shard beside it (a stale or
  foreign index, or a cut file): random access would read wrong records.
  The message names both files."""


class ShardDamagedError(InputError):
  """A shard's bytes are not the ones its dataset.json lists: empty, cut,
  damaged, with members dropped, duplicated or reordered, or with bytes
  after its end. No record after the damage was handed out (a damaged
  member's records never are); a count or checksum that disagrees at the
  shard's end is said there. Attributes: `file`; `reason`, what is
  wrong (the message without the file and the advice); `cut`, whether
  the file ends early; and where known the gzip `member` (numbered from
  0) and the byte `offset`."""

  def __init__(self, message: str, file: str = "",
               member: Optional[int] = None, offset: Optional[int] = None,
               reason: str = "", cut: bool = False):
    self.file, self.member, self.offset = file, member, offset
    self.reason, self.cut = reason or message, cut
    super().__init__(message)


class MalformedFileError(InputError):
  """A file of a dataset or of a reader (dataset.json, croissant.json, a
  shard index, a pin, a saved state) is not of the shape this package
  writes: damaged, hand-edited or another tool's. `file` names it."""

  def __init__(self, message: str, file: str = ""):
    self.file = file
    super().__init__(message)


class EncodingError(BeamTFRecordsError):
  """One value cannot be encoded as its feature says.

  Not raised by a build or by EncodeRecords: there the row becomes a
  dead-letter entry whose reason is this error's message (`In feature
  "F": reason`), and in a build the thresholds decide (BadRowsError).

  Attributes:
    feature: the feature name.
    reason: what is wrong and what is allowed, without the feature prefix.
    value: the offending value (as read).
  """

  def __init__(self, feature: str, reason: str, value: Any = None):
    self.feature = feature
    self.reason = reason
    self.value = value
    super().__init__(f'In feature "{feature}": {reason}')


class BadRowsError(BeamTFRecordsError):
  """More rows were rejected than --max-bad-rows / --max-bad-fraction allow.

  The message lists the top reasons with an example of each; the dataset
  is not published.
  """


class AnomalyError(BeamTFRecordsError):
  """The data broke the schema's expectations (beam_tfrecords.inspect.expectations).

  The message lists every anomaly, one per line; the dataset is not
  published. `anomalies`: their JSON objects (feature, check, split,
  observed, expected), when the launcher could read them.
  """

  def __init__(self, message: str,
               anomalies: Optional[Sequence[Any]] = None):
    super().__init__(message)
    self.anomalies = list(anomalies or [])


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|b'(?:[^'\\]|\\.)*'")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,_.]*(?:e[-+]?\d+)?")


@functools.lru_cache(maxsize=4096)
def reason_category(reason: str) -> str:
  """A reason with its values taken out, to count rows by kind of problem.

  'In feature "age": could not parse \\'abc\\' as int64' ->
  'In feature "age": could not parse … as int64'

  (Remembered: the rows a build rejects mostly share a few reasons, and
  each is categorized where it is counted and again where it is written.)
  """
  return _NUMBER.sub("N", _QUOTED.sub("…", reason))


# "beam_tfrecords.core.errors.InputError: message" in a worker's traceback text.
# What Beam adds to the message of an exception raised in a step.
_WHILE_RUNNING = re.compile(r"\s*\[while running '[^']*'\]", re.M)
_WORKER_ERROR = re.compile(
    r"^beam_tfrecords\.core\.errors\.(InputError|BadRowsError|OutputBusyError|"
    r"AnomalyError|OutputError|PublishInterruptedError): ",
    re.M)


def from_worker(error: Exception) -> Exception:
  """The package error a pipeline failed with, as its own type.

  Runners other than the in-process one (worker threads or processes,
  Dataflow, Flink, Spark) report a worker's exception as the text of its
  traceback inside a RuntimeError. An InputError (or BadRowsError) found
  there comes back as that type with its message; anything else is
  returned unchanged.
  """
  if isinstance(error, BeamTFRecordsError):
    text = str(error)
    clean = _WHILE_RUNNING.sub("", text)
    if clean == text or isinstance(error, SchemaError):
      return error
    typed = type(error)(clean)
    typed.__cause__ = error
    return typed
  text = _WHILE_RUNNING.sub("", str(error))
  found = list(_WORKER_ERROR.finditer(text))
  if not found:
    return error
  kind, message = found[-1].group(1), text[found[-1].end():]
  typed = {"InputError": InputError, "BadRowsError": BadRowsError,
           "OutputBusyError": OutputBusyError,
           "AnomalyError": AnomalyError, "OutputError": OutputError,
           "PublishInterruptedError": PublishInterruptedError,
           }[kind](message.strip())
  typed.__cause__ = error
  return typed


# A full disk or quota: a failed write wherever it is said.
FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def write_errno(error: BaseException, output: str,
                codes: Tuple[int, ...]) -> Optional[int]:
  """The errno among `codes` of the failed write that `error` (or what
  caused it) is: an OSError here, or its text in a worker's traceback
  (runners report those as text). A full disk or quota is one wherever it
  is said; the others only when the message names `output`."""
  seen = set()
  link: Optional[BaseException] = error
  while link is not None and id(link) not in seen:
    seen.add(id(link))
    if isinstance(link, OSError) and link.errno in codes and (
        link.errno in FULL_DISK
        or output in str(link.filename or "") + str(link.filename2 or "")
        or output in str(link)):
      return link.errno
    text = str(link)
    for code in codes:
      if f"[Errno {code}]" in text and (code in FULL_DISK
                                         or output in text):
        return code
    link = link.__cause__ or link.__context__
  return None


def is_disk_full(error: BaseException) -> bool:
  """Whether a failure is a full disk (or quota), here or in a worker's
  traceback."""
  return write_errno(error, "", FULL_DISK) is not None

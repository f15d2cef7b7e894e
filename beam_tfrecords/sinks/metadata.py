"""The files a build writes beside its record shards: the dead-letter
files (errors/, `WriteErrors`) and the dataset's small files, each written
whole with its checksum (`write_file`).
"""

import json
from typing import Any, Dict

import apache_beam as beam

from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.errors import reason_category
from beam_tfrecords.core.info import FileSum
from beam_tfrecords.core.layout import ERRORS_DIR
from beam_tfrecords.sinks.codec import JSON_LINES
from beam_tfrecords.sinks.parts import ErrorsWritten, ShardWritten
from beam_tfrecords.sinks.shards import WriteShards

__all__ = ["WriteErrors", "write_file"]


def _error_batch(batch, to_json) -> tuple:
  """(key, [dead-letter dict]) -> ("errors", key + (first line,), [line]).

  Keys are (file, unit start, batch) for a batch's rows and (file, -1, -1)
  for a group; the first line makes them unique, so the lines of a file
  are sorted by input file and row.
  """
  key, errors = batch
  lines = [to_json(e) for e in errors]
  return ERRORS_DIR, tuple(key) + (lines[0],), lines


def _count_errors(info: ShardWritten, directory: str) -> ErrorsWritten:
  """Lines, the input rows they account for, and rows per reason category."""
  lines = rows = 0
  reasons: Dict[str, list] = {}
  with FileSystems.open(FileSystems.join(directory, info.file)) as f:
    for line in f:
      if not line.strip():
        continue
      error = json.loads(line)
      n = error.get("rows", 1)
      lines += 1
      rows += n
      category = reason_category(error["reason"])
      if error.get("kind") == "dropped":  # by a declared policy, not bad
        category = "dropped: " + category
      entry = reasons.setdefault(category, [0, None])
      entry[0] += n
      if entry[1] is None:
        entry[1] = {k: error.get(k) for k in ("source", "row", "group",
                                              "reason") if k in error}
  return ErrorsWritten(f"{ERRORS_DIR}/{info.file}", lines, rows, reasons,
                       info.bytes, info.sha256)


class WriteErrors(beam.PTransform):
  """Writes batches (key, [dead-letter dict]) as sorted JSON lines in
  DIR/errors/.

  Outputs one sinks.parts.ErrorsWritten per file.
  """

  def __init__(self, directory: str, num_shards: int, to_json):
    super().__init__()
    self._directory = FileSystems.join(directory, ERRORS_DIR)
    self._num_shards = num_shards
    self._to_json = to_json

  def expand(self, errors):
    to_json = self._to_json
    return (errors
            # (key, [dead-letter dict])
            | "Lines" >> beam.Map(_error_batch, to_json)
            # (key, [JSON line])
            | "Write" >> WriteShards(self._directory,
                                     {ERRORS_DIR: self._num_shards},
                                     JSON_LINES)
            # ShardWritten
            | "Count" >> beam.Map(_errors_step, self._directory
                                  ).with_output_types(Any))


def write_file(directory: str, name: str, data: bytes) -> FileSum:
  """Writes a file of the dataset into a (staging) folder; its bytes and
  SHA-256, for dataset.json's `checksums`."""
  with FileSystems.create(FileSystems.join(directory, name)) as f:
    f.write(data)
  return FileSum.of(data)


def _errors_step(info, directory):
  """_count_errors, without annotations: Beam reads a step function's
  annotations as type hints (see publish.commit's _commit_step)."""
  return _count_errors(info, directory)

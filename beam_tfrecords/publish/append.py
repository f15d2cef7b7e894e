"""Appending a build to a published dataset (`--append`): the new inputs
become new shard files beside the old ones, and the old shards are never
rewritten.

On the launcher, `append_plan` checks that the output holds a finished
dataset these inputs can be added to: the same schema, the same shard
format and record options, statistics on both or off on both, and no
input file that the dataset already holds. The build then reads, encodes
and writes only the new inputs, as any build, into its staging folder.

In its commit step, `appended` makes the new generation's file set:

- each split's shards are numbered old first, then new, as Beam names
  them (`train-00002-of-00005.tfrecord.gz`); the old shards (and their
  indexes) are hard-linked into the staging folder under their new
  names, so the publish's renames keep their inodes and no byte of them
  is read or written (on GCS and S3, where there are no links, the
  store copies them server side); the new ones are renamed there;
- the dead-letter files likewise;
- counts are summed, the top rejection reasons merged;
- statistics are merged from the old dataset's `statistics.state.json`
  (encoding.stats_state) and the new rows' partials.

What this gives, against a clean build of all the inputs: the same
records in each split, in other shards (the old ones as they were, the
new ones after them); the same counts, and the same statistics but for
the top values of a text feature with more than 1,000 distinct values
(`top_exact: false` there: each merge keeps the 1,000 most frequent, and
an append merges in another order). Record numbers of the old records
do not change: the new ones come after them.
"""

import dataclasses
import hashlib
import os
import posixpath
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import InputError, ShardDamagedError
from beam_tfrecords.core.info import (Counts, DatasetInfo, ErrorFile,
                                      ErrorReason, Errors, IndexInfo,
                                      InputsInfo, ShardInfo, SplitInfo,
                                      files_fingerprint)
from beam_tfrecords.core.layout import STATS_STATE_FILE, SUCCESS
from beam_tfrecords.core.shard_names import SHARDS

__all__ = ["AppendPlan", "append_plan", "appended", "appended_inputs"]

_KEY_FIELDS = ("record", "schema", "compression", "file_format")


class AppendPlan(NamedTuple):
  """The dataset a build appends to: its folder and its dataset.json."""
  output: str
  previous: DatasetInfo


def append_plan(output: str, planned: DatasetInfo,
                inputs: InputsInfo) -> AppendPlan:
  """The plan to append these inputs to the dataset in `output`, after
  checking that they can be (InputError saying why not)."""
  try:
    if not fs.exists(fs.join(output, SUCCESS)):
      raise InputError(f"{output} has no {SUCCESS}")
    previous = DatasetInfo.from_directory(output)
  except InputError as e:
    raise InputError(
        f"--append: {output} holds no finished dataset to append to ({e}); "
        "build it first without --append") from e
  for field in _KEY_FIELDS:
    old, new = getattr(previous, field), getattr(planned, field)
    if old != new:
      raise InputError(
          f"--append: {output} was built with another {field.replace('_', ' ')} "
          f"than this build's, so the new records would not read as the old "
          "ones; append with the schema and options it was built with "
          f"(see its dataset.json), or rebuild it whole")
  if previous.options is None or planned.options is None or \
      previous.options.sink != planned.options.sink:
    raise InputError(f"--append: {output} was written by another sink "
                     "(--sink); append with the same one")
  if previous.options.statistics != planned.options.statistics:
    raise InputError(
        f"--append: {output} was built with statistics; append without "
        "--no-statistics, so that they are merged"
        if previous.options.statistics
        else f"--append: {output} was built with --no-statistics; append "
        "with --no-statistics too (the old rows' statistics are not there "
        "to merge with)")
  if previous.statistics and STATS_STATE_FILE not in (previous.checksums
                                                      or {}):
    raise InputError(
        f"--append: {output} has no {STATS_STATE_FILE} (built by a version "
        "before it was written), so its statistics cannot be merged "
        "exactly; rebuild it once without --append")
  held = {f.path for f in (previous.inputs.files if previous.inputs
                            else ())}
  again = [f.path for f in inputs.files if f.path in held]
  if again:
    raise InputError(
        f"--append: {output} already holds {again[0]}"
        + (f" and {len(again) - 1} more input file(s)" if len(again) > 1
           else "")
        + "; appending it again would repeat its rows (if it changed, "
        "rebuild the dataset whole). Give only new input files")
  return AppendPlan(output, previous)


def appended_inputs(previous: Optional[InputsInfo], new: InputsInfo
                    ) -> InputsInfo:
  """dataset.json's `inputs` after an append: every file the dataset now
  holds (their fingerprint as a build's, over all of them), and each
  append's patterns and files."""
  if previous is None:
    return new
  files = previous.files + new.files
  fingerprint = files_fingerprint((f.path, f.num_bytes, f.modified)
                                  for f in files)
  patterns = tuple(dict.fromkeys(previous.patterns + new.patterns))
  appends = list(previous.extra.get("appends", []))
  appends.append({"patterns": list(new.patterns), "files": len(new.files),
                  "fingerprint": new.fingerprint})
  return dataclasses.replace(new, patterns=patterns, files=files,
                             fingerprint=fingerprint,
                             extra={**new.extra, "appends": appends})


def appended(directory: str, info: DatasetInfo,
             state: Optional[Dict[str, Dict[str, dict]]], plan: AppendPlan
             ) -> Tuple[DatasetInfo, Optional[Dict[str, Dict[str, dict]]]]:
  """The staged dataset (`info`, its statistics' merge `state`) made the
  new generation of `plan.output`: the old files linked in, the new ones
  renamed after them, counts, errors and statistics merged."""
  previous = plan.previous
  splits = {}
  for name in sorted(set(previous.splits) | set(info.splits)):
    old = previous.splits.get(name)
    new = info.splits.get(name)
    shards = _placed(directory, plan.output,
                     old.shards if old else (), new.shards if new else ())
    splits[name] = SplitInfo(name, sum(s.num_records for s in shards),
                             sum(s.num_bytes for s in shards), shards)
  errors = _placed_errors(directory, plan.output, previous.errors,
                          info.errors)
  counts = _summed(previous.counts, info.counts)
  merged = state
  if STATS_STATE_FILE in (previous.checksums or {}):
    merged = _merged_state(plan.output, previous, state or {})
  return dataclasses.replace(info, splits=splits, errors=errors,
                             counts=counts), merged


def _placed(directory: str, output: str, old: Tuple[ShardInfo, ...],
            new: Tuple[ShardInfo, ...]) -> Tuple[ShardInfo, ...]:
  """The shards of one split under their new names (old first): the new
  ones renamed in the staging folder, then the old ones linked in."""
  total = len(old) + len(new)
  out: List[ShardInfo] = []
  for j, shard in enumerate(new):
    out.append(_moved(directory, directory, shard, len(old) + j, total,
                      link=False))
  return tuple(_moved(output, directory, shard, i, total, link=True)
               for i, shard in enumerate(old)) + tuple(out)


def _renamed(file: str, i: int, total: int) -> str:
  """A shard's (or dead-letter file's) path with number i of `total`."""
  folder, base = posixpath.split(file)
  prefix = base[:base.rindex("-of-")].rsplit("-", 1)[0]
  name = SHARDS.name(prefix, i, total, SHARDS.suffix_of(base))
  return posixpath.join(folder, name) if folder else name


def _moved(source_dir: str, directory: str, shard: ShardInfo, i: int,
           total: int, link: bool) -> ShardInfo:
  final = _renamed(shard.file, i, total)
  _put(fs.join(source_dir, shard.file), fs.join(directory, final), link)
  index = shard.index
  if index is not None:
    folder = posixpath.dirname(index.file)
    rest = posixpath.basename(index.file)[len(posixpath.basename(
        shard.file)):]
    name = posixpath.join(folder, posixpath.basename(final) + rest)
    _put(fs.join(source_dir, index.file), fs.join(directory, name), link)
    index = IndexInfo(name, index.num_bytes, index.sha256)
  return dataclasses.replace(shard, file=final, index=index)


def _put(source: str, target: str, link: bool) -> None:
  """`source` at `target`: linked (a copy where links do not exist) or
  renamed; done already (a retried commit) is left as it is."""
  if source == target:
    return
  done = fs.exists(target) and (link or not fs.exists(source))
  if done:
    return
  if link:
    try:
      if fs.is_local(source) and fs.is_local(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fs.link_or_copy(source, target)
      else:
        fs.copy(source, target)
    except Exception as e:  # pylint: disable=broad-except
      raise ShardDamagedError(
          f"{source}: listed by the dataset appended to, and not there "
          f"({type(e).__name__}: {e}); nothing was appended. Check it with "
          "beam-tfrecords verify, or rebuild it whole", file=source) from e
    return
  if fs.is_local(source):
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.replace(source, target)
    return
  fs.copy(source, target)  # (a rename on GCS and S3 is a copy)
  fs.delete([source])


def _placed_errors(directory: str, output: str, old: Errors,
                   new: Errors) -> Errors:
  total = len(old.files) + len(new.files)
  files: List[ErrorFile] = []
  for i, f in enumerate(old.files):
    final = _renamed(f.file, i, total)
    _put(fs.join(output, f.file), fs.join(directory, final), link=True)
    files.append(dataclasses.replace(f, file=final))
  for j, f in enumerate(new.files):
    final = _renamed(f.file, len(old.files) + j, total)
    _put(fs.join(directory, f.file), fs.join(directory, final), link=False)
    files.append(dataclasses.replace(f, file=final))
  return Errors(old.rows + new.rows, tuple(files),
                _merged_reasons(old.reasons + new.reasons,
                                max(len(old.reasons), len(new.reasons))))


def _merged_reasons(reasons: Tuple[ErrorReason, ...], top: int
                    ) -> Tuple[ErrorReason, ...]:
  """Reasons of both generations by reason, rows summed, the first
  generation's example kept; most rows first."""
  merged: Dict[str, List[Any]] = {}
  for r in reasons:
    entry = merged.setdefault(r.reason, [0, r.example])
    entry[0] += r.rows
  ranked = sorted(merged.items(), key=lambda kv: (-kv[1][0], kv[0]))
  return tuple(ErrorReason(reason, rows, example)
               for reason, (rows, example) in ranked[:top])


def _summed(a: Counts, b: Counts) -> Counts:
  def add(x: Optional[int], y: Optional[int]) -> Optional[int]:
    return None if x is None and y is None else (x or 0) + (y or 0)
  return Counts(a.rows_read + b.rows_read, a.rows_written + b.rows_written,
                a.rows_rejected + b.rows_rejected,
                a.rows_dropped + b.rows_dropped,
                a.records_written + b.records_written,
                add(a.steps_written, b.steps_written),
                add(a.steps_dropped, b.steps_dropped))


def _merged_state(output: str, previous: DatasetInfo,
                  state: Dict[str, Dict[str, dict]]
                  ) -> Dict[str, Dict[str, dict]]:
  """The old dataset's statistics state (checked against the checksum
  its dataset.json lists) merged with the new rows'."""
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.encoding.stats import merge_all
  from beam_tfrecords.encoding.stats_state import from_state_json
  path = fs.join(output, STATS_STATE_FILE)
  with fs.open_read(path, fs.UNCOMPRESSED) as f:
    data = f.read()
  listed = (previous.checksums or {})[STATS_STATE_FILE]
  if (len(data), hashlib.sha256(data).hexdigest()) != (
      listed.num_bytes, listed.sha256):
    raise ShardDamagedError(
        f"{path}: not the bytes its dataset.json lists; the dataset was "
        "changed or damaged since it was built (beam-tfrecords verify "
        "says what else); nothing was appended", file=path)
  old = from_state_json(data.decode("utf-8"), path)
  out: Dict[str, Dict[str, dict]] = {}
  for split in list(old) + [s for s in state if s not in old]:
    a, b = old.get(split, {}), state.get(split, {})
    merged: Dict[str, dict] = {}
    for name in list(a) + [n for n in b if n not in a]:
      one = merge_all([a.get(name), b.get(name)])
      if one is not None:
        merged[name] = one
    out[split] = merged
  return out

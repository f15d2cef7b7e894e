"""Everything a build does to its output before it writes, the same for
`btr.build` and `btr.WriteDataset`: the output checked and locked, the
publishes of killed builds finished and their staging folders removed, a
finished dataset kept unless overwritten (or, for build(), reported up to
date), the staging folder with TensorFlow Metadata's schema.pbtxt, and the
dataset's plan (how it is cut and described in dataset.json).

build() stages on the launcher before its pipeline runs (`stage_output`);
WriteDataset only plans when its graph is built (`dataset_plan`), and
stages in the pipeline's first step when it runs (`StageOutput`), as
Beam's file sinks do: a graph built and never run leaves nothing.
"""

import dataclasses
import errno
from typing import Any, Dict, NamedTuple, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_tfrecords import planning
from beam_tfrecords.errors import InputError, OutputError, write_errno
from beam_tfrecords.expectations import CheckPlan, load_baseline
from beam_tfrecords.info import Counts, DatasetInfo, Errors
from beam_tfrecords.options import BuildOptions
from beam_tfrecords.report import REPORT_FILE
from beam_tfrecords.planning import (ERRORS_INPUT_BYTES, ShardPlan,
                                     shard_plan, shuffle_buckets)
from beam_tfrecords.schema import Schema, spec_to_json
from beam_tfrecords.schema.model import MediaKind
from beam_tfrecords.schema.spec import aligned_lists
from beam_tfrecords.schema.tfmd import TFMD_FILE, tfmd_text
from beam_tfrecords.sinks import (STAGING_PREFIX, TFRECORD_GZIP, OutputLock,
                                  Shuffle,
                                  check_output_files, recover,
                                  remove_staging)
from beam_tfrecords.sinks.publishing import has_journal
from beam_tfrecords.sinks.finish import FinishPlan
from beam_tfrecords.sinks.tfds_files import (TFRECORD_PLAIN, check_tfds,
                                             features_json)
from beam_tfrecords.splits import producible_splits
from beam_tfrecords.transforms.dataset import DatasetPlan
from beam_tfrecords.transforms.grouped import buckets_for
from beam_tfrecords.version import __version__

__all__ = ["Staged", "stage_output", "RunStage", "StageOutput",
           "stage_at_run", "dataset_plan", "output_failure", "output_errno"]


class Staged(NamedTuple):
  """A locked output, ready for the pipeline (the caller releases the
  lock: build() when it returns, WriteDataset's last step when it has
  published)."""
  # None: up to date, found without taking the lock.
  lock: Optional[OutputLock]
  # How the dataset is cut and described; None: up to date (build() only).
  dataset: Optional[DatasetPlan]
  # The finished dataset.json of the same build key, when up to date.
  previous: Optional[Dict[str, Any]] = None


def stage_output(schema: Schema, plan, opts: BuildOptions, output: str,
                 key: str, inputs: Dict[str, Any], user_fn, options, *,
                 overwrite_hint: str) -> Staged:
  """Checks and locks `output` (an absolute path or URL) and prepares its
  staging folder: build()'s, on the launcher before its pipeline runs
  (WriteDataset's is a step of the pipeline: `StageOutput`).

  Args:
    plan: the inputs' plan (sources.InputPlan).
    opts: the build's options, before the schema's defaults.
    key: the build key (planning.build_key).
    inputs: dataset.json's `inputs`.
    opts.force: build even when the output holds a finished dataset of
      the same key (else: Staged with dataset None and that dataset.json).
    overwrite_hint: how the caller's user says "overwrite" (in the error
      when the output holds another finished dataset).
  """
  planning.check_output(output)
  if not opts.force:
    # Up to date: said without the lock, so without writing (a read-only
    # mount, say). A publish under way or cut short leaves no _SUCCESS.
    previous = _up_to_date(output, key)
    if previous is not None:
      return Staged(None, None, previous)
  lock = _locked(output, options, None)
  staging: Optional[str] = None
  try:
    # Builds killed before: their publishes are finished, their staging
    # folders removed.
    recover(output, keep="")
    check_output_files(output)
    published = planning.success_text(output)
    if not opts.force and published is not None:
      previous = planning.finished_with_key(output, key)
      if previous is not None:
        return Staged(lock, None, previous)
    _check_overwrite(output, published, opts.overwrite, overwrite_hint)
    staging = FileSystems.join(output, STAGING_PREFIX + lock.run)
    dataset = dataset_plan(schema, plan, opts.resolved(schema), output,
                           staging, lock.run, key, inputs, user_fn)
    _write_tfmd(output, staging, tfmd_text(schema))
  except BaseException as e:
    _unstage(output, staging, lock, e)
    raise
  return Staged(lock, dataset)


@dataclasses.dataclass(frozen=True)
class RunStage:
  """What WriteDataset's first step does to the output when the pipeline
  runs: `output` locked for the build `run` (staging folder
  STAGING_PREFIX + run), a finished dataset there kept unless
  `overwrite`, TensorFlow Metadata's schema (`tfmd`) staged."""
  output: str
  run: str
  overwrite: bool
  tfmd: str
  overwrite_hint: str = "overwrite=True"

  @property
  def staging(self) -> str:
    return FileSystems.join(self.output, STAGING_PREFIX + self.run)


# The locks StageOutput took in this process ({(output, run): lock}): held,
# and renewed by their thread, until the pipeline's last step removes them
# (or the process ends: then a next build takes them over).
_HELD: Dict[Tuple[str, str], OutputLock] = {}


def stage_at_run(stage: RunStage, options) -> str:
  """Locks and prepares the output for the build `stage.run`, as
  stage_output does; the staging folder. Safe to run again for the same
  run (a retried step, a runner that runs a side input's step in each
  task that reads it): the lock is adopted, the other builds' staging
  folders removed again, the schema written again."""
  planning.check_output(stage.output)
  lock = _HELD.get((stage.output, stage.run))
  if lock is None or not lock.renew():  # (released by a publish: again)
    lock = _locked(stage.output, options, stage.run)
    _HELD[(stage.output, stage.run)] = lock
  try:
    recover(stage.output, keep=stage.staging)
    check_output_files(stage.output)
    _check_overwrite(stage.output, planning.success_text(stage.output),
                     stage.overwrite, stage.overwrite_hint)
    _write_tfmd(stage.output, stage.staging, stage.tfmd)
  except BaseException as e:
    _HELD.pop((stage.output, stage.run), None)
    _unstage(stage.output, stage.staging, lock, e)
    raise
  return stage.staging


class _StageFn(beam.DoFn):

  def process(self, stage: RunStage):
    # The file system options the worker was started with (S3 endpoint,
    # credentials) reach the lock's store too.
    yield stage_at_run(
        stage, FileSystems._pipeline_options)  # pylint: disable=protected-access


class StageOutput(beam.PTransform):
  """A pipeline -> its staging folder (one element), once the output is
  locked and staged for the build `stage.run` when the pipeline runs:
  steps that write there take it as a side input (or gather it) so that
  they run after it. A pipeline built and never run leaves nothing."""

  def __init__(self, stage: RunStage):
    super().__init__()
    self._stage = stage

  def expand(self, pipeline):
    return (pipeline
            | "Plan" >> beam.Create([self._stage])
            | "LockAndStage" >> beam.ParDo(_StageFn()).with_output_types(
                str))


def _locked(output: str, options, run: Optional[str]) -> OutputLock:
  """The output's lock, taken (for the build `run`, or a new one)."""
  try:
    return OutputLock(output, options, run=run).acquire()
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


def _unstage(output: str, staging: Optional[str], lock: OutputLock,
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
  if staging is not None:
    try:
      remove_staging(staging)
    except Exception:  # pylint: disable=broad-except
      pass
  lock.release()


def _up_to_date(output: str, key: str) -> Optional[Dict[str, Any]]:
  """The dataset.json of the finished dataset of this build key in
  `output`, read without writing (None: not finished, or another key)."""
  try:
    published = planning.success_text(output)
    if published is None or published == "<unreadable>":
      return None
    previous = planning.finished_with_key(output, key)
    # The same _SUCCESS after dataset.json was read: not replaced between.
    if previous is None or planning.success_text(output) != published:
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


def _shards(schema: Schema, plan, opts: BuildOptions):
  """(ShardPlan, Shuffle or None) of the build, its options checked."""
  input_bytes = sum(f.size for f in plan.files)
  shards = shard_plan(schema, opts.num_shards, opts.max_shard_size,
                      input_bytes, plan.format)
  opts.check_sink_options()
  if opts.tfds:
    check_tfds(schema)
  if opts.sink != "deterministic" or opts.tfds:
    # WriteToTFRecord (and --tfds's uncompressed codec) writes
    # shards.shards files, however large.
    shards = ShardPlan(shards.shards, dict.fromkeys(shards.shards))
  opts.check_shuffle_seed()
  shuffle = None if opts.shuffle_seed is None else Shuffle(
      opts.shuffle_seed, shuffle_buckets(schema, shards.shards, input_bytes))
  return shards, shuffle


def dataset_plan(schema: Schema, plan, opts: BuildOptions, output: str,
                  staging: str, run: str, key: str, inputs: Dict[str, Any],
                  user_fn) -> DatasetPlan:
  """How the dataset of these inputs is cut and described."""
  shards, shuffle = _shards(schema, plan, opts)
  input_bytes = sum(f.size for f in plan.files)
  aligned = aligned_lists(schema)
  planned = DatasetInfo(
      name=schema.name,
      record=schema.record.value,
      schema=schema.to_dict(),
      feature_spec=spec_to_json(schema),
      compression="NONE" if opts.tfds else "GZIP",
      inputs=inputs,
      split_rule={"kind": schema.splits.kind.value,
                  "splits": list(schema.splits.names),
                  **schema.splits.to_dict()},
      options={"num_shards": shards.shards,
               "max_shard_bytes": shards.max_bytes, "sink": opts.sink,
               "shuffle_seed": opts.shuffle_seed,
               "shuffle_buckets": shuffle.buckets if shuffle else None,
               "gzip_level": opts.gzip_level,
               "statistics": opts.statistics,
               "max_bad_rows": opts.max_bad_rows,
               "max_bad_fraction": opts.max_bad_fraction,
               "preprocess": user_fn and user_fn.name,
               # Only when set: other datasets' dataset.json as it was.
               **({"tfds": True} if opts.tfds else {}),
               "format_options": {k: v for k, v in plan.options.items()
                                  if k not in ("column_names",
                                               "scalar_columns",
                                               "classes")}},
      vocabularies={m.name: m.options["values"] for m in schema.media
                    if m.kind is MediaKind.VOCABULARY},
      statistics_of=(
          "rows read into steps (group_by: before max_length policies and "
          "group rejections, whose rows errors/ lists)"
          if schema.group_by else "the written records"),
      tool={"name": "beam-tfrecords", "version": __version__},
      tfmd_schema=TFMD_FILE,
      build_key=key,
      # Written in the staging folder, published with the rest.
      report=REPORT_FILE if opts.report else None,
      # The label feature(s) (load(as_supervised=True)); only when named,
      # so that other datasets' dataset.json stays as it was.
      label=tuple(schema.label) if schema.label else None,
      # Features read from the same list of objects (same length in every
      # record): {list path: [feature, ...]}; only when there are some.
      aligned_lists=aligned or None,
      # Known after the run (sinks.metadata.Commit).
      splits={}, counts=Counts(0, 0, 0, 0, 0), errors=Errors(0))
  return DatasetPlan(
      staging=staging, shards=shards, sink=opts.sink,
      codec=TFRECORD_PLAIN if opts.tfds else TFRECORD_GZIP,
      gzip_level=opts.gzip_level, shuffle=shuffle,
      statistics=opts.statistics,
      error_shards=max(1, min(max(shards.shards.values()),
                              -(-input_bytes // ERRORS_INPUT_BYTES))),
      planned=planned,
      buckets=buckets_for(input_bytes),
      finish=FinishPlan(
          output=output, staging=staging, run=run,
          # The run id makes each publish's _SUCCESS its own: readers
          # tell a replaced dataset by it (window.Generation).
          success_text=f"beam-tfrecords {__version__} {key} {run}\n",
          max_bad_rows=opts.max_bad_rows,
          max_bad_fraction=opts.max_bad_fraction,
          producible=tuple(producible_splits(schema.splits)),
          analyze_split=(schema.transform.analyze_split
                         if schema.transform is not None else None),
          on_anomaly=opts.on_anomaly or "fail",
          tfds_features=features_json(schema) if opts.tfds else None),
      checks=(CheckPlan(schema, *load_baseline(opts.baseline, schema))
              if schema.expects else None))

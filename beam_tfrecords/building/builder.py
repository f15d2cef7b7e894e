"""build(): plan the inputs on the launcher, stage the output (the stage
phase of its publish.publication.Publication), then `ReadInputs |
WriteBatches` as one Beam pipeline, whose last steps commit and publish
(the same phases as btr.WriteDataset's), and run it.

Everything that can be checked is checked before the pipeline is built:
the schema (when loaded), the inputs (globs, headers, columns), the options
and the output (locked for this build; an existing finished dataset is
kept unless overwrite is asked for).
"""

import dataclasses
import json
import logging
import os
import re
import time
from typing import (Any, Callable, Dict, List, Mapping, Optional, Sequence,
                    Tuple, Union)

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_tfrecords import tft
from beam_tfrecords.building import planning
from beam_tfrecords.building.options import BuildOptions
from beam_tfrecords.building.planning import shard_plan
from beam_tfrecords.core import fs, native
from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.errors import (AnomalyError, InputError,
                                        OutputBusyError, OutputError,
                                        PublishInterruptedError, from_worker)
from beam_tfrecords.core.info import DatasetInfo, InputsInfo, SplitInfo
from beam_tfrecords.core.layout import ANOMALIES_FILE, PARTS_DIR
from beam_tfrecords.core.unit_cache import (Keeping, UnitStore,
                                            drop_output_units,
                                            output_units, unit_key)
from beam_tfrecords.core.version import __version__
from beam_tfrecords.publish.append import append_plan, appended_inputs
from beam_tfrecords.publish.lock import new_run
from beam_tfrecords.publish.output import check_output_path
from beam_tfrecords.publish.publication import Publication
from beam_tfrecords.runners.dofn_specs import memoized_dofn_specs
from beam_tfrecords.runners.image_check import check_worker_image
from beam_tfrecords.runners.pipeline_options import (check_paths_reach_workers,
                                                     is_dask, is_prism,
                                                     pipeline_options,
                                                     runner_name,
                                                     spread_on_dask)
from beam_tfrecords.runners.run import job_failure, run_pipeline
from beam_tfrecords.schema import Schema, load_schema
from beam_tfrecords.schema.model import DEFAULT_SPLIT, MediaKind
from beam_tfrecords.schema.sizes import parse_size
from beam_tfrecords.schema.tfmd import tfmd_text
from beam_tfrecords.sources import InputPlan, plan_inputs
from beam_tfrecords.sources.csv import TRANSFORM_BLOCK_SIZE
from beam_tfrecords.sources.preprocess import (SHIPPING, Preprocess,
                                               resolve_preprocess)
from beam_tfrecords.transforms import ReadInputs
from beam_tfrecords.sinks.shards import deal_digest
from beam_tfrecords.transforms.dataset import DatasetPlan, WriteBatches
from beam_tfrecords.transforms.inputs import unit_bytes

__all__ = ["build", "BuildResult", "DEFAULT_SPLIT", "shard_plan"]

_LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class BuildResult:
  """What a finished build wrote: `info`, its dataset.json typed."""
  output: str
  info: DatasetInfo
  seconds: float
  # True when nothing was built: the output already held a dataset of the
  # same inputs, schema and options (see build(..., force=...)).
  up_to_date: bool = False

  @property
  def splits(self) -> Dict[str, SplitInfo]:
    return self.info.splits

  @property
  def rows_rejected(self) -> int:
    return self.info.counts.rows_rejected


def build(schema: Union[str, Mapping, Schema], inputs: Union[str, Sequence[str]],
          output: str, *, build_options: Optional[BuildOptions] = None,
          input_format: Optional[str] = None,
          format_options: Optional[Mapping[str, Any]] = None,
          beam_args: Union[None, Sequence[str], PipelineOptions] = None,
          preprocess: Union[None, str, Callable] = None,
          preprocessing_fn: Union[None, str, Callable] = None,
          progress: bool = False, **option_keywords: Any) -> BuildResult:
  """Builds a TFRecord dataset and waits for it to finish.

  Args:
    schema: a schema file path, dict or Schema.
    inputs: file paths or globs (local, gs://, s3://, ...).
    output: the dataset directory.
    build_options: how the dataset is written (btr.BuildOptions: shards, sink,
      shuffle, thresholds, overwrite, force, ...); each of its fields may
      also be given as a keyword (`num_shards=3`), which replaces the
      field of `options`.
    input_format: csv, jsonl, json, parquet; None: from the extensions.
    format_options: source options, e.g. {"delimiter": ";"} for CSV.
    beam_args: Beam pipeline options (list of flags or PipelineOptions).
    preprocess: a function pyarrow.RecordBatch -> RecordBatch, or
      "module:function", run on the workers on every batch read before
      encoding: it gets every column of the input and returns the columns
      the schema reads, for the same rows in order (see
      beam_tfrecords.sources.preprocess). Checked here: it must pickle.
    preprocessing_fn: a TensorFlow Transform preprocessing_fn (or
      "module:function"), analyzed on the training split and applied to
      every split, alongside or instead of the schema's transform:
      features (it replaces the schema's transform.preprocessing_fn; see
      beam_tfrecords.tft). Traced here first.
    progress: show the build's progress on stderr (a live line on a
      terminal, else a line every few seconds); on runners other than the
      DirectRunner, the job's metrics as they report them.

  Returns:
    A BuildResult with the dataset.json content.

  Raises:
    TypeError: a keyword that is no option.
    SchemaError, InputError: before anything runs.
    BadRowsError: over a threshold; nothing is published.
    KeyboardInterrupt: the build was interrupted; its staging folder is
      removed and nothing is published.
  """
  started = time.time()
  opts = BuildOptions.with_keywords(build_options, option_keywords)
  del build_options  # the build options are `opts` from here on
  beam_opts, runner = pipeline_options(beam_args)
  # The launcher reads the schema, lists, reads headers and publishes
  # through FileSystems too: it needs the same file system options as the
  # workers (S3 endpoint and credentials, GCS project, ...).
  FileSystems.set_options(beam_opts)
  schema = load_schema(schema)
  patterns = [inputs] if isinstance(inputs, str) else list(inputs)
  check_output_path(output)
  output = output.rstrip("/")
  check_paths_reach_workers(beam_opts, list(patterns) + [output])
  if "://" not in output:  # workers run elsewhere: an absolute path
    output = os.path.abspath(output)
  schema = tft.with_preprocessing_fn(schema, preprocessing_fn)
  schema, plan, user_fn = _plan(schema, patterns, output, input_format,
                                format_options, preprocess, beam_opts)
  tft_key = tft.traced_key(schema)
  _check_transform_output(schema, output)
  _for_runner(runner, schema, opts, beam_opts, len(plan.units))
  _check_append(schema, opts)
  # Checked and locked (one build at a time per output: the lock is held
  # until the end), earlier builds recovered, the staging folder made: the
  # stage phase of its publication, on the launcher.
  publication, described = _publication(schema, plan, opts, output, patterns,
                                        user_fn, tft_key)
  staged = publication.stage(beam_opts, if_changed=not opts.force)
  if staged.previous is not None:
    _LOG.info("%s is up to date (same inputs, schema and options)", output)
    # (A killed build's units, whose publish the stage phase finished.)
    drop_output_units(output)
    return BuildResult(output=output, info=staged.previous,
                       seconds=time.time() - started, up_to_date=True)
  try:
    with memoized_dofn_specs():
      try:
        dataset = planning.dataset_plan(schema, plan, opts.resolved(schema),
                                        publication, described, user_fn)
        if opts.append:
          appending = append_plan(output, dataset.planned, described)
          dataset = dataclasses.replace(
              dataset, appending=appending,
              planned=dataclasses.replace(dataset.planned, inputs=(
                  appended_inputs(appending.previous.inputs, described))))
        store = _unit_store(schema, plan, user_fn, opts, output, runner,
                            dataset)
        keeping, dataset = _keeping(schema, plan, dataset, store, tft_key)
        pipeline = _pipeline(schema, plan, user_fn, dataset, runner,
                             beam_opts, keeping)
      except BaseException:  # nothing ran: no staging folder left behind
        publication.abandon()
        raise
      _run(pipeline, beam_opts, progress, sum(f.size for f in plan.files),
           publication, schema)
    _evict(store, opts, started)
    info = DatasetInfo.from_directory(output)
    _LOG.info("Published %s", output)
    return BuildResult(output=output, info=info,
                       seconds=time.time() - started)
  except KeyboardInterrupt:
    # Between the steps that remove the staging folder on an interruption
    # (Ctrl-C, SIGTERM): removed here, unless its publish began.
    publication.abandon()
    raise
  finally:
    publication.release()


def _publication(schema: Schema, plan: InputPlan, opts: BuildOptions,
                 output: str, patterns: List[str], user_fn,
                 tft_key: Dict[str, Any]) -> Tuple[Publication, InputsInfo]:
  """The build's publication into `output` (its build key, a new run id)
  and its inputs as dataset.json describes them."""
  fingerprint = planning.input_fingerprint(plan.files)
  key = planning.build_key(schema, plan, fingerprint, {
      **opts.key(),
      **({"preprocess": [user_fn.name, user_fn.digest]} if user_fn else {}),
      **tft_key})
  described = InputsInfo(plan.format, tuple(patterns),
                         tuple(planning.listed_inputs(plan)), fingerprint)
  return Publication(output, new_run(), key, opts.overwrite or opts.append,
                     tfmd_text(schema), "--overwrite"), described


# The --cache folder's size bound when --cache-size is not given.
CACHE_BYTES = 20 << 30


def _unit_store(schema: Schema, plan: InputPlan, user_fn,
                opts: BuildOptions, output: str, runner,
                dataset: DatasetPlan) -> Optional[str]:
  """Where this build keeps and finds finished read units
  (core.unit_cache): --cache's folder, else (resume: the default) the
  output's .units/ (a --no-resume build drops what a killed one left
  there); None
  where units are not kept, said why in the log."""
  if not opts.resume:
    drop_output_units(output)
  root = opts.cache or (output_units(output) if opts.resume else None)
  if root is None:
    return None
  why = None
  if user_fn is not None:
    why = "a preprocess function's output is not keyed"
  elif schema.media:
    why = "its media files are not keyed"
  elif dataset.sink != "deterministic":
    why = "Beam's sink deals records itself"
  elif schema.expect is not None and schema.expect.disjoint_splits:
    why = "expect: disjoint_splits compares every record"
  if why is not None:
    _LOG.info("read units are not kept for reuse (%s)", why)
    return None
  return os.path.abspath(root) if fs.is_local(root) else root


def _unit_keys(schema: Schema, plan: InputPlan,
               dataset: DatasetPlan) -> List[Optional[str]]:
  """Each read unit's key in a unit store: what its results depend on
  (core.unit_cache). How records are dealt to shards is not in it: a
  unit's parts are kept per deal (sinks.shards.deal_digest), and another
  deal's give its records back."""
  files = {f.path: f for f in plan.files}
  common = {"library": __version__,
            "native": native.CONTRACT if native.core() else None,
            "schema": schema.to_dict(), "columns": list(schema.columns),
            "statistics": dataset.statistics}
  keys: List[Optional[str]] = []
  for unit in plan.units:
    f = files.get(unit.path)
    keys.append(None if f is None else unit_key({
        **common, "unit": [unit.path, unit.format, unit.start, unit.end,
                           [list(o) for o in unit.options]],
        "file": [f.size, f.mtime]}))
  return keys


def _keeping(schema: Schema, plan: InputPlan, dataset: DatasetPlan,
             store: Optional[str], tft_key: Dict[str, Any]
             ) -> Tuple[Optional[Keeping], DatasetPlan]:
  """How the build keeps and reuses read units in `store` (None: it does
  not), and its plan with the store (and TFT's analysis) in it."""
  if store is None:
    return None, dataset
  keeping = Keeping(store, tuple(_unit_keys(schema, plan, dataset)),
                    FileSystems.join(dataset.staging, PARTS_DIR),
                    deal_digest(dataset.shards.shards, dataset.codec,
                                dataset.gzip_level, dataset.shuffle,
                                dataset.member_bytes))
  dataset = dataclasses.replace(dataset, units=store)
  if schema.transform is not None:
    dataset = _kept_analysis(dataset, keeping, tft_key)
  return keeping, dataset


def _kept_analysis(dataset: DatasetPlan, keeping: Keeping,
                   tft_key: Dict[str, Any]) -> DatasetPlan:
  """TensorFlow Transform's analysis kept as a phase in the unit store:
  under a key of every read unit's key (which name the inputs, the
  schema and its transform section) and the preprocessing_fn's; loaded
  here when a build kept it before (then it is not run again). Its
  analyzers combine over every row, and TFT gives no per-unit
  accumulators to keep: a new or changed input analyzes again, from the
  reused units' records. dataset.json's inputs say which
  (transform_analysis: reused or computed)."""
  if any(k is None for k in keeping.keys) or dataset.planned.inputs is None:
    return dataset
  import tensorflow_transform  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.tft.pipeline import KeptAnalysis  # pylint: disable=import-outside-toplevel
  key = unit_key({"analysis": tft_key, "units": sorted(keeping.keys),
                  "tft": tensorflow_transform.__version__})
  found = UnitStore(keeping.root).load(key)
  files = found[0].result if found else None
  if files is not None:
    _LOG.info("TensorFlow Transform's analysis reused from %s",
              keeping.root)
  planned = dataset.planned
  inputs = dataclasses.replace(planned.inputs, extra={
      **planned.inputs.extra,
      "transform_analysis": "reused" if files is not None else "computed"})
  return dataclasses.replace(
      dataset, analysis=KeptAnalysis(keeping.root, key, files),
      planned=dataclasses.replace(planned, inputs=inputs))


def _evict(store: Optional[str], opts: BuildOptions, started: float) -> None:
  """After the publish, --cache's folder cut to its size bound (this
  build's units stay). (The output's .units/ went before the switch:
  publish.finish.)"""
  if store is None or not opts.cache or (fs.is_local(store)
                                         and not os.path.isdir(store)):
    return
  size = parse_size(opts.cache_size) if opts.cache_size is not None else None
  bound = CACHE_BYTES if size is None else size
  removed = UnitStore(store).evict(bound, keep=started)
  if removed:
    _LOG.info("--cache %s: %d least recently used unit(s) evicted",
              store, len(removed))


def _pipeline(schema: Schema, plan: InputPlan, user_fn, dataset, runner,
              pipeline_options, keeping: Optional[Keeping] = None
              ) -> beam.Pipeline:
  """The build's pipeline: read the inputs, write the dataset."""
  if user_fn is None:  # (a function may leave no rows: not checked)
    dataset = dataclasses.replace(dataset, finish=dataset.finish._replace(
        units=tuple(plan.units), columns=tuple(schema.columns),
        runner=runner_name(pipeline_options)))
  _LOG.info("Building %s from %d file(s), %d read unit(s) -> %s",
            schema.name, len(plan.files), len(plan.units),
            dataset.finish.output)
  native.log_path(_LOG)
  pipeline = beam.Pipeline(runner=runner, options=pipeline_options)
  _ = (pipeline
       | "ReadInputs" >> ReadInputs(
           plan.units, schema.columns, user_fn,
           unit_bytes(plan.units, [(f.path, f.size) for f in plan.files]),
           keeping)
       # SourceBatch
       | "WriteDataset" >> WriteBatches(schema, dataset))
  return pipeline


def _anomalies_in(staging: str) -> List[Dict[str, Any]]:
  """The anomalies a failed build found (its staged anomalies.json)."""
  try:
    with FileSystems.open(FileSystems.join(staging, ANOMALIES_FILE)) as f:
      return json.loads(f.read().decode("utf-8"))["found"]
  except Exception:  # pylint: disable=broad-except
    return []


def _unshipped_transform(error: Exception, schema: Schema
                         ) -> Optional[InputError]:
  """The user's preprocessing_fn whose module a worker could not import
  (TFT traces it again on a worker to save the final graph), said so."""
  section = schema.transform
  if section is None or section.fn is None:
    return None
  module = getattr(section.fn, "__module__", None) or ""
  found = re.search(r"No module named '([\w.]+)'", str(error))
  if not found or not module or not (
      module == found.group(1) or module.startswith(found.group(1) + ".")):
    return None
  return InputError(
      f"the preprocessing_fn {section.preprocessing_fn} cannot be loaded on a "
      f"worker (ModuleNotFoundError: No module named '{found.group(1)}'): "
      f"TensorFlow Transform traces it again there; the {SHIPPING}")


def _summary(error: Exception) -> str:
  """A failed job's error in a line or two: TensorFlow's own message
  where there is one (the line before its "[[{{node" line, or a failed
  assertion), else the last line naming an error and the one after it,
  else the first line."""
  lines = [line.strip() for line in str(error).strip().splitlines()
           if line.strip()]
  if not lines:
    return type(error).__name__
  for i, line in enumerate(lines):
    # TensorFlow's message sits right before the "[[{{node ...}}]]" line.
    if i and line.startswith("[[{{node"):
      return f"{lines[0][:200]} ... {lines[i - 1][:300]}"
  for line in lines:
    if line.startswith("assertion failed"):
      return f"{lines[0][:200]} ... {line[:300]}"
  named = [i for i, line in enumerate(lines)
           if re.search(r"\w(Error|Exception): ", line)]
  if named:
    return " ".join(lines[named[-1]:named[-1] + 2])[:500]
  return f"{type(error).__name__}: {lines[0][:500]}"


def _for_runner(runner, schema: Schema, opts: BuildOptions,
                beam_opts: PipelineOptions, units: int) -> None:
  """What the runner cannot run refused (Dask: see runners.gaps), a
  worker image whose versions are not the launcher's refused
  (runners.image_check), and Dask's partitions set."""
  check_worker_image(beam_opts)
  if is_dask(runner):
    if schema.transform is not None:
      raise InputError(
          "schemas with transform: cannot run on the DaskRunner: "
          "TensorFlow Transform's analyzers are multi-output ParDos and "
          "side inputs, which Beam 2.77's DaskRunner does not translate "
          "(it would publish wrong data); build them on the DirectRunner, "
          "Dataflow or a portable runner (Flink, Spark)")
    spread_on_dask(beam_opts, units)
  if is_prism(runner) and opts.sink == "beam":
    raise InputError(
        "--sink beam cannot run on the PrismRunner: Beam 2.77's Prism "
        "starts a GroupByKey that WriteToTFRecord's file names flow into "
        "before they arrive (the build's count check fails; "
        "docs/operations.md, Prism); use the default sink, or Beam's sink "
        "on the DirectRunner, Flink or Spark")


def _check_transform_output(schema: Schema, output: str) -> None:
  """A transform: section writes TFT's graph and scratch files with
  TensorFlow's own file system, which knows local paths and gs:// but
  not s3:// (that takes tensorflow-io's plugin): refused before anything
  runs, rather than deep in the analysis."""
  if schema.transform is None or "://" not in output:
    return
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  scheme = output.split("://", 1)[0]
  try:
    tf.io.gfile.exists(f"{scheme}://beam-tfrecords-probe/none")
  except tf.errors.UnimplementedError as e:
    raise InputError(
        f"transform: cannot write to {output}: TensorFlow Transform writes "
        f"its graph with TensorFlow's file system, which has no {scheme}:// "
        "here; write the dataset to a local folder or gs://, or install "
        "TensorFlow's plugin for it (tensorflow-io)") from e
  except Exception:  # pylint: disable=broad-except
    pass  # (it knows the scheme: a missing bucket or credentials is fine)


def _check_append(schema: Schema, opts: BuildOptions) -> None:
  """What --append cannot add to, refused before anything runs."""
  if not opts.append:
    return
  why = None
  if opts.overwrite:
    why = "--overwrite replaces the dataset; give one of the two"
  elif schema.transform is not None:
    why = ("TensorFlow Transform's analyzers are over every row: the new "
           "rows would change the old ones' transform")
  elif schema.is_sequence and schema.group_by:
    why = ("a group_by key in both the old and the new inputs would be two "
           "SequenceExamples")
  elif opts.tfds:
    why = "TFDS's metadata names every shard by one template and count"
  elif opts.sink != "deterministic":
    why = "Beam's sink names its own shards"
  elif schema.expect is not None and (schema.expect.disjoint_splits
                                      or schema.expect.disjoint_keys):
    why = "expect: disjoint_splits / disjoint_keys compare every record"
  if why is not None:
    raise InputError(f"--append cannot be used here: {why}; rebuild the "
                     "dataset whole instead")


def _plan(schema: Schema, patterns: List[str], output: str, input_format,
          format_options, preprocess, pipeline_options
          ) -> Tuple[Schema, InputPlan, Optional[Preprocess]]:
  """The inputs (files, read units, format options), the schema with its
  media settings resolved, and the preprocess function (checked)."""
  needed = planning.needed_columns(schema)
  user_fn = resolve_preprocess(preprocess)
  plan = plan_inputs(patterns, () if user_fn else schema.columns,
                     {} if user_fn else needed, input_format, format_options,
                     lambda: planning.scalar_columns(schema),
                     TRANSFORM_BLOCK_SIZE if schema.transform else None)
  if user_fn is not None and plan.format_options.get("column_names"):
    # Inputs with a fixed set of columns (CSV, Parquet) must have those
    # the schema needs; with a function, its output is known on the
    # workers only, so they are checked there, after it ran. (In JSON and
    # TFRecord input an absent column is a missing value.)
    user_fn = dataclasses.replace(user_fn, needed=tuple(dict.fromkeys(
        needed)))
  schema = planning.resolve_media(schema, plan)
  planning.check_inputs_outside(output, plan, schema)
  check_paths_reach_workers(pipeline_options, [
      m.options["base_dir"] for m in schema.media
      if m.kind is MediaKind.IMAGE and m.options.get("base_dir")])
  return schema, plan, user_fn


def _run(pipeline, pipeline_options, progress: bool, input_bytes: int,
         publication: Publication, schema: Schema) -> None:
  """Runs the pipeline; on Ctrl-C or a failed write into the output,
  removes the staging folder (a publish that began is finished instead)."""
  output, staging = publication.output, publication.staging
  try:
    run_pipeline(pipeline, pipeline_options, progress, input_bytes)
  except KeyboardInterrupt:
    if publication.interrupted():
      # Interrupted while publishing: the switch is finished, not undone.
      _LOG.warning("interrupted while publishing %s: finished publishing "
                   "first", output)
      return
    raise
  except Exception as e:  # pylint: disable=broad-except
    typed = from_worker(e)
    if isinstance(typed, (OutputError, PublishInterruptedError,
                          OutputBusyError)):
      raise typed from e  # the publish said what happened
    failure = publication.failure(e)
    if failure is not None:
      raise failure from e
    unshipped = _unshipped_transform(e, schema)
    if unshipped is not None:
      raise unshipped from e
    if isinstance(typed, AnomalyError):
      typed.anomalies = _anomalies_in(staging)
    if typed is e:
      job = job_failure(e, runner_name(pipeline_options).rsplit(".", 1)[-1])
      if job is not None:
        raise job from e
      _LOG.error("the build's job failed on the runner; nothing was "
                 "published (%s keeps its previous content; the next build "
                 "removes this one's staging folder, %s): %s", output,
                 staging, _summary(e))
      raise
    raise typed from e

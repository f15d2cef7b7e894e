"""build(): source -> encode -> sink, wired as one Beam pipeline.

Everything that can be checked is checked before the pipeline is built: the
schema (when loaded), the inputs (globs, headers, columns) and the output
(an existing finished dataset is kept unless overwrite is asked for).
"""

import dataclasses
import datetime
import json
import logging
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner

from beam_tfrecords.errors import InputError
from beam_tfrecords.schema import Schema, load_schema, spec_to_json
from beam_tfrecords.sinks import (DATASET_JSON, ERRORS_DIR, SHARD_SUFFIX,
                                  SUCCESS, Commit, WriteErrors, WriteSplit)
from beam_tfrecords.sources import plan_inputs
from beam_tfrecords.transforms import (STAT_FIELDS, Encode, ReadInputs,
                                       dead_letter_json)
from beam_tfrecords.version import __version__

__all__ = ["build", "BuildResult", "DEFAULT_SPLIT"]

_LOG = logging.getLogger(__name__)
DEFAULT_SPLIT = "train"


class _LocalDirectRunner(SwitchingDirectRunner):
  """The DirectRunner without its first attempt at Prism.

  Beam 2.77's DirectRunner first downloads a Prism binary from the internet
  and falls back to the in-process FnApiRunner when that fails: a delay and
  a page of warnings on machines without internet. In 2.77 the
  `_is_interactive` flag only gates that attempt (direct_runner.py,
  _PrismRunnerSupportVisitor), so setting it goes straight to the
  FnApiRunner, which honours --direct_num_workers / --direct_running_mode.
  """
  _is_interactive = True


@dataclasses.dataclass(frozen=True)
class BuildResult:
  """What a finished build wrote (the content of its dataset.json)."""
  output: str
  metadata: Dict[str, Any]
  seconds: float

  @property
  def splits(self) -> Dict[str, dict]:
    return self.metadata["splits"]

  @property
  def rows_rejected(self) -> int:
    return self.metadata["counts"]["rows_rejected"]


def _pipeline_options(beam_args: Union[None, Sequence[str], PipelineOptions]
                      ) -> PipelineOptions:
  if isinstance(beam_args, PipelineOptions):
    return beam_args
  return PipelineOptions(list(beam_args or []))


def _runner(options: PipelineOptions):
  name = options.view_as(StandardOptions).runner
  if name in (None, "DirectRunner", "SwitchingDirectRunner"):
    return _LocalDirectRunner()
  return None  # PipelineOptions names it


def _prepare_output(output: str, overwrite: bool) -> None:
  success = FileSystems.join(output, SUCCESS)
  if FileSystems.exists(success) and not overwrite:
    raise InputError(f"{output} already holds a finished dataset; pass "
                     "--overwrite to replace it")
  old = []
  if FileSystems.exists(output):
    for pattern in (f"*{SHARD_SUFFIX}", DATASET_JSON, SUCCESS,
                    f"{ERRORS_DIR}/*"):
      for m in FileSystems.match([FileSystems.join(output, pattern)])[0] \
          .metadata_list:
        old.append(m.path)
  if old:
    # _SUCCESS first: from here on the directory is not a finished dataset.
    old.sort(key=lambda p: not p.endswith(SUCCESS))
    FileSystems.delete(old)


def _sum_columns(rows) -> tuple:
  """Column sums of STAT_FIELDS tuples; zeros if none."""
  return tuple(sum(c) for c in zip(*rows)) or (0,) * len(STAT_FIELDS)


def build(schema: Union[str, Mapping, Schema], inputs: Union[str, Sequence[str]],
          output: str, *, input_format: Optional[str] = None,
          num_shards: Optional[int] = None,
          format_options: Optional[Mapping[str, Any]] = None,
          beam_args: Union[None, Sequence[str], PipelineOptions] = None,
          overwrite: bool = False) -> BuildResult:
  """Builds a TFRecord dataset and waits for it to finish.

  Args:
    schema: a schema file path, dict or Schema.
    inputs: file paths or globs (local, gs://, s3://, ...).
    output: the dataset directory.
    input_format: csv, jsonl, json, parquet; None: from the extensions.
    num_shards: shard files per split; None lets the runner decide.
    format_options: source options, e.g. {"delimiter": ";"} for CSV.
    beam_args: Beam pipeline options (list of flags or PipelineOptions).
    overwrite: replace an existing finished dataset.

  Returns:
    A BuildResult with the dataset.json content.

  Raises:
    SchemaError, InputError: before anything runs.
  """
  started = time.time()
  schema = load_schema(schema)
  patterns = [inputs] if isinstance(inputs, str) else list(inputs)
  output = output.rstrip("/")
  needed = [f.column for f in schema.all_features
            if f.column is not None and f.default is None]
  needed += [c for c, _ in schema.group_by] + [k.column for k in
                                               schema.order_by]
  plan = plan_inputs(patterns, schema.columns, needed, input_format,
                     format_options)
  _prepare_output(output, overwrite)
  options = _pipeline_options(beam_args)
  static = {
      "name": schema.name,
      "record": schema.record.value,
      "schema": schema.to_dict(),
      "feature_spec": spec_to_json(schema),
      "compression": "GZIP",
      "inputs": {"format": plan.format, "patterns": patterns,
                 "files": [{"path": f.path, "bytes": f.size}
                           for f in plan.files]},
      "options": {"num_shards": num_shards,
                  "format_options": {k: v for k, v in plan.options.items()
                                     if k != "column_names"}},
      "tool": {"name": "beam-tfrecords", "version": __version__},
  }
  _LOG.info("Building %s from %d file(s), %d read unit(s) -> %s",
            schema.name, len(plan.files), len(plan.units), output)
  pipeline = beam.Pipeline(runner=_runner(options), options=options)
  encoded = (pipeline
             | "ReadInputs" >> ReadInputs(plan.units, schema.columns)
             # SourceBatch
             | "Encode" >> Encode(schema))
  # records: bytes; errors: dead-letter dicts; stats: STAT_FIELDS tuples
  shards = (encoded["records"]
            | f"WriteSplit[{DEFAULT_SPLIT}]" >> WriteSplit(
                output, DEFAULT_SPLIT, num_shards))
  errors = (encoded["errors"]
            | "ErrorsToJson" >> beam.Map(dead_letter_json)
            | "WriteErrors" >> WriteErrors(output))
  stats = (encoded["stats"]
           | "SumStats" >> beam.CombineGlobally(_sum_columns)
           | "StatsPart" >> beam.Map(lambda s: {"kind": "stats",
                                                "counts": list(s)}))
  _ = ((shards, errors, stats)
       | "Parts" >> beam.Flatten()
       | "Commit" >> Commit(output, static, STAT_FIELDS))
  result = pipeline.run()
  result.wait_until_finish()
  with FileSystems.open(FileSystems.join(output, DATASET_JSON)) as f:
    metadata = json.loads(f.read().decode("utf-8"))
  return BuildResult(output=output, metadata=metadata,
                     seconds=time.time() - started)

"""The public PTransforms: one schema, used inside your own Beam pipeline.

    with beam.Pipeline(options=opts) as p:
      rows = p | beam.io.ReadFromBigQuery(table="proj:ds.events")  # dicts
      rows | btr.WriteDataset("schemas/events.yaml", "gs://bucket/ds")

`WriteDataset` writes a finished dataset (shards per split, errors/,
dataset.json, schema.pbtxt, _SUCCESS last, with the CLI's staging, lock,
thresholds and publish); `EncodeRecords` gives the serialized records and
the dead-letter rows, for a sink of your own. Both take dicts (column ->
value) or `pyarrow.RecordBatch`es (or Tables). The same content gives the
same bytes on every run and worker count: records are ordered by a digest
of the rows, not by arrival (see transforms.elements).
"""

import dataclasses
import os
import types
from typing import Any, Callable, Mapping, NamedTuple, Optional, Union

import apache_beam as beam

from beam_tfrecords import tft
from beam_tfrecords.building import planning
from beam_tfrecords.building.options import BuildOptions
from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.info import InputsInfo
from beam_tfrecords.publish.lock import new_run
from beam_tfrecords.publish.output import check_output_path
from beam_tfrecords.publish.publication import Publication, StageOutput
from beam_tfrecords.schema import Schema, load_schema
from beam_tfrecords.schema.tfmd import tfmd_text
from beam_tfrecords.transforms.dataset import WriteBatches
from beam_tfrecords.transforms.elements import PCOLLECTION, ToSourceBatches
from beam_tfrecords.transforms.encode import Encode

__all__ = ["WriteDataset", "EncodeRecords", "EncodedRecords"]

# What a PCollection input is, for the planning functions.
_PCOLLECTION_PLAN = types.SimpleNamespace(format="pcollection", format_options={},
                                          files=[], units=[])


def _schema_for_pcollection(schema: Union[str, Mapping, Schema]) -> Schema:
  return planning.resolve_media(load_schema(schema), _PCOLLECTION_PLAN)


class WriteDataset(beam.PTransform):
  """Rows (dicts or RecordBatches) -> a finished dataset in `output`.

  The output PCollection holds one element: the published dataset.json
  as a btr.DatasetInfo (`.counts.rows_read`, `.splits["train"]`, ...). Building the graph only plans: the pipeline's first step, when
  it runs, checks and locks the output and makes the staging folder (a
  graph built and never run leaves nothing), and its last step publishes
  and releases the lock. If the pipeline fails, the lock is taken over
  once the process that took it (the worker that ran that step) has
  ended, or after its lease. A graph run twice (a classic template
  launched again) runs as one build: launch it again only once the last
  launch has ended.

  Args:
    schema: a schema file path, dict or Schema.
    output: the dataset folder (local, gs://, s3://, ...).
    options: how the dataset is written (btr.BuildOptions, as for
      build()); each of its fields may also be given as a keyword
      (`num_shards=3`). With no `num_shards`: one file per split,
      continued in further files every `max_shard_size` (256 MiB) -- give
      a count to write in parallel. The sink is the deterministic one, and
      the dataset is always built (`force` changes nothing here).
    preprocessing_fn: a TensorFlow Transform preprocessing_fn (or
      "module:function"), as for build(); traced here first.
  """

  def __init__(self, schema: Union[str, Mapping, Schema], output: str, *,
               build_options: Optional[BuildOptions] = None,
               preprocessing_fn: Union[None, str, Callable[..., Any]] = None,
               **option_keywords: Any):
    super().__init__()
    self._schema = tft.with_preprocessing_fn(
        _schema_for_pcollection(schema), preprocessing_fn)
    self._tft_key = tft.traced_key(self._schema)
    self._output = output
    self._options = BuildOptions.with_keywords(build_options, option_keywords,
                                               "WriteDataset()")
    if self._options.sink != "deterministic":
      raise InputError("WriteDataset writes with the deterministic sink; "
                       "for Beam's WriteToTFRecord use EncodeRecords | "
                       "beam.io.WriteToTFRecord")
    self._options = dataclasses.replace(self._options, force=True)

  def expand(self, rows):
    schema, opts = self._schema, self._options
    options = rows.pipeline.options
    if options is not None:
      FileSystems.set_options(options)
    check_output_path(self._output)
    output = self._output.rstrip("/")
    if "://" not in output:
      output = os.path.abspath(output)
    key = planning.build_key(schema, _PCOLLECTION_PLAN, "", {
        **opts.key(), **self._tft_key})
    # Only planned here: the output is checked, locked and staged by the
    # pipeline's first step when it runs (as Beam's own file sinks do), and
    # released by its last step once it has published.
    publication = Publication(output, new_run(), key, opts.overwrite,
                              tfmd_text(schema))
    plan = planning.dataset_plan(
        schema, _PCOLLECTION_PLAN, opts.resolved(schema), publication,
        InputsInfo("pcollection", (), (), None, source=PCOLLECTION), None)
    staged = rows.pipeline | "Stage" >> StageOutput(publication)
    return (rows
            | "ToBatches" >> ToSourceBatches(schema.columns)
            | "AfterStage" >> beam.Map(_after_stage,
                                       beam.pvalue.AsSingleton(staged))
            | "Write" >> WriteBatches(schema, plan, staged))


def _after_stage(batch, _staging):
  return batch


class EncodedRecords(NamedTuple):
  """EncodeRecords' result: `records`, (split, serialized record bytes);
  `errors`, dead-letter dicts (source, element, reason, problems, raw)."""
  records: Any
  errors: Any


def _records(batch):
  split, _, records = batch
  return [(split, r) for r in records]


def _errors(keyed):
  return list(keyed[1])


class EncodeRecords(beam.PTransform):
  """Rows (dicts or RecordBatches) -> EncodedRecords(records, errors), for
  a sink of your own:

      encoded = rows | btr.EncodeRecords("schemas/events.yaml")
      (encoded.records | beam.Filter(lambda r: r[0] == "train")
                       | beam.Values()
                       | beam.io.WriteToTFRecord("out/train",
                                                 file_name_suffix=".gz"))
  """

  def __init__(self, schema: Union[str, Mapping, Schema]):
    super().__init__()
    self._schema = _schema_for_pcollection(schema)
    if self._schema.transform is not None:
      raise InputError("EncodeRecords writes no TensorFlow Transform "
                       "output; use WriteDataset for a schema with "
                       "transform:")

  def expand(self, rows):
    encoded = (rows
               | "ToBatches" >> ToSourceBatches(self._schema.columns)
               | "Encode" >> Encode(self._schema, statistics=False))
    return EncodedRecords(
        records=encoded["records"] | "Records" >> beam.FlatMap(_records),
        errors=encoded["errors"] | "Errors" >> beam.FlatMap(_errors))

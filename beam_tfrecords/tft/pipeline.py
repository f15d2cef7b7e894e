"""TensorFlow Transform in the build's pipeline: analyze the training
split, then transform every raw shard file, read back from disk.

    (batches, raw_files) | TransformRecords(schema, ...)
    # -> a ShardWritten (transformed=True) per transformed file

* **Analyze:** the analyzed split's raw record batches are decoded into
  Arrow RecordBatches by tfx-bsl's decoder (C++) and go through
  `tft_beam.AnalyzeDataset` (a combine: memory does not grow with the
  rows), then `WriteTransformFn` writes TFT's layout (transform_fn/,
  transformed_metadata/) and the raw schema beside it (metadata/, as TFX's
  Transform writes it).
* **Transform:** once the transform graph is written (a side input), each
  raw shard, streamed from the files the build wrote, goes through it in
  batches and is written as the transformed shard of the same name,
  record for record in the same order (`--shuffle` included). Nothing is
  held in memory but a batch: TFT's own `TransformDataset` would keep
  every raw record until the analysis is done (the DirectRunner holds
  them in memory). The same graph the serving recipe loads
  (`TFTransformOutput.transform_raw_features`) makes the values.

With `keep_raw: false` the raw shards are written under the staging
folder's part files, which are removed when the dataset is published.
"""

import itertools
import os
from typing import Any, Dict, List, NamedTuple, Optional

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes

from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.layout import RAW_METADATA_DIR
from beam_tfrecords.core.shard_reader import iter_tfrecords
from beam_tfrecords.core.unit_cache import (KeepParts, KeptParts, UnitRead,
                                            UnitStore)
from beam_tfrecords.core.tfrecord_files import frame_records
from beam_tfrecords.read.arrays import tfx_decoder
from beam_tfrecords.schema import Schema
from beam_tfrecords.core.members import MEMBER_CAP
from beam_tfrecords.sinks.codec import TFRECORD_GZIP
from beam_tfrecords.sinks.shard_files import ShardFiles
from beam_tfrecords.sinks.shards import kept_records
from beam_tfrecords.tft.functions import (analyze_columns, combined_fn,
                                          tfxio_source)
from beam_tfrecords.tft.outputs import TransformedEncoder

__all__ = ["TransformRecords", "BATCH_ROWS", "analyzed_source",
           "KeptAnalysis", "ANALYSIS_DIRS"]

# Rows transformed at a time (what a transform holds in memory).
BATCH_ROWS = 8192
# What the analysis writes (tft_beam.WriteTransformFn), under the
# transform folder: what a kept analysis holds.
ANALYSIS_DIRS = ("transform_fn", "transformed_metadata")


class KeptAnalysis(NamedTuple):
  """The analysis as a phase kept in a unit store (core.unit_cache):
  the store's folder and the analysis's key there; `files`, what it
  wrote (`_analysis_files`), when it was kept before (then it is not
  run again), else None (it runs, and is kept)."""
  root: str
  key: str
  files: Optional[Dict[str, Any]] = None


def _analysis_files(transform_dir: str) -> Dict[str, Any]:
  """{"files": {path under transform_dir: bytes}, "folders": [path]} of
  what the analysis wrote (ANALYSIS_DIRS; folders, which may be empty:
  a SavedModel's assets/)."""
  files: Dict[str, bytes] = {}
  folders: List[str] = []
  for top in ANALYSIS_DIRS:
    base = FileSystems.join(transform_dir, top)
    if "://" not in transform_dir:
      for folder, _, names in os.walk(base):
        folders.append(os.path.relpath(folder, transform_dir))
        for name in names:
          path = os.path.join(folder, name)
          with open(path, "rb") as f:
            files[os.path.relpath(path, transform_dir)] = f.read()
      continue
    for match in FileSystems.match([FileSystems.join(base, "**")]):
      for info in match.metadata_list:
        with FileSystems.open(info.path, compression_type=(
            CompressionTypes.UNCOMPRESSED)) as f:
          files[info.path[len(transform_dir.rstrip("/")) + 1:]] = f.read()
  return {"files": files, "folders": sorted(folders)}


def _keep_analysis(_, kept: KeptAnalysis, transform_dir: str) -> str:
  """Keeps what the analysis wrote; returns the transform folder. (An
  optimization: a store that cannot be written is logged, not fatal.)"""
  store = UnitStore(kept.root)
  if store.put(kept.key, 0, _analysis_files(transform_dir)):
    store.complete(kept.key, 1, {"analysis": ", ".join(ANALYSIS_DIRS)})
  return transform_dir


def _restore_analysis(analysis: Dict[str, Any], transform_dir: str) -> str:
  """Writes a kept analysis's files where the analysis would have."""
  for folder in analysis["folders"]:
    if "://" not in transform_dir:
      os.makedirs(os.path.join(transform_dir, folder), exist_ok=True)
  for name, data in sorted(analysis["files"].items()):
    with FileSystems.create(FileSystems.join(transform_dir, name),
                            compression_type=(
                                CompressionTypes.UNCOMPRESSED)) as f:
      f.write(data)
  return transform_dir


def _records(batch) -> Optional[list]:
  """The records of a batch on its way to the sink: (split, key,
  records), or where units are kept (core.unit_cache) a batch whose
  parts are kept (KeepParts) or a reused one's kept parts (KeptParts:
  inflated and unframed, in their order); None for the end of a unit."""
  if isinstance(batch, UnitRead):
    return None
  if isinstance(batch, KeptParts):
    return kept_records(batch)
  records = batch.records if isinstance(batch, KeepParts) else batch[2]
  # (a list, a Ragged, or grouped sequences' GroupedRecords)
  return records if isinstance(records, list) else list(records)


def _split_of(batch) -> Optional[str]:
  return None if isinstance(batch, UnitRead) else batch[0]


class _ToRecordBatchFn(beam.DoFn):
  """Batches of records (see `_records`) -> RecordBatches of the
  records' `columns`."""

  def __init__(self, tfmd_schema: bytes, sequence: bool, columns: List[str]):
    self._tfmd_schema = tfmd_schema
    self._sequence = sequence
    self._columns = columns
    self._decode: Any = None  # made in setup(): not picklable

  def setup(self):
    self._decode = tfx_decoder(self._tfmd_schema, self._sequence).DecodeBatch

  def process(self, batch):
    records = _records(batch) or []
    for start in range(0, len(records), BATCH_ROWS):
      # In the analyzed source's column order (its TensorAdapter's).
      yield self._decode(records[start:start + BATCH_ROWS]).select(
          self._columns)


def analyzed_source(schema: Schema):
  """(TensorAdapterConfig, TFMD schema to decode with) of what TFT's
  analysis reads: only the features its analyzers need
  (`tft.get_analyze_input_columns`), as TFX's Transform projects its
  analysis data; a SequenceExample schema's features all."""
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.schema.tfmd import to_tfmd
  tfmd, source = to_tfmd(schema), tfxio_source(schema)
  if schema.is_sequence:
    return source.TensorAdapterConfig(), tfmd
  needed = set(analyze_columns(schema))
  if not needed:
    return source.TensorAdapterConfig(), tfmd
  # (The adapter keeps the original type specs: TFT traces the function
  # on every feature and feeds the analyzers these.)
  config = source.Project(sorted(needed)).TensorAdapterConfig()
  decoded = type(tfmd)()
  decoded.CopyFrom(tfmd)
  del decoded.feature[:]
  columns = set(config.arrow_schema.names)  # what _ToRecordBatchFn selects
  decoded.feature.extend(f for f in tfmd.feature if f.name in columns)
  return config, decoded


class _TransformShardFn(beam.DoFn):
  """((split, shard), [ShardWritten of the raw shard's files]) -> the
  transformed shard's files (ShardWritten, transformed=True).

  Reads the raw files in order, transforms BATCH_ROWS records at a time
  with the written transform graph and writes the transformed records as
  the same shard of the transformed folder (a shard past `max_bytes`
  continues in further files, as WriteShards does)."""

  def __init__(self, schema: Schema, raw_dir: str, out_dir: str,
               transform_dir: str, num_shards: Dict[str, int],
               level: Optional[int],
               max_bytes: Optional[Dict[str, Optional[int]]],
               member_cap: int = MEMBER_CAP):
    self._schema = schema
    self._cap = member_cap
    self._raw_dir, self._out_dir = raw_dir, out_dir
    self._transform_dir = transform_dir
    self._n = dict(num_shards)
    self._level = level
    self._max = dict(max_bytes or {})
    self._state: Any = None  # (decode, tensors, transform, encoder)

  def _setup(self):
    # pylint: disable=import-outside-toplevel
    import tensorflow_transform as tft
    from tfx_bsl.public import tfxio
    from beam_tfrecords.schema.tfmd import to_tfmd
    source = tfxio_source(self._schema)
    adapter = tfxio.TensorAdapter(source.TensorAdapterConfig())
    output = tft.TFTransformOutput(self._transform_dir)
    self._state = (
        tfx_decoder(to_tfmd(self._schema).SerializeToString(),
                 self._schema.is_sequence).DecodeBatch,
        lambda batch: adapter.ToBatchTensors(batch,
                                             produce_eager_tensors=True),
        output.transform_raw_features,
        TransformedEncoder(self._schema.is_sequence))

  def _transformed(self, records: List[bytes]) -> List[bytes]:
    decode, tensors, transform, encoder = self._state
    return encoder.encode(transform(tensors(decode(records))), len(records))

  def process(self, element, _graph_written):
    (split, shard), files = element
    if self._state is None:
      self._setup()
    files = sorted(files, key=lambda f: f.roll)
    out = ShardFiles(self._out_dir, split, shard, self._n[split],
                     TFRECORD_GZIP, self._level, self._max.get(split),
                     expected=sum(f.bytes for f in files),
                     member_cap=self._cap)
    for f in files:
      records = iter_tfrecords(FileSystems.join(self._raw_dir, f.file),
                               "gzip", check_crc=False)
      while True:
        batch = list(itertools.islice(records, BATCH_ROWS))
        if not batch:
          break
        out.inline(frame_records(self._transformed(batch)), len(batch))
    for written in out.close():
      yield written._replace(transformed=True)


class TransformRecords(beam.PTransform):
  """(raw record batches, the raw shards' ShardWritten) -> the transformed
  shards' ShardWritten; the transform graph written to `transform_dir`.

  Args:
    schema: a Schema with a `transform` section.
    transform_dir: where WriteTransformFn writes (the staging folder).
    temp_dir: TFT's scratch directory.
    raw_dir: the folder the raw ShardWritten name files in.
    out_dir: the transformed shards' folder.
    num_shards: split -> shards (as the raw shards).
    gzip_level: None for ISA-L's fast level, or a zlib level 1-9.
    max_bytes: split -> the largest file size, or None.
    member_cap: framed bytes per gzip member at most.
    kept: the analysis kept as a phase (KeptAnalysis: kept before, so
      restored and not run; or to keep once it ran), or None.
  """

  def __init__(self, schema: Schema, transform_dir: str, temp_dir: str,
               raw_dir: str, out_dir: str, num_shards: Dict[str, int],
               gzip_level: Optional[int] = None,
               max_bytes: Optional[Dict[str, Optional[int]]] = None,
               member_cap: int = MEMBER_CAP,
               kept: Optional[KeptAnalysis] = None):
    super().__init__()
    self._kept = kept
    self._cap = member_cap
    self._schema = schema
    self._transform_dir, self._temp_dir = transform_dir, temp_dir
    self._raw_dir, self._out_dir = raw_dir, out_dir
    self._n = dict(num_shards)
    self._level = gzip_level
    self._max = max_bytes

  def _analysis(self, batches):
    """The transform graph, written (restored where it was kept, else
    analyzed, and kept where asked); a one-element PCollection once it
    is. The raw schema beside it, as TFX's Transform writes it: what
    tft.TFTransformOutput(dir).raw_feature_spec() reads (serving)."""
    # pylint: disable=import-outside-toplevel
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata
    from beam_tfrecords.schema.tfmd import to_tfmd
    kept, pipeline = self._kept, batches.pipeline
    with tft_beam.Context(temp_dir=self._temp_dir):
      _ = (dataset_metadata.DatasetMetadata(to_tfmd(self._schema))
           | "WriteRawMetadata" >> tft_beam.WriteMetadata(
               FileSystems.join(self._transform_dir, RAW_METADATA_DIR),
               pipeline))
    if kept is not None and kept.files is not None:
      return (pipeline
              | "KeptAnalysis" >> beam.Create([kept.files])
              | "RestoreAnalysis" >> beam.Map(_restore_analysis,
                                              self._transform_dir))
    written = self._analyze(batches)
    if kept is None:
      return written
    return written | "KeepAnalysis" >> beam.Map(_keep_analysis, kept,
                                                 self._transform_dir)

  def _analyze(self, batches):
    """The transform graph, written; a one-element PCollection once it
    is."""
    # pylint: disable=import-outside-toplevel
    import tensorflow_transform.beam as tft_beam
    schema = self._schema
    section = schema.transform
    assert section is not None  # a schema with a transform section (see Args)
    config, decoded = analyzed_source(schema)
    train = (batches
             | "AnalyzedSplit" >> beam.Filter(
                 lambda c, s=section.analyze_split: _split_of(c) == s)
             | "ToRecordBatches" >> beam.ParDo(_ToRecordBatchFn(
                 decoded.SerializeToString(), schema.is_sequence,
                 list(config.arrow_schema.names))))
    with tft_beam.Context(temp_dir=self._temp_dir):
      transform_fn = ((train, config)
                      | "Analyze" >> tft_beam.AnalyzeDataset(
                          combined_fn(schema)))
      return (transform_fn
              | "WriteTransformFn" >> tft_beam.WriteTransformFn(
                  self._transform_dir))

  def expand(self, pcolls):
    batches, raw_files = pcolls
    written = self._analysis(batches)
    return (raw_files
            # ShardWritten of the raw shards
            | "ByShard" >> beam.Map(lambda f: ((f.split, f.writer), f))
            | "GroupShardFiles" >> beam.GroupByKey()
            # ((split, shard), [ShardWritten])
            | "TransformShards" >> beam.ParDo(
                _TransformShardFn(self._schema, self._raw_dir, self._out_dir,
                                  self._transform_dir, self._n, self._level,
                                  self._max, self._cap),
                beam.pvalue.AsList(written)).with_output_types(Any))
            # ShardWritten (transformed=True)

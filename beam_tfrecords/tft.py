"""TensorFlow Transform from the schema's `transform:` section.

    transform:
      keep_raw: true                    # also write the raw records
      features:
        rating_z:  {scale_to_z_score: rating}
        rating_01: {scale_to_0_1: rating}
        title_id:  {compute_and_apply_vocabulary: title, top_k: 1000,
                    frequency_threshold: 2, num_oov_buckets: 1}
        ts_bucket: {bucketize: timestamp, num_buckets: 10}
        user_hash: {hash_strings: user, hash_buckets: 100}
        label:     {pass: label}

`TransformRecords` takes the build's raw record chunks (split, key,
[serialized Example]), decodes each chunk into an Arrow RecordBatch with
tfx-bsl's decoder (C++) and feeds TFT through a TFXIO TensorAdapterConfig:
`AnalyzeDataset` on the training split only, `TransformDataset` on every
split. The chunk key and row index travel with each row as TFT passthrough
columns, so the transformed records are regrouped into the same chunks, in
the same order: the transformed shards are as deterministic as the raw
ones. The transform graph is written in TFT's layout (transform_fn/,
transformed_metadata/), which `tft.TFTransformOutput(dataset_dir)` reads;
`beam_tfrecords.reader.transform_output` returns it, and the raw schema
beside it (`metadata/`, as TFX's Transform writes it), so TFX's serving
recipe works: `raw_feature_spec()`, then `transform_features_layer()`.

The user's own `preprocessing_fn`, as TFX's Transform component takes it
(a module file's function):

    transform:
      preprocessing_fn: my_package.transform:preprocessing_fn

    btr.build(schema, inputs, output, preprocessing_fn=preprocessing_fn)

It gets the stored features as TFT gives them (a dense tensor for a
feature every record has, a SparseTensor otherwise) and returns the
transformed features; any `tft.*` analyzer and any TensorFlow op may be
in it. With declared `features:` too, both run on the same inputs and
their outputs are merged (a name in both is refused). TFT traces the
function on the launcher when the pipeline is made, and again on a
worker to save the final graph (the analyzers' results as constants):
the workers must import its module, as for `--preprocess` code
(building names the function and how to ship it when they cannot). It
is traced once before anything runs (`check_traces`), so a function
that fails to build its graph fails the build before the pipeline,
naming the function and the error.
"""

import dataclasses
import hashlib
import inspect
import os
import pickle
from typing import Any, Callable, Dict, List, Optional, Union

import apache_beam as beam
import pyarrow as pa

from beam_tfrecords.errors import InputError
from beam_tfrecords.preprocess import function_digest, import_function
from beam_tfrecords.schema import Schema, load_schema
from beam_tfrecords.schema.model import TransformSpec

__all__ = ["TransformRecords", "preprocessing_fn", "TRANSFORMED_DIR",
           "TFT_TEMP_DIR", "TRANSFORM_DIRS", "with_preprocessing_fn",
           "combined_fn", "check_traces", "fn_digest", "traced_key"]

from beam_tfrecords.sinks.metadata import (  # noqa: E402
    RAW_METADATA_DIR, TFT_TEMP_DIR, TRANSFORM_DIRS, TRANSFORMED_DIR)

_KEY, _ROW = "__btr_chunk__", "__btr_row__"


def preprocessing_fn(spec: TransformSpec):
  """The TFT preprocessing_fn the section declares."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_transform as tft  # pylint: disable=import-outside-toplevel

  def fn(inputs: Dict[str, Any]) -> Dict[str, Any]:
    out = {}
    for t in spec.features:
      x = inputs[t.source]
      p = dict(t.params)
      # int64 is scaled in float64 (TFT would use float32, which merges
      # integers past 2**24: timestamps, ids), then stored as float32.
      if t.op == "scale_to_z_score":
        out[t.name] = tf.cast(tft.scale_to_z_score(
            tf.cast(x, tf.float64)), tf.float32) if x.dtype == tf.int64 \
            else tft.scale_to_z_score(x)
      elif t.op == "scale_to_0_1" and x.dtype == tf.int64:
        # TFT's min / max would go through float32; int64's are exact.
        low, high = tft.min(x), tft.max(x)
        span = tf.cast(high - low, tf.float64)
        out[t.name] = tf.cast(tf.where(
            span > 0, tf.cast(x - low, tf.float64) / tf.maximum(span, 1.0),
            tf.sigmoid(tf.cast(x, tf.float64))), tf.float32)  # as TFT
      elif t.op == "scale_to_0_1":
        out[t.name] = tft.scale_to_0_1(x)
      elif t.op == "compute_and_apply_vocabulary":
        out[t.name] = tft.compute_and_apply_vocabulary(
            x, top_k=p.get("top_k"),
            frequency_threshold=p.get("frequency_threshold"),
            num_oov_buckets=p.get("num_oov_buckets", 0),
            vocab_filename=t.name)
      elif t.op == "bucketize":
        out[t.name] = tft.bucketize(x, p["num_buckets"])
      elif t.op == "hash_strings":
        out[t.name] = tft.hash_strings(x, p["hash_buckets"])
      else:
        out[t.name] = x if isinstance(x, tf.SparseTensor) else \
            tf.identity(x)
    return out
  return fn


_SETTING = "transform.preprocessing_fn"


def with_preprocessing_fn(schema: Schema,
                          given: Union[None, str, Callable[..., Any]]
                          ) -> Schema:
  """The schema with its preprocessing_fn resolved: `given` (a function
  or "module:function", which replaces the schema's), else the schema's
  own "module:function", imported here.

  Raises:
    InputError: the function does not import or is not callable, or the
      schema cannot take one (a SequenceExample schema; a transform
      section its splits or names refuse: SchemaError).
  """
  spec = schema.transform
  if given is None and (spec is None or spec.preprocessing_fn is None):
    return schema
  if schema.is_sequence:
    raise InputError("a preprocessing_fn (TensorFlow Transform) is for "
                     "Example schemas; SequenceExample schemas cannot take "
                     "one yet")
  if given is None:
    assert spec is not None and spec.preprocessing_fn is not None
    fn, name = import_function(spec.preprocessing_fn, _SETTING), \
        spec.preprocessing_fn
  elif isinstance(given, str):
    fn, name = import_function(given, "preprocessing_fn"), given
  else:
    fn, name = given, _display_name(given)
  if not callable(fn):
    raise InputError(f"the preprocessing_fn {name} is a {type(fn).__name__}"
                     ", not a function")
  if spec is None:
    spec = TransformSpec(features=())
  out = dataclasses.replace(schema, transform=dataclasses.replace(
      spec, preprocessing_fn=name, fn=fn))
  # The steps re-read the schema from its dict: it must read back (a
  # transform section needs the analyzed split, names not reserved...).
  load_schema(out.to_dict())
  return out


def _display_name(fn: Callable[..., Any]) -> str:
  """module:qualname of a function given as an object (a closure's or a
  lambda's too; "(partial)" after a functools.partial's function)."""
  base = getattr(fn, "func", fn)
  if not hasattr(base, "__qualname__"):  # a callable instance
    base = type(base)
  name = f"{getattr(base, '__module__', None) or 'unknown'}:" \
      f"{base.__qualname__}"
  return name + "(partial)" if base is not fn and hasattr(fn, "func") \
      else name


def traced_key(schema: Schema) -> Dict[str, str]:
  """What build() and WriteDataset do with a resolved preprocessing_fn
  before the pipeline is made: trace it (check_traces), and the build
  key's entry for it ({} without one)."""
  check_traces(schema)
  digest = fn_digest(schema)
  return {"preprocessing_fn": digest} if digest else {}


def fn_digest(schema: Schema) -> Optional[str]:
  """What the build key sees of the user's function: its source and what
  it closes over, and the source of its whole module (TFX modules keep
  constants and helpers beside the function); None without one.

  Raises:
    InputError: the function cannot be pickled (TFT ships it to the
      workers, which trace it again).
  """
  spec = schema.transform
  if spec is None or spec.fn is None:
    return None
  try:
    digest = function_digest(spec.fn)
  except Exception as e:  # pylint: disable=broad-except
    raise InputError(
        f"the preprocessing_fn {spec.preprocessing_fn} cannot be pickled to "
        f"ship it to the workers ({type(e).__name__}: {e}); define it at "
        "the top level of a module") from e
  try:
    module = inspect.getsource(inspect.getmodule(
        getattr(spec.fn, "func", spec.fn)))  # type: ignore[arg-type]
  except (OSError, TypeError):
    module = ""
  return hashlib.sha256(f"{digest}\0{module}".encode("utf-8")).hexdigest(
  )[:16]


def combined_fn(spec: TransformSpec) -> Callable[[Dict[str, Any]],
                                                 Dict[str, Any]]:
  """The preprocessing_fn TFT runs: the declared analyzers' and the
  user's, on the same inputs, their outputs merged."""
  declared = preprocessing_fn(spec) if spec.features else None
  user, name = spec.fn, spec.preprocessing_fn
  if user is None:
    assert declared is not None
    return declared

  def fn(inputs: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(declared(dict(inputs))) if declared else {}
    theirs = user(dict(inputs))
    if not isinstance(theirs, dict):
      raise TypeError(f"the preprocessing_fn {name} returned a "
                      f"{type(theirs).__name__}, not a dict of tensors")
    both = sorted(set(out) & set(theirs))
    if both:
      raise ValueError(f"the preprocessing_fn {name} returns {both}, which "
                       "transform.features also declares; rename one")
    out.update(theirs)
    return out
  return fn


def check_traces(schema: Schema) -> None:
  """Traces the preprocessing_fn on the schema's raw feature spec, as TFT
  will when the pipeline is made.

  Raises:
    InputError: it fails (naming the function and the error).
  """
  spec = schema.transform
  if spec is None or spec.fn is None:
    return
  # pylint: disable=import-outside-toplevel
  import tensorflow_transform as tft
  from tfx_bsl.public import tfxio
  from beam_tfrecords.schema.tfmd import to_tfmd
  specs: Dict[str, Any] = {}
  try:
    # The type specs TransformRecords feeds TFT (the same TFXIO source).
    specs = tfxio.TFExampleBeamRecord(
        physical_format="inmem", telemetry_descriptors=["beam_tfrecords"],
        schema=to_tfmd(schema)).TensorAdapter().TypeSpecs()
    tft.get_analyze_input_columns(combined_fn(spec),  # type: ignore[arg-type]
                                  specs)
  except Exception as e:  # pylint: disable=broad-except
    raise InputError(
        f"the preprocessing_fn {spec.preprocessing_fn} fails when TensorFlow "
        f"Transform traces it on the stored features "
        f"({', '.join(sorted(specs))}): {type(e).__name__}: "
        f"{str(e).strip()[:800]}") from e


class _ToRecordBatchFn(beam.DoFn):
  """(split, key, [serialized Example]) -> RecordBatch of the records, with
  the chunk (split, key) and each row's index as passthrough columns."""

  def __init__(self, tfmd_schema: bytes):
    self._tfmd_schema = tfmd_schema
    # tfx_bsl's ExamplesToRecordBatchDecoder, made in setup() (no stubs)
    self._decoder: Any = None

  def setup(self):
    from tfx_bsl.coders import example_coder  # pylint: disable=import-outside-toplevel
    self._decoder = example_coder.ExamplesToRecordBatchDecoder(
        self._tfmd_schema)

  def process(self, chunk):
    split, key, records = chunk
    if not records:
      return
    batch = self._decoder.DecodeBatch(records)
    n = batch.num_rows
    tag = pickle.dumps((split, key), protocol=4)
    yield split, pa.RecordBatch.from_arrays(
        list(batch.columns) + [
            pa.array([[tag]] * n, pa.large_list(pa.large_binary())),
            pa.array([[i] for i in range(n)], pa.large_list(pa.int64()))],
        list(batch.schema.names) + [_KEY, _ROW])


def _feature_type(value_type: pa.DataType) -> str:
  if pa.types.is_floating(value_type):
    return "float"
  if pa.types.is_integer(value_type):
    return "int64"
  return "bytes"


class _EncodeTransformedFn(beam.DoFn):
  """A transformed RecordBatch -> (chunk, [(row, serialized Example)]) per
  chunk it holds rows of.

  Encoded by this package's Example encoder (features in sorted order:
  the same bytes on every run; tfx-bsl's encoder writes them in hash-map
  order, which differs between processes).
  """

  def __init__(self):
    self._encoders = {}

  def _encoder(self, batch: pa.RecordBatch, names: List[str]):
    from beam_tfrecords.encoding import ExampleEncoder  # pylint: disable=import-outside-toplevel
    types = tuple((n, _feature_type(batch.schema.field(n).type.value_type))
                  for n in names)
    if types not in self._encoders:
      self._encoders[types] = ExampleEncoder({
          "name": "transformed",
          "features": {n: {"type": t, "shape": [-1]} for n, t in types}})
    return self._encoders[types]

  def process(self, element):
    batch, _ = element
    names = sorted(n for n in batch.schema.names if n not in (_KEY, _ROW))
    encoded = self._encoder(batch, names).encode_columns(
        {n: batch.column(n) for n in names}, batch.num_rows)
    if encoded.errors:
      raise ValueError(f"transformed values that do not encode: "
                       f"{encoded.errors[:3]}")
    records = encoded.record_list()
    keys = batch.column(_KEY).to_pylist()
    rows = batch.column(_ROW).to_pylist()
    by_chunk: Dict[bytes, list] = {}
    for key, row, record in zip(keys, rows, records):
      by_chunk.setdefault(key[0], []).append((row[0], record))
    yield from by_chunk.items()


def _chunk(element):
  tag, parts = element
  split, key = pickle.loads(tag)
  rows = sorted((r for part in parts for r in part), key=lambda r: r[0])
  return split, key, [record for _, record in rows]


class TransformRecords(beam.PTransform):
  """Raw record chunks -> transformed record chunks, and the transform
  graph written to `transform_dir` (TFT's transform_fn/ and
  transformed_metadata/).

  Args:
    schema: a Schema with a `transform` section (Examples).
    transform_dir: where WriteTransformFn writes.
    temp_dir: TFT's scratch directory.
  """

  def __init__(self, schema: Schema, transform_dir: str, temp_dir: str):
    super().__init__()
    self._schema = schema
    self._transform_dir = transform_dir
    self._temp_dir = temp_dir

  def expand(self, chunks):
    import tensorflow_transform.beam as tft_beam  # pylint: disable=import-outside-toplevel
    from tensorflow_transform.tf_metadata import dataset_metadata  # pylint: disable=import-outside-toplevel
    from tfx_bsl.public import tfxio  # pylint: disable=import-outside-toplevel
    from beam_tfrecords.schema.tfmd import to_tfmd  # pylint: disable=import-outside-toplevel
    spec = self._schema.transform
    assert spec is not None  # a schema with a transform section (see Args)
    tfmd = to_tfmd(self._schema)
    source = tfxio.TFExampleBeamRecord(
        physical_format="inmem", telemetry_descriptors=["beam_tfrecords"],
        schema=tfmd)
    arrow_schema = pa.schema(
        list(source.ArrowSchema()) +
        [pa.field(_KEY, pa.large_list(pa.large_binary())),
         pa.field(_ROW, pa.large_list(pa.int64()))])
    config = tfxio.TensorAdapterConfig(arrow_schema,
                                       source.TensorRepresentations())
    batches = (chunks
               # (split, key, [serialized Example])
               | "ToRecordBatches" >> beam.ParDo(
                   _ToRecordBatchFn(tfmd.SerializeToString())))
               # (split, RecordBatch)
    train = (batches
             | "AnalyzedSplit" >> beam.Filter(
                 lambda b, s=spec.analyze_split: b[0] == s)
             | "TrainBatches" >> beam.Map(lambda b: b[1]))
    every = batches | "AllBatches" >> beam.Map(lambda b: b[1])
    with tft_beam.Context(temp_dir=self._temp_dir,
                          passthrough_keys={_KEY, _ROW}):
      transform_fn = ((train, config)
                      | "Analyze" >> tft_beam.AnalyzeDataset(
                          combined_fn(spec)))
      transformed, _ = (((every, config), transform_fn)
                        | "Transform" >> tft_beam.TransformDataset(
                            output_record_batches=True))
      _ = (transform_fn
           | "WriteTransformFn" >> tft_beam.WriteTransformFn(
               self._transform_dir))
      # The raw schema beside them, as TFX's Transform writes it: what
      # tft.TFTransformOutput(dir).raw_feature_spec() reads (serving).
      _ = (dataset_metadata.DatasetMetadata(tfmd)
           | "WriteRawMetadata" >> tft_beam.WriteMetadata(
               os.path.join(self._transform_dir, RAW_METADATA_DIR),
               chunks.pipeline))
    return (transformed
            # (RecordBatch, passthrough dict)
            | "Encode" >> beam.ParDo(_EncodeTransformedFn())
            # (chunk tag, [(row, record)])
            | "GroupChunks" >> beam.GroupByKey()
            | "Chunks" >> beam.Map(_chunk))
            # (split, key, [serialized transformed Example])

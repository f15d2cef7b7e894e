"""Reading a built dataset back: load, feature_spec, iter_records.

`load` and `feature_spec` use TensorFlow; `iter_records` does not (it
decodes the records in plain Python), for tools and quick looks.
"""

import itertools
import json
import os
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Optional,
                    Tuple)

import numpy as np

from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import (DatasetReplacedError, InputError,
                                        ShardDamagedError)
from beam_tfrecords.core.generations import Guard, Pinned
from beam_tfrecords.core.info import DatasetInfo, ShardInfo
from beam_tfrecords.core.layout import DATASET_JSON
from beam_tfrecords.core.shares import stable_seed
from beam_tfrecords.core.shard_formats import of_file
from beam_tfrecords.core.shard_reader import (Expected, check_whole,
                                              read_shard)
from beam_tfrecords.core.tfrecord_files import (decode_example,
                                                decode_sequence_example)
from beam_tfrecords.read.gc_pause import paused_gc
from beam_tfrecords.read.stream import SHUFFLE_BUFFER, RecordStream
from beam_tfrecords.read.wire_columns import (Flat, Steps, native_decode,
                                              native_decode_sequences,
                                              objects)
from beam_tfrecords.read.window import Datasets, finished
from beam_tfrecords.schema import (Feature, FeatureType, Schema, SequenceSpec,
                                   schema_from_dict)
from beam_tfrecords.schema import feature_spec as _schema_feature_spec
from beam_tfrecords.schema.model import MediaKind
from beam_tfrecords.schema.spec import tf_spec

__all__ = ["dataset_info", "dataset_schema", "shard_files", "load",
           "feature_spec", "iter_records", "dataset_errors",
           "transform_output", "is_dataset", "iter_transformed",
           "plain_records", "dataset_statistics", "load_statistics"]


def is_dataset(path: str) -> bool:
  """Whether `path` is a dataset folder (has a dataset.json), finished or
  not; TFRecord files made by anything else are not."""
  return fs.exists(fs.join(path.rstrip("/"), DATASET_JSON))


def dataset_info(path: str) -> DatasetInfo:
  """The dataset.json of a finished dataset, typed (`btr.DatasetInfo`).

  Raises:
    InputError: the directory is not a finished dataset (no _SUCCESS).
  """
  return finished(path.rstrip("/"))


def dataset_schema(path: str, info: Optional[DatasetInfo] = None
                   ) -> Schema:
  """The schema a dataset was built with (`info`: its dataset.json, when
  read already)."""
  return schema_from_dict((info or dataset_info(path)).schema,
                          fs.join(path, DATASET_JSON))


def shard_files(path: str, split: str = "train",
                info: Optional[DatasetInfo] = None) -> List[str]:
  """The shard paths of one split, in order."""
  info = info or dataset_info(path)
  if split not in info.splits:
    raise InputError(f"{path} has no split {split!r}; it has "
                     f"{sorted(info.splits)}")
  return [fs.join(path.rstrip("/"), f) for f in info.splits[split].files]


def feature_spec(path: str):
  """The parsing spec of a built dataset.

  For Examples, the dict for `tf.io.parse_example`; for SequenceExamples a
  `SequenceSpec(context_features, sequence_features)`, which unpacks into
  `tf.io.parse_sequence_example(x, *spec)`.
  """
  return _schema_feature_spec(dataset_schema(path))


def _media_decoders(schema: Schema) -> list:
  """Functions that turn parsed image / tensor features into tensors."""
  import tensorflow as tf
  # Each takes the parsed features and returns them with one decoded.
  out: List[Callable[[Dict[str, Any]], Dict[str, Any]]] = []
  for m in schema.media:
    o = m.options
    if m.kind is MediaKind.IMAGE:
      if not schema.feature(m.name).required:
        continue  # may be missing: a sparse tensor, left as bytes
      channels = {"rgb": 3, "grayscale": 1}.get(o.get("convert"), 0)
      size = o.get("resize")

      def image(x, name=m.name, channels=channels, size=size,
                raw=o.get("encode") == "raw"):
        if raw:  # decoded pixels: rebuild the tensor from the shape
          decoded = tf.reshape(tf.io.decode_raw(x[name], tf.uint8), tf.stack(
              [x[name + "_height"], x[name + "_width"],
               x[name + "_channels"]]))
        else:
          decoded = tf.io.decode_image(x[name], channels=channels,
                                       expand_animations=False)
        if size:
          decoded.set_shape([size[0], size[1], channels or None])
        return dict(x, **{name: decoded})
      out.append(image)
    elif m.kind is MediaKind.TENSOR:
      if not schema.feature(m.name).required:
        continue
      dtype = tf.as_dtype(o["dtype"])
      shape = list(o["shape"])
      if o["storage"] == "list":
        def cast(x, name=m.name, dtype=dtype):
          return dict(x, **{name: tf.cast(x[name], dtype)})
        out.append(cast)
        continue

      def tensor(x, name=m.name, dtype=dtype, shape=shape):
        if dtype == tf.uint32:  # decode_raw has no uint32: same bits
          flat = tf.bitcast(tf.io.decode_raw(x[name], tf.int32,
                                             little_endian=True), tf.uint32)
        else:
          flat = tf.io.decode_raw(x[name], dtype, little_endian=True)
        if -1 in shape:
          return dict(x, **{name: tf.reshape(flat, x[name + "_shape"])})
        return dict(x, **{name: tf.reshape(flat, shape)})
      out.append(tensor)
  return out


def transform_output(path: str):
  """The dataset's `tft.TFTransformOutput` (its `transform_features_layer()`
  applies the same transform to raw features at serving time).

  Raises:
    InputError: the dataset was built without a `transform:` section.
  """
  if dataset_info(path).transform is None:
    raise InputError(f"{path} has no transform (its schema has no "
                     "`transform:` section)")
  import tensorflow_transform as tft  # pylint: disable=import-outside-toplevel
  return tft.TFTransformOutput(path.rstrip("/"))


def transformed_spec(info: DatasetInfo):
  """The parsing spec of the transformed records, from dataset.json's
  transform.feature_spec: a dict, or for SequenceExamples a
  SequenceSpec(context_features, sequence_features)."""
  assert info.transform is not None  # a dataset with a transform
  recorded = info.transform.feature_spec or {}
  if info.record == "sequence_example":
    return SequenceSpec(
        {k: tf_spec(v) for k, v in recorded["context"].items()},
        {k: tf_spec(v) for k, v in recorded["sequence"].items()})
  return {k: tf_spec(v) for k, v in recorded.items()}


def load(path: Datasets, split: str = "train",
         batch_size: Optional[int] = None, decode: bool = True,
         transformed: bool = False, as_supervised: bool = False, *,
         shard: Optional[Tuple[int, int]] = None,
         drop_remainder: bool = False, shuffle_seed: Optional[int] = None,
         epoch: int = 0, shuffle_buffer: int = SHUFFLE_BUFFER,
         check: bool = True):
  """A tf.data.Dataset of parsed records.

  Examples give feature dicts; SequenceExamples give (context, sequence)
  dict pairs, sequence values shaped [steps, ...] ([batch, steps, ...] when
  batched; FixedLenSequenceFeatures are padded to the longest sequence of
  the batch).

  With `decode`, required image features come as decoded uint8 tensors
  [height, width, channels] (tf.io.decode_image; static height and width
  when the schema resizes, channels when it converts), and required
  tensor features as tensors of their dtype and shape (decode_raw +
  reshape for raw bytes). Images of different sizes batch only when the
  schema resizes them. Optional ones stay as stored (they may be absent).

  Args:
    path: the dataset directory, or a window of them read as one: a
      list, a glob or a pin file (beam_tfrecords.read.window).
    split: the split name.
    batch_size: batch (after parsing, or before when nothing is decoded:
      faster); None yields single records.
    decode: decode images and tensors (see above); False: the stored bytes.
    transformed: the records the schema's `transform:` section made
      (TensorFlow Transform's output) instead of the raw ones.
    as_supervised: (features, label) pairs, the label being the feature
      the schema's `label:` names (a dict of them when it names several;
      for SequenceExamples, context features: ((context, sequence),
      label)).
    shard: (index, count): this rank's exact share of the records
      (beam_tfrecords.core.shares; e.g. (rank, world_size)); None: all.
    drop_remainder: every share the same size, ⌊N/count⌋.
    shuffle_seed: read the files in an order drawn from (seed, epoch),
      and shuffle records in a seeded buffer of `shuffle_buffer`; the
      same order on every run. None: the files' order.
    epoch: with a seed, which epoch's order.
    check: before a local shard's first record, its SHA-256 against
      dataset.json (sizes are checked either way; tf.data checks every
      record's CRCs and gzip's own). A damaged shard stops the read
      before its first record with a tf.errors.OpError (py_function
      reports every error as UnknownError) whose message is
      ShardDamagedError's.
  """
  if transformed and as_supervised:
    raise InputError("as_supervised reads the raw records' label; "
                     "transformed=True reads TensorFlow Transform's "
                     "outputs: split the label off them yourself")
  stream = RecordStream(path, split, shard, drop_remainder, shuffle_seed,
                        epoch, shuffle_buffer, transformed=transformed,
                        check=check)
  info = stream.found[0][1]  # read once (a request on GCS / S3)
  if transformed:
    return _parsed(_records(stream), transformed_spec(info), batch_size)
  schema = dataset_schema(stream.found[0][0], info)
  ds = _load(_records(stream), batch_size, decode, schema)
  if not as_supervised:
    return ds
  labels = list(schema.label)
  if not labels:
    raise InputError(f"{stream.found[0][0]}: the schema names no label, "
                     "so there is "
                     "nothing to return as the label; add label: <feature> "
                     "to the schema and build again (or load without "
                     "as_supervised)")

  def split_off(features):
    rest = {k: v for k, v in features.items() if k not in labels}
    label = features[labels[0]] if len(labels) == 1 else {
        k: features[k] for k in labels}
    return rest, label

  if schema.is_sequence:
    return ds.map(lambda context, sequence: (
        (split_off(context)[0], sequence), split_off(context)[1]))
  return ds.map(split_off)


def _records(stream: RecordStream):
  """A tf.data.Dataset of the stream's serialized records: its pieces
  read in order (skip and take in each file); with a seed, shuffled by
  tf.data in a buffer seeded from it (another order than the stream's
  own buffer, the same on every run).

  Each file is opened by `generations.Pinned` (checked against its
  dataset's generation, then read through the descriptor it opened), so a
  dataset replaced meanwhile stops the read with an error saying so
  (tf.errors.UnknownError: py_function reports every error so; its
  message is DatasetReplacedError's), never a mix of two builds' shards."""
  import tensorflow as tf
  pieces = stream.pieces
  if not pieces:
    return tf.data.Dataset.from_tensor_slices(tf.constant([], tf.string))
  if any(not of_file(p.file).tf_data for p in pieces):
    # A format tf.data does not read: the stream's (its format's reader,
    # each file checked against its generation), in its order.
    return _shuffled(tf.data.Dataset.from_generator(
        lambda: (r for records in stream.lists() for r in records),
        output_signature=tf.TensorSpec((), tf.string)), stream)
  whole = {f: n for f, n in stream.files}
  opener = _Opener(stream, [p.file for p in pieces])
  pinned, opened, closed = opener.pinned, opener.opened, opener.closed

  def piece(i, skip, take, compression, partial: bool):
    path = tf.py_function(opened, [i], tf.string)
    path.set_shape([])
    records = tf.data.TFRecordDataset(path, compression_type=compression)
    if partial:
      records = records.skip(skip).take(take)
    if pinned.by_descriptor:
      # Local: nothing to check at the end (the descriptor is the file
      # opened); descriptors are closed as later files open (Pinned).
      return records
    # After the file's last record: its generation checked again (read by
    # name, it may have been replaced while read); no element.
    end = (tf.data.Dataset.from_tensors(i)
           .map(lambda j: tf.py_function(closed, [j], tf.int64))
           .filter(lambda _: False)
           .map(lambda _: tf.constant(b"", tf.string)))
    return records.concatenate(end)

  def kind(p):  # per file: a window may mix gzip and --tfds datasets
    return "GZIP" if of_file(p.file).gzip else ""
  # Whole files in a row are one TFRecordDataset over the paths Pinned
  # gives (no per-record skip or take, and no layer per file: as fast as
  # the plain read); a share's partial first and last files skip and take.
  datasets = []
  for (partial, compression), grouped in itertools.groupby(
      enumerate(pieces),
      key=lambda ip: (not (ip[1].skip == 0
                           and ip[1].take == whole[ip[1].file]),
                      kind(ip[1]))):
    run = list(grouped)
    index = tf.constant([i for i, _ in run], tf.int64)
    if not partial and pinned.by_descriptor:
      paths = tf.data.Dataset.from_tensor_slices(index).map(
          lambda i: tf.ensure_shape(tf.py_function(opened, [i], tf.string),
                                    []))
      datasets.append(tf.data.TFRecordDataset(paths,
                                           compression_type=compression))
      continue
    slices = (index, tf.constant([p.skip for _, p in run], tf.int64),
              tf.constant([p.take for _, p in run], tf.int64),
              tf.constant([compression] * len(run), tf.string))
    datasets.append(tf.data.Dataset.from_tensor_slices(slices).flat_map(
        lambda i, skip, take, compression, partial=partial: piece(
            i, skip, take, compression, partial)))
  ds = datasets[0]
  for more in datasets[1:]:
    ds = ds.concatenate(more)
  return _shuffled(ds, stream)


class _Opener:
  """The paths tf.data reads the stream's pieces by: each file opened by
  `generations.Pinned` (checked against its generation) and checked
  against dataset.json (check_whole: tf.data checks the records' CRCs
  and gzip's; a shard cut at a record or member boundary, or with members
  dropped or swapped, is caught here, before its first record). Errors
  as tf.errors, with our messages."""

  def __init__(self, stream: RecordStream, files: List[str]):
    self.stream, self.files = stream, files
    self.pinned = Pinned(stream.guard, files)

  def opened(self, i):
    import tensorflow as tf
    file = self.files[int(i)]
    try:
      path = self.pinned.open(int(i))
      check_whole(path, self.stream.expected[file], self.stream.check, file)
      return path
    except DatasetReplacedError as e:
      raise tf.errors.AbortedError(None, None, str(e)) from e
    except ShardDamagedError as e:
      raise tf.errors.DataLossError(None, None, str(e)) from e

  def closed(self, i):
    """File i, read by name to its end: its generation checked again."""
    import tensorflow as tf
    try:
      self.pinned.close(int(i))
    except DatasetReplacedError as e:
      raise tf.errors.AbortedError(None, None, str(e)) from e
    return i


def _shuffled(ds, stream: RecordStream):
  """With the stream's seed: tf.data's seeded shuffle buffer."""
  if stream.shuffle_seed is not None:
    ds = ds.shuffle(stream.shuffle_buffer, seed=stable_seed(
        "tf.data", stream.shuffle_seed, stream.epoch, stream.shard) % 2**31,
        reshuffle_each_iteration=False)
  return ds


def _load(ds, batch_size: Optional[int], decode: bool, schema):
  import tensorflow as tf
  spec = _schema_feature_spec(schema)
  decoders = _media_decoders(schema) if decode else []
  if decoders:
    def parsed(x):
      x = tf.io.parse_single_example(x, spec)
      for fn in decoders:
        x = fn(x)
      return x
    ds = _parallel(ds, parsed)
    return ds.batch(batch_size) if batch_size else ds
  return _parsed(ds, spec, batch_size)


def _parsed(ds, spec, batch_size: Optional[int]):
  """Serialized records parsed with a spec (a dict: Examples; a
  SequenceSpec: (context, feature lists) pairs), batched or not; parsed
  in parallel, in order, while the next records are read."""
  import tensorflow as tf
  if isinstance(spec, SequenceSpec):
    context, sequence = spec
    if batch_size:
      ds, fn = ds.batch(batch_size), lambda x: tf.io.parse_sequence_example(
          x, context, sequence)[:2]
    else:
      def fn(x):
        return tf.io.parse_single_sequence_example(x, context, sequence)
  elif batch_size:
    ds, fn = ds.batch(batch_size), lambda x: tf.io.parse_example(x, spec)
  else:
    def fn(x):
      return tf.io.parse_single_example(x, spec)
  return _parallel(ds, fn)


def _parallel(ds, fn):
  """`fn` mapped over the records on every core, in order, while the
  next ones are read and the parsed ones wait for the caller.

  The parallelism is fixed and tf.data's autotuner is off for this
  pipeline: on two cores the autotuner's own thread and choices made
  the read 40% slower, or not, from one run to the next (2.6 s against
  1.8 s for 1M flight records; benchmarks/run.py --suite read). A
  caller who wants it back sets it with `ds.with_options`."""
  import tensorflow as tf
  cores = len(os.sched_getaffinity(0)) if hasattr(
      os, "sched_getaffinity") else os.cpu_count() or 1
  options = tf.data.Options()
  options.autotune.enabled = False
  return (ds.prefetch(16)
          .map(fn, num_parallel_calls=cores, deterministic=True)
          .prefetch(2).with_options(options))


def _values(feature: Feature, values: list, errors: str = "strict"):
  if feature.type is FeatureType.STRING:
    return [v.decode("utf-8", errors) for v in values]
  return values


def _to_python(features, decoded: Dict[str, tuple],
               errors: str = "strict") -> Dict[str, Any]:
  row: Dict[str, Any] = {}
  for f in features:
    kind, values = decoded.get(f.name, (None, None))
    if values is None:
      row[f.name] = None
      continue
    values = _values(f, values, errors)
    row[f.name] = (values[0] if values else None) if f.is_scalar else values
  return row


def _steps_to_python(features, lists: Dict[str, list],
                     errors: str = "strict") -> Dict[str, Any]:
  out: Dict[str, Optional[list]] = {}
  for f in features:
    steps = lists.get(f.name)
    if steps is None:
      out[f.name] = None
      continue
    out[f.name] = [
        ((_values(f, v, errors)[0] if v else None) if f.is_scalar
         else _values(f, v, errors))
        for _, v in steps]
  return out


def iter_records(path: Datasets, split: str = "train", *,
                 shard: Optional[Tuple[int, int]] = None,
                 drop_remainder: bool = False,
                 shuffle_seed: Optional[int] = None, epoch: int = 0,
                 shuffle_buffer: int = SHUFFLE_BUFFER, check: bool = True
                 ) -> Iterator[Dict[str, Any]]:
  """Yields each record as a plain dict, without TensorFlow.

  Scalars are Python values, lists are lists, `string` features are str,
  `bytes` features bytes; a missing feature is None. A SequenceExample is
  {"context": {...}, "feature_lists": {name: [value per step]}}. `path`,
  `shard`, `shuffle_seed` and the rest: as for `load` (a RecordStream;
  use one directly to resume mid-epoch). Every record is checked
  (core.shard_reader; `check=False`: sizes and counts only).
  """
  stream = RecordStream(path, split, shard, drop_remainder, shuffle_seed,
                        epoch, shuffle_buffer, check=check)
  first, info = stream.found[0]
  schema = dataset_schema(first, info)
  for records in _batches(stream, _PLAIN_BATCH):
    yield from plain_records(records, schema)


def plain_records(records: List[bytes], schema: Schema,
                  errors: str = "strict") -> List[Dict[str, Any]]:
  """Serialized records as iter_records gives them: from the native
  core's columns where it is installed and they are in its layout, else
  a record at a time. `errors`: how
  text that is not UTF-8 is decoded (bytes.decode's; "strict" raises)."""
  with paused_gc():  # (a dict per record: see read.gc_pause)
    return _plain(records, schema, errors)


def _plain(records: List[bytes], schema: Schema, errors: str
           ) -> List[Dict[str, Any]]:
  """plain_records' rows."""
  if schema.is_sequence:
    found = native_decode_sequences(records, schema)
    if found is not None:
      return _plain_sequence_rows(schema, *found, len(records))
    out = []
    for record in records:
      context, lists = decode_sequence_example(record)
      out.append({"context": _to_python(schema.context, context, errors),
                  "feature_lists": _steps_to_python(schema.sequence, lists,
                                                    errors)})
    return out
  flat = native_decode(records, schema)
  if flat is None:  # no native core, or records in another layout
    return [_to_python(schema.features, decode_example(r), errors)
            for r in records]
  return _plain_rows(schema.features, flat, len(records))


_PLAIN_BATCH = 1024


def _batches(records: Iterable[bytes], size: int) -> Iterator[List[bytes]]:
  """Records in batches of 1, 2, 4 ... up to `size` (the first record
  without reading ahead, and a file opened no sooner than a record at a
  time opens it, nearly: its checks, such as a dataset replaced since
  the first file, come as early); where reading fails, the records
  before the failure first, then the error."""
  pending: List[bytes] = []
  want = 1
  try:
    for record in records:
      pending.append(record)
      if len(pending) == want:
        yield pending
        pending = []
        want = min(2 * want, size)
  except Exception:
    if pending:
      yield pending
    raise
  if pending:
    yield pending


def _plain_rows(features, flat: Dict[str, Flat], n: int
                ) -> List[Dict[str, Any]]:
  """`_to_python` of each record, from the native core's columns: the
  same values and types, a column at a time."""
  columns = []
  for f in features:
    values, lengths, present = flat[f.name]
    items = objects(values)  # (text: an object array of str or bytes)
    if f.is_scalar:
      if present.all() and (lengths == 1).all():
        columns.append(items.tolist())
        continue
      # The first value of each record that has one; None elsewhere.
      out = np.full(n, None, object)
      has = np.flatnonzero(lengths)
      out[has] = items[(np.cumsum(lengths) - lengths)[has]]
      columns.append(out.tolist())
    else:
      every = items.tolist()
      ends = np.cumsum(lengths).tolist()
      columns.append([every[a:b] if p else None for a, b, p in zip(
          [0] + ends[:-1], ends, present.tolist())])
  names = [f.name for f in features]
  return [dict(zip(names, row)) for row in zip(*columns)]


def _plain_sequence_rows(schema: Schema, context: Dict[str, Flat],
                         lists: Dict[str, Steps], n: int
                         ) -> List[Dict[str, Any]]:
  """`plain_records` of SequenceExamples, from the native core's columns:
  what `_to_python` and `_steps_to_python` give, a column at a time."""
  contexts = (_plain_rows(schema.context, context, n) if schema.context
              else [{} for _ in range(n)])
  columns = []
  for f in schema.sequence:
    values, lengths, steps, present = lists[f.name]
    every = objects(values).tolist()
    value_ends = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    bounds = list(zip(value_ends[:-1], value_ends[1:]))
    per_step = ([every[a] if a < b else None for a, b in bounds]
                if f.is_scalar else [every[a:b] for a, b in bounds])
    step_ends = np.concatenate([[0], np.cumsum(steps)]).tolist()
    columns.append([per_step[a:b] if p else None for a, b, p in zip(
        step_ends[:-1], step_ends[1:], present.tolist())])
  names = [f.name for f in schema.sequence]
  rows = zip(*columns) if columns else [()] * n
  return [{"context": c, "feature_lists": dict(zip(names, row))}
          for c, row in zip(contexts, rows)]


def iter_transformed(path: str, shard: ShardInfo
                     ) -> Iterator[Dict[str, Any]]:
  """The records of one transformed shard (a ShardInfo of
  info.transform.splits[split].shards) as {feature: [values]},
  in plain Python; a SequenceExample as {"context": {feature: [values]},
  "feature_lists": {feature: [[values] per step]}}."""
  info = dataset_info(path)
  sequence = info.record == "sequence_example"
  file = fs.join(path.rstrip("/"), shard.file)
  guard = Guard({path.rstrip("/"): info.generation})
  for record in (r for records in guard.lists(file, read_shard(
      file, expect=Expected.of(shard))) for r in records):
    if sequence:
      context, lists = decode_sequence_example(record)
      yield {"context": {k: list(v) for k, (_, v) in sorted(context.items())},
             "feature_lists": {k: [list(v) for _, v in steps]
                               for k, steps in sorted(lists.items())}}
    else:
      yield {k: list(v)
             for k, (_, v) in sorted(decode_example(record).items())}


def dataset_statistics(path: str, info: DatasetInfo
                       ) -> Dict[str, Dict[str, Any]]:
  """{split: {feature path ("a.b"): FeatureNameStatistics}} of the
  dataset's statistics.pb; {} when it has none."""
  if not info.tfdv_statistics:
    return {}
  return load_statistics(fs.join(path.rstrip("/"), info.tfdv_statistics))


def load_statistics(path: str) -> Dict[str, Dict[str, Any]]:
  """{split: {feature path: FeatureNameStatistics}} of a statistics.pb
  file (TFMD's DatasetFeatureStatisticsList)."""
  # pylint: disable=import-outside-toplevel
  from tensorflow_metadata.proto.v0 import statistics_pb2
  stats = statistics_pb2.DatasetFeatureStatisticsList()
  with fs.open_read(path) as f:
    stats.ParseFromString(f.read())
  return {d.name: {".".join(f.path.step): f for f in d.features}
          for d in stats.datasets}


def dataset_errors(path: str, info: DatasetInfo
                   ) -> Iterator[Dict[str, Any]]:
  """The dead-letter entries (errors/*.jsonl) of the dataset at `path`
  whose dataset.json is `info`, in file order: dicts with source, row,
  rows, reason, problems and raw (btr.open(path).errors())."""
  for entry in info.errors.files:
    with fs.open_read(fs.join(path.rstrip("/"), entry.file)) as f:
      for line in f:
        if line.strip():
          yield json.loads(line)

"""Serialized records -> numpy arrays, without TensorFlow: the native
core (read.wire_columns) turns a batch of records into columns, cut here
into one dict per record (or one per batch); Examples outside its layout
go to tfx-bsl's decoder (C++), SequenceExamples to the pure-Python
reader (read.sequence_columns).

`decode_batch` gives a whole batch as columns instead: an array [batch,
*shape] for a fixed feature, {"values", "lengths"} (values per record)
for any other; a feature list is {"values" [steps, *shape], "lengths"
(steps per record)}, or when steps vary {"values", "lengths" (values per
step), "steps" (steps per record)}.

An Example becomes {feature: value}: a feature every record has with a
fixed shape is an array of that shape (a 0-d array for a scalar), any
other an array of the record's values (empty when absent). A
SequenceExample becomes {"context": {...}, "feature_lists": {feature:
per-step values}}: an array [steps, *shape] for a fixed step shape every
step has, else a list of one array per step. `int64` -> int64, `float`
-> float32, `bytes` -> bytes objects, `string` -> str.
"""

from typing import (Any, Dict, FrozenSet, Iterator, List, Optional, Sequence,
                    Tuple)

import numpy as np
import pyarrow as pa

from beam_tfrecords.read.gc_pause import paused_gc
from beam_tfrecords.read.sequence_columns import sequence_columns
from beam_tfrecords.read.wire_columns import Text, decode_columns, objects
from beam_tfrecords.schema import Feature, FeatureType, Schema

__all__ = ["RecordDecoder", "Row", "DecodedBatch", "run_of", "cut", "cuts",
           "tfx_decoder"]


def tfx_decoder(tfmd_schema: bytes, sequence: bool):
  """tfx-bsl's serialized records -> Arrow RecordBatch decoder (C++) for a
  serialized TFMD schema (schema.tfmd), Examples or SequenceExamples (its
  int64 feature lists made whole: read.sequence_batches)."""
  # pylint: disable=import-outside-toplevel
  if sequence:
    from beam_tfrecords.read.sequence_batches import SequenceBatchDecoder
    return SequenceBatchDecoder(tfmd_schema)
  from tfx_bsl.coders import example_coder
  return example_coder.ExamplesToRecordBatchDecoder(tfmd_schema)


def _column(feature: Feature, column: pa.Array) -> Any:
  """A batch's column: an array [batch, *shape] for a fixed feature,
  else {"values": all values, "lengths": values per record}."""
  offsets = column.offsets.to_numpy()
  values = _batch_values(feature, column.values)[offsets[0]:offsets[-1]]
  if _fixed(feature):
    return values.reshape((len(column),) + tuple(feature.shape))
  return {"values": values, "lengths": np.diff(offsets)}


def _batch_values(feature: Feature, values: pa.Array) -> Any:
  """A batch's values: an array, or for text and bytes Text."""
  if feature.type is FeatureType.STRING:  # utf-8 checked in C++
    return Text(values.cast(pa.large_string()), (len(values),))
  if feature.type is FeatureType.BYTES:
    return Text(values, (len(values),))
  return values.to_numpy(zero_copy_only=False)


def _values(feature: Feature, values: pa.Array) -> np.ndarray:
  """A batch's values as one array (text and bytes as objects)."""
  return objects(_batch_values(feature, values))


def _fixed(feature: Feature) -> bool:
  """Whether every record (or step) holds the feature's fixed shape."""
  return feature.always_present and not feature.is_variable_length


def _rows(feature: Feature, column: pa.Array) -> List[Any]:
  """One value per record of an Example / context column."""
  offsets = column.offsets.to_numpy()
  values = _values(feature, column.values)
  if _fixed(feature):
    return list(values[offsets[0]:offsets[-1]].reshape(
        (len(column),) + tuple(feature.shape)))
  return [values[offsets[i]:offsets[i + 1]] for i in range(len(column))]


def _split(feature: Feature, column: Any) -> List[Any]:
  """`_rows` of a `decode_batch` column (wire_columns'): one value per
  record, of the same types."""
  if _fixed(feature):
    return list(objects(column))
  values = objects(column["values"])
  ends = np.cumsum(column["lengths"]).tolist()
  return [values[a:b] for a, b in zip([0] + ends[:-1], ends)]


def _step_split(feature: Feature, column: Dict[str, Any]) -> List[Any]:
  """One value per record of a `decode_batch` feature list column: an
  array [steps, *shape] where each of the record's steps holds the fixed
  shape (no steps: an empty array of that shape and dtype), else a list
  of one array per step."""
  values = objects(column["values"])
  if "steps" not in column:  # every step of the batch holds the shape
    ends = np.cumsum(column["lengths"]).tolist()
    return [values[a:b] for a, b in zip([0] + ends[:-1], ends)]
  lengths = column["lengths"]
  step_ends = np.concatenate([[0], np.cumsum(column["steps"])])
  value_ends = np.concatenate([[0], np.cumsum(lengths)])
  per = feature.num_values or 1
  fixed = _fixed(feature)
  out: List[Any] = []
  for i in range(len(column["steps"])):
    first, last = int(step_ends[i]), int(step_ends[i + 1])
    bounds = value_ends[first:last + 1]
    if fixed and np.all(lengths[first:last] == per):
      out.append(values[bounds[0]:bounds[-1]].reshape(
          (last - first,) + tuple(feature.shape)))
    else:
      out.append([values[a:b] for a, b in zip(bounds[:-1].tolist(),
                                                bounds[1:].tolist())])
  return out


class DecodedBatch:
  """The batch of columns (decode_batch's, text as Text) a run of `Row`s
  was cut from, with the features its decoder fixes; the records' values
  one list per feature, made when a record is first read (`record`)."""
  __slots__ = ("columns", "fixed", "_ends", "_features", "_split")

  def __init__(self, columns: Dict[str, Any], fixed: FrozenSet[str],
               features: Sequence[Feature] = ()):
    self.columns, self.fixed = columns, fixed
    self._ends: Optional[Dict[str, Any]] = None
    self._features = list(features)
    self._split: Optional[Tuple[List[str], List[List[Any]]]] = None

  def cut(self, start: int, stop: int) -> Dict[str, Any]:
    """Records [start, stop) as decode_batch(text=True) gives them."""
    if self._ends is None:
      self._ends = _ends(self.columns)
    return _cut(self.columns, self._ends, start, stop)

  def record(self, at: int) -> Iterator[Tuple[str, Any]]:
    """Record `at`'s (feature, value) pairs, as `_rows` gives them (the
    batch's values split per record at its first record read)."""
    if self._split is None:
      self._split = ([f.name for f in self._features],
                     [_split(f, self.columns[f.name])
                      for f in self._features])
    names, split = self._split
    return zip(names, [values[at] for values in split])


class Row(dict):
  """One record's dict, as `RecordDecoder.decode` gives it, that knows
  the batch of columns it was cut from (`batch`, None once changed) and
  its place there (`at`): a batch of consecutive rows is cut from those
  columns again (read.torch.collate) instead of stacked value by value.
  Any change through dict's methods drops the tag; a copy or a pickle is
  a plain dict. (A row kept keeps its batch's columns: 8,192 records'
  from Dataset, one's from IndexedDataset's single reads.)

  A Row from the native core's columns starts empty (`_Pending`): its
  values are put in the first time it is read or changed through any of
  dict's methods, so that rows only collated never make them."""
  __slots__ = ("batch", "at")
  batch: Optional[DecodedBatch]
  at: int

  def __reduce__(self):
    return (dict, (dict(self),))

  def copy(self) -> Dict[str, Any]:
    return dict(self)

  __copy__ = copy

  def __setitem__(self, key, value):
    self.batch = None
    super().__setitem__(key, value)

  def __delitem__(self, key):
    self.batch = None
    super().__delitem__(key)

  def __ior__(self, other):  # type: ignore[misc]
    self.batch = None
    return super().__ior__(other)

  def update(self, *args, **kwargs):
    self.batch = None
    super().update(*args, **kwargs)

  def pop(self, *args):
    self.batch = None
    return super().pop(*args)

  def popitem(self):
    self.batch = None
    return super().popitem()

  def clear(self):
    self.batch = None
    super().clear()

  def setdefault(self, key, default=None):
    self.batch = None
    return super().setdefault(key, default)


class _NotRead:
  """What a `_Pending` row holds for each feature until it is read."""
  __slots__ = ()

  def __repr__(self) -> str:
    return ("<a value not made yet: read the record through its dict "
            "methods (dict(record) gives a dict of its values)>")


_NOT_READ = _NotRead()


class _Pending(Row):
  """A Row whose values are not in it yet: every dict method (reading or
  changing, dict(row), {**row}, pickle, copy, json and == included) puts
  them in first, from the row's batch, and makes it a Row. Until then it
  holds its keys, each with `_NOT_READ`: C code that reads a dict's
  storage without its methods (orjson, tf.nest and dm-tree) gets that
  object, not a value, nor an empty dict (C json's test for {}); so does
  == with another dict subclass on the left (OrderedDict(...) == row).
  dict(row) first gives a plain dict of the values."""
  __slots__ = ()

  def _filled(self) -> Row:
    # (no batch: made by fromkeys or type(row)(...), its values given)
    batch = getattr(self, "batch", None)
    if batch is not None:
      dict.update(self, batch.record(self.at))
    self.__class__ = Row  # type: ignore[assignment]
    return self


def _filling(name: str):
  def method(self, *args, **kwargs):
    if args and type(args[0]) is _Pending:  # r == s: dict's == reads s's
      args[0]._filled()                     # storage
    return getattr(self._filled(), name)(*args, **kwargs)
  method.__name__ = name
  return method


for _name in ("__getitem__", "__contains__", "__iter__", "__len__",
              "__repr__", "__eq__", "__ne__", "__reversed__", "__or__",
              "__ror__", "__sizeof__", "__reduce__", "get", "keys",
              "values", "items", "copy", "__copy__", "__setitem__",
              "__delitem__", "__ior__", "update", "pop", "popitem", "clear",
              "setdefault"):
  setattr(_Pending, _name, _filling(_name))
_ROWS = (Row, _Pending)


def run_of(records: Sequence[Any], fixed: FrozenSet[str]
           ) -> Optional[Tuple[DecodedBatch, int]]:
  """(their batch, the first's place) when `records` are unchanged
  `Row`s, consecutive in one batch decoded with these fixed features;
  else None."""
  if not records or type(records[0]) not in _ROWS:
    return None
  # (unset: made by fromkeys or type(row)(...))
  found: Optional[DecodedBatch] = getattr(records[0], "batch", None)
  if found is None or found.fixed != fixed:
    return None
  batch, start = found, int(records[0].at)
  for i, r in enumerate(records):
    if type(r) not in _ROWS or getattr(r, "batch", None) is not batch or \
        r.at != start + i:
      return None
  return batch, start


class RecordDecoder:
  """Decodes batches of serialized records of one schema."""

  def __init__(self, schema: Schema):
    # pylint: disable=import-outside-toplevel
    from beam_tfrecords.schema.tfmd import to_tfmd
    self._schema = schema
    # The features a batch stacks into one array (paths as the dicts
    # nest them: "context/x" in a sequence); the others vary.
    self.fixed = frozenset(
        f.name for f in schema.features if _fixed(f)) | frozenset(
            f"context/{f.name}" for f in schema.context if _fixed(f))
    # Examples outside the native core's layout: tfx-bsl's decoder.
    # SequenceExamples: the core's, else read.sequence_columns (tfx-bsl's
    # sequence decoder keeps the low 32 bits of int64 feature lists).
    self._decoder: Any = None if schema.is_sequence else tfx_decoder(
        to_tfmd(schema).SerializeToString(), False)
    self._not_read = dict.fromkeys([f.name for f in schema.features],
                                   _NOT_READ)

  def __reduce__(self):
    return (RecordDecoder, (self._schema,))

  def decode(self, records: Sequence[bytes]) -> List[Dict[str, Any]]:
    """One dict per record: from the native core's columns where it is
    installed (the same values and types; Examples as `Row`s that make
    their values when read), else from tfx-bsl's (Examples) or
    read.sequence_columns' (SequenceExamples)."""
    if not records:
      return []
    with paused_gc():  # (a row per record: see read.gc_pause)
      return self._decoded(records)

  def _decoded(self, records: Sequence[bytes]) -> List[Dict[str, Any]]:
    s = self._schema
    if not s.is_sequence:
      fast = decode_columns(records, s, native_only=True)
      if fast is not None:  # rows whose values are made when read
        decoded = DecodedBatch(fast, self.fixed, s.features)
        keys = self._not_read
        pending = [_Pending(keys) for _ in records]
        for i, row in enumerate(pending):
          row.batch, row.at = decoded, i
        return pending  # type: ignore[return-value]
      batch = self._decoder.DecodeBatch(list(records))
      per = {f.name: _rows(f, batch.column(f.name)) for f in s.features}
      names = list(per)
      return [dict(zip(names, row)) for row in zip(*per.values())]
    lists = self.decode_batch(records, text=True)
    context = {f.name: _split(f, lists["context"][f.name])
               for f in s.context}
    steps = {f.name: _step_split(f, lists["feature_lists"][f.name])
             for f in s.sequence}
    return [{"context": {k: v[i] for k, v in context.items()},
             "feature_lists": {k: v[i] for k, v in steps.items()}}
            for i in range(len(records))]

  def decode_batch(self, records: Sequence[bytes], text: bool = False
                   ) -> Dict[str, Any]:
    """The records as one batch of columns (`_column`; sequences:
    read.sequence_columns'): no per-record work. Records in the usual
    layout are read by beam_tfrecords.read.wire_columns (the native core;
    Examples by numpy over the whole batch where it is not installed),
    other Examples by tfx-bsl, other SequenceExamples by
    read.sequence_columns. `text`: text and bytes columns as
    wire_columns.Text (Arrow's, not yet Python objects); else as object
    arrays."""
    columns = decode_columns(records, self._schema)
    if columns is None:
      columns = (sequence_columns(records, self._schema)
                 if self._schema.is_sequence else self._tfx_columns(records))
    return columns if text else objects(columns)

  def _tfx_columns(self, records: Sequence[bytes]) -> Dict[str, Any]:
    """Examples by tfx-bsl's decoder (C++)."""
    batch = self._decoder.DecodeBatch(list(records))
    return {f.name: _column(f, batch.column(f.name))
            for f in self._schema.features}


def cut(columns: Dict[str, Any], start: int, stop: int) -> Dict[str, Any]:
  """Records [start, stop) of a batch of columns (`decode_batch`'s), as
  decode_batch would give them."""
  return _cut(columns, _ends(columns), start, stop)


def cuts(columns: Dict[str, Any], n: int, size: int
         ) -> Iterator[Tuple[int, Dict[str, Any]]]:
  """(records, `cut`) of each `size` records of a batch of `n`, in order;
  each column's ends are summed once for them all."""
  ends = _ends(columns)
  for start in range(0, n, size):
    stop = min(start + size, n)
    yield stop - start, _cut(columns, ends, start, stop)


def _ends(columns: Dict[str, Any]) -> Dict[str, Any]:
  """Per list column, where each record's values end (its "steps" column:
  where each record's rows end, and where each row's values end)."""
  out: Dict[str, Any] = {}
  for k, column in columns.items():
    if not isinstance(column, dict):
      continue
    if "values" not in column:  # "context", "feature_lists"
      out[k] = _ends(column)
      continue
    per_record = column["steps"] if "steps" in column else column["lengths"]
    out[k] = (np.concatenate([[0], np.cumsum(per_record)]),
              np.concatenate([[0], np.cumsum(column["lengths"])])
              if "steps" in column else None)
  return out


def _cut(columns: Dict[str, Any], ends: Dict[str, Any], start: int,
         stop: int) -> Dict[str, Any]:
  return {k: _cut_column(v, ends.get(k), start, stop)
          for k, v in columns.items()}


def _cut_column(column: Any, ends: Any, start: int, stop: int) -> Any:
  if not isinstance(column, dict):
    return column[start:stop]
  if "values" not in column:  # "context", "feature_lists"
    return _cut(column, ends, start, stop)
  # Per record: "lengths" (values), or "steps" (rows of "lengths").
  record_ends, row_ends = ends
  out = dict(column)
  if "steps" in column:
    out["steps"] = column["steps"][start:stop]
    out["lengths"] = column["lengths"][record_ends[start]:record_ends[stop]]
    out["values"] = column["values"][row_ends[record_ends[start]]:
                                     row_ends[record_ends[stop]]]
    return out
  out["lengths"] = column["lengths"][start:stop]
  out["values"] = column["values"][record_ends[start]:record_ends[stop]]
  return out

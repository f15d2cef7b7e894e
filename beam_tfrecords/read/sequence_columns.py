"""Serialized tf.train.SequenceExamples -> read.arrays' columns, in pure
Python, a record at a time (the wire read by core.tfrecord_files'
proto_fields; the columns laid out as the native core's are, by
wire_columns.shaped_sequences): the reference for the native core's
decode_sequences (read.wire_columns), and the path where the core is
not installed or the records are outside its layout.

    columns = sequence_columns(records, schema)
    columns["context"]["user"]          # int64 [batch] (a fixed feature)
    columns["feature_lists"]["ts"]      # {"values" [steps], "lengths"}

tfx-bsl's SequenceExamplesToRecordBatchDecoder is not used: it keeps only
the low 32 bits of int64 feature list values (2**31 comes back as -2**31,
2**40 + 5 as 5; context values are whole), where TensorFlow's parser and
this reader give the values written. Float values keep their bits (NaN
payloads included), as the core's do.
"""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.tfrecord_files import proto_fields, read_varint
from beam_tfrecords.read.gc_pause import paused_gc
from beam_tfrecords.read.wire_columns import (Flat, Steps, Text,
                                              shaped_sequences)
from beam_tfrecords.schema import Feature, FeatureType, Schema

__all__ = ["sequence_columns", "sequence_example"]

# A Feature's oneof, by field number, and the one each type reads.
_KINDS = {1: "bytes_list", 2: "float_list", 3: "int64_list"}
_KIND_OF = {FeatureType.BYTES: "bytes_list", FeatureType.STRING: "bytes_list",
            FeatureType.FLOAT: "float_list", FeatureType.INT64: "int64_list"}

# (kind or None where the Feature holds no list, its values: ints, bytes
# values, or float32 values as their 4 bytes each)
_Values = Tuple[Optional[str], List[Any]]


def sequence_columns(records: Sequence[bytes], schema: Schema
                     ) -> Dict[str, Any]:
  """The records as read.arrays' decode_batch(text=True) gives them:
  {"context": {name: column}, "feature_lists": {name: column}}.

  Raises:
    InputError: a feature of another kind than the schema's, text that
      is not UTF-8, a fixed context feature absent or of another size,
      or a record that is not a SequenceExample.
  """
  context: List[Dict[str, _Values]] = []
  lists: List[Dict[str, List[_Values]]] = []
  with paused_gc():  # (dicts and lists per record: see read.gc_pause)
    for i, record in enumerate(records):
      try:
        found = sequence_example(bytes(record))
      except (InputError, ValueError, IndexError) as e:
        raise InputError(f"record {i} of the batch is not a serialized "
                         f"SequenceExample: {e}") from e
      context.append(found[0])
      lists.append(found[1])
  flats = {f.name: _context(f, [c.get(f.name) for c in context])
           for f in schema.context}
  steps = {f.name: _steps(f, [s.get(f.name) for s in lists])
           for f in schema.sequence}
  shaped = shaped_sequences(flats, steps, schema, len(records))
  assert shaped is not None  # (fixed context features checked: _context)
  return shaped


def _context(f: Feature, entries: List[Optional[_Values]]) -> Flat:
  """A context feature's column as the native core gives it; a fixed one
  absent or of another size raises."""
  values, lengths = _flat(f, entries, lambda i: f"record {i} of the batch")
  present = np.array([e is not None for e in entries], np.bool_)
  if f.always_present and not f.is_variable_length:
    per = f.num_values or 1
    for i, (there, n) in enumerate(zip(present.tolist(), lengths.tolist())):
      if not there or n != per:
        raise InputError(
            f"record {i} of the batch: context feature {f.name!r} holds "
            f"{f'{n} values' if there else 'nothing'}; the schema fixes "
            f"it at {per}: read the dataset with the schema it was built "
            "with")
  return Flat(values, lengths, present)


def _steps(f: Feature, entries: List[Optional[List[_Values]]]) -> Steps:
  """A feature list's column as the native core gives it."""
  where = [(i, j) for i, e in enumerate(entries) for j in range(
      len(e) if e is not None else 0)]
  values, lengths = _flat(
      f, [v for e in entries if e is not None for v in e],
      lambda k: f"record {where[k][0]} of the batch, step {where[k][1]}")
  return Steps(values, lengths,
               np.array([len(e or ()) for e in entries], np.int64),
               np.array([e is not None for e in entries], np.bool_))


def _flat(f: Feature, entries: List[Optional[_Values]],
          where: Callable[[int], str]) -> Tuple[Any, np.ndarray]:
  """Every entry's values back to back (an array, or Text), and how many
  each holds (0 where absent or without a list)."""
  lengths = np.zeros(len(entries), np.int64)
  flat: List[Any] = []
  want = _KIND_OF[f.type]
  for i, entry in enumerate(entries):
    if entry is None:
      continue
    kind, values = entry
    if kind is not None and kind != want:
      raise InputError(
          f"{where(i)}: feature {f.name!r} holds a {kind}; the schema "
          f"says {f.type.value} ({want}): read the dataset with the schema "
          "it was built with")
    flat.extend(values)
    lengths[i] = len(values)
  if f.type is FeatureType.INT64:
    return np.array(flat, np.int64), lengths
  if f.type is FeatureType.FLOAT:
    return np.frombuffer(b"".join(flat), "<f4").astype(np.float32), lengths
  if f.type is FeatureType.BYTES:
    return Text(pa.array(flat, pa.large_binary()), (len(flat),)), lengths
  text = []
  for k, v in enumerate(flat):
    try:
      text.append(v.decode("utf-8"))
    except UnicodeDecodeError as e:
      at = int(np.searchsorted(np.cumsum(lengths), k, side="right"))
      raise InputError(f"{where(at)}: string feature {f.name!r} holds "
                       f"bytes that are not UTF-8 ({v[:40]!r})") from e
  return Text(pa.array(text, pa.large_string()), (len(text),)), lengths


def sequence_example(buf: bytes) -> Tuple[Dict[str, _Values],
                                           Dict[str, List[_Values]]]:
  """(context {name: values}, feature lists {name: [values per step]});
  as protobuf merges them, a later entry of a name replaces an earlier."""
  context: Dict[str, _Values] = {}
  lists: Dict[str, List[_Values]] = {}
  for field, wire_type, value in proto_fields(buf):
    if field == 1 and wire_type == 2:
      for key, feature in _entries(value):
        context[key] = _feature(feature)
    elif field == 2 and wire_type == 2:
      for key, steps in _entries(value):
        lists[key] = [_feature(step) for f, wt, step in proto_fields(steps)
                      if f == 1 and wt == 2]
  return context, lists


def _entries(buf: bytes):
  """A map<string, message>'s (key, value bytes): a value given twice in
  one entry is the two merged (protobuf parses their concatenation)."""
  for field, wire_type, entry in proto_fields(buf):
    if field != 1 or wire_type != 2:
      continue
    key, value = b"", []
    for f, wt, v in proto_fields(entry):
      if f == 1 and wt == 2:
        key = v
      elif f == 2 and wt == 2:
        value.append(v)
    yield key.decode("utf-8", "surrogateescape"), b"".join(value)


_MASK = (1 << 64) - 1


def _signed(n: int) -> int:
  """A varint as int64 (bits past 64 dropped, as protobuf does)."""
  n &= _MASK
  return n - (1 << 64) if n >= 1 << 63 else n


def _feature(buf: bytes) -> _Values:
  """A Feature's (kind, values); floats as 4 bytes each. As protobuf
  reads it: a list given twice is merged, another kind of list replaces
  it (a oneof), a value of another wire type than its list's is skipped
  (an unknown field)."""
  kind: Optional[str] = None
  values: List[Any] = []
  for field, wire_type, value in proto_fields(buf):
    if field not in _KINDS or wire_type != 2:
      continue
    if _KINDS[field] != kind:
      kind, values = _KINDS[field], []
    for f, wt, v in proto_fields(value):
      if f != 1:
        continue
      if kind == "bytes_list":
        if wt == 2:
          values.append(v)
      elif kind == "float_list":
        if wt == 2:
          if len(v) % 4:
            raise ValueError("a float list not of whole floats")
          values.extend(v[k:k + 4] for k in range(0, len(v), 4))
        elif wt == 5:
          values.append(v)
      elif wt == 2:  # packed varints
        pos = 0
        while pos < len(v):
          n, pos = read_varint(v, pos)
          values.append(_signed(n))
      elif wt == 0:
        values.append(_signed(v))
  return kind, values

"""Serialized tf.train.Examples -> numpy columns, the protobuf wire format
read with numpy over a whole batch at once: no per-record or per-value
Python step, no TensorFlow.

    columns = decode_columns(records, schema)   # None: not this fast path
    columns["year"]          # int64 [batch] (a fixed feature)
    columns["tailnum"]       # {"values": str objects, "lengths": int64}

The output is beam_tfrecords.read.arrays' `decode_batch` for Examples, value
for value. The wire is walked level by level with one cursor per record:
the n-th map entry of every record is read in one step, its key matched
against the schema's names, and its value's bytes located; then each
feature's values are gathered from all records at once (packed varints
for int64_list, packed little-endian float32 for float_list, length-
delimited strings for bytes_list, cut by Arrow into str or bytes).

The native core (beam_tfrecords_native.decode_examples, native/src/
decode.rs) walks the same wire record by record in Rust where it is
installed: the same records taken, the same values (the tests run both);
this module's numpy walk is the reference and the fallback (BTR_NATIVE=0
chooses it: beam_tfrecords.core.native).

SequenceExamples are read by the native core only
(beam_tfrecords_native.decode_sequence_examples: the context, then the
feature lists, each step one Feature of the schema's kind), into the
layout of read.sequence_columns, their pure-Python reference and
fallback.

It takes what TensorFlow's and tfx-bsl's encoders write (map entries
key first, packed lists). Anything else gives None, and the caller falls
back on tfx-bsl's general decoder: a key the schema does not name, a
duplicate key, unpacked lists, a field order or tag the walk does not
expect, a fixed feature absent or with another count of values, a
truncated record. So the fast path never guesses.
"""

from typing import (Any, Dict, List, NamedTuple, Optional, Sequence,
                    Tuple)

import numpy as np
import pyarrow as pa

from beam_tfrecords.core import native
from beam_tfrecords.core.records import Records
from beam_tfrecords.schema import Feature, FeatureType, Schema

__all__ = ["Flat", "Steps", "Text", "decode_columns", "native_decode",
           "native_decode_sequences", "objects", "shaped_sequences"]

# Feature's oneof: bytes_list = 1, float_list = 2, int64_list = 3 (wire
# type 2: length-delimited).
_KIND_TAG = {FeatureType.BYTES: 0x0A, FeatureType.STRING: 0x0A,
             FeatureType.FLOAT: 0x12, FeatureType.INT64: 0x1A}
_PAD = 16  # bytes past the end, so that reads near it need no bounds check


class Text:
  """A text or bytes column whose values are not Python objects yet:
  Arrow's array of them (str or bytes), read as an array of `shape`.
  Rows (the first axis) are cut without a copy; `numpy()` makes the
  objects, for the rows a batch keeps."""

  __slots__ = ("array", "shape")

  def __init__(self, array: pa.Array, shape: Tuple[int, ...]):
    self.array, self.shape = array, tuple(shape)

  def __len__(self) -> int:
    return self.shape[0]

  def __getitem__(self, rows: slice) -> "Text":
    start, stop, _ = rows.indices(self.shape[0])
    stop = max(start, stop)
    per = int(np.prod(self.shape[1:], dtype=np.int64))
    return Text(self.array.slice(start * per, (stop - start) * per),
                (stop - start,) + self.shape[1:])

  def reshape(self, shape: Tuple[int, ...]) -> "Text":
    return Text(self.array, shape)

  def compact(self) -> "Text":
    """The same values in buffers of their own (a cut's Text is a slice
    of its whole group's buffers: what pickling it would send)."""
    return Text(pa.concat_arrays([self.array]), self.shape)

  def numpy(self) -> np.ndarray:
    """An object array of str (or bytes) of the shape."""
    return self.array.to_numpy(zero_copy_only=False).reshape(self.shape)


def objects(columns: Any) -> Any:
  """Columns with their Text made object arrays (in nested dicts)."""
  if isinstance(columns, dict):
    return {k: objects(v) for k, v in columns.items()}
  return columns.numpy() if isinstance(columns, Text) else columns


class _Unsupported(Exception):
  """The batch is not in the layout this path reads."""


def decode_columns(records: Sequence[bytes], schema: Schema,
                   native_only: bool = False) -> Optional[Dict[str, Any]]:
  """The records as columns ({feature: array [batch, *shape]} for a
  fixed feature, {"values", "lengths"} for another; text and bytes as
  `Text`), or None when they are not in the layout this path reads (then
  use tfx-bsl's decoder). `native_only`: None where the native core is
  not installed (the numpy walk pays off over thousands of records, not
  for one)."""
  if not records:
    return None
  if schema.is_sequence:  # (the native core only; else sequence_columns)
    found = native_decode_sequences(records, schema)
    return None if found is None else shaped_sequences(*found, schema,
                                                       len(records))
  if native.core() is not None:
    flat = native_decode(records, schema)
    return None if flat is None else _shaped(flat, schema.features,
                                             len(records))
  if native_only:
    return None
  try:
    return _Batch(records, schema).columns()
  except _Unsupported:
    return None


class Flat(NamedTuple):
  """A feature's values in a batch, as the native core reads them."""
  values: Any  # every record's values back to back: an array, or Text
  lengths: np.ndarray  # int64: values per record
  present: np.ndarray  # bool: whether each record holds the feature


class Steps(NamedTuple):
  """A feature list's steps in a batch, as the native core reads them."""
  values: Any  # every step's values back to back: an array, or Text
  lengths: np.ndarray  # int64: values per step
  steps: np.ndarray  # int64: steps per record
  present: np.ndarray  # bool: whether each record holds the feature list


def native_decode(records: Sequence[bytes], schema: Schema
                  ) -> Optional[Dict[str, Flat]]:
  """Examples by the native core: {feature: Flat}, or None where the
  core is not installed or the records are not in the layout it reads
  (the same layout as the numpy walk: then use tfx-bsl's decoder)."""
  module = native.core()
  if module is None or schema.is_sequence or not records:
    return None
  names, kinds = _native_schema(schema.features)
  got = _bytes_call(module.decode_examples, records, names, kinds)
  return None if isinstance(got, str) else _flats(schema.features, got)


def native_decode_sequences(records: Sequence[bytes], schema: Schema
                            ) -> Optional[Tuple[Dict[str, Flat],
                                                Dict[str, Steps]]]:
  """SequenceExamples by the native core (decode.rs): ({context feature:
  Flat}, {feature list: Steps}), or None where the core is not installed
  or the records are not in the layout it reads (the context, then the
  feature lists, each step one Feature of the schema's kind: then use
  read.sequence_columns, the reference)."""
  module = native.core()
  if module is None or not schema.is_sequence or not records:
    return None
  got = _bytes_call(module.decode_sequence_examples, records,
                    *_native_schema(schema.context),
                    *_native_schema(schema.sequence))
  if isinstance(got, str):
    return None
  context = _flats(schema.context, got[0])
  if context is None:
    return None
  lists = {}
  for f, (steps, lengths, data, offsets, present) in zip(schema.sequence,
                                                         got[1]):
    values = _native_values(f, data, offsets)
    if values is None:
      return None
    lists[f.name] = Steps(values, _int64s(lengths), _int64s(steps),
                          np.frombuffer(present, np.bool_))
  return context, lists


def _bytes_call(function, records: Sequence[bytes], *args):
  """A native decoder called with a list of bytes, or with Records' own
  buffers and spans (core.records: no bytes object per record)."""
  if isinstance(records, Records):
    return function(records.native(), *args)
  try:
    return function(records, *args)
  except TypeError:  # not a list of bytes (a tuple, memoryviews...)
    return function([bytes(r) for r in records], *args)


def _int64s(data) -> np.ndarray:
  return np.frombuffer(data, "<i8").astype(np.int64, copy=False)


def _flats(features: Sequence[Feature], got) -> Optional[Dict[str, Flat]]:
  """The core's columns as {feature: Flat}; None where text is not
  UTF-8 (the fallback decoder then says so)."""
  out = {}
  for f, (lengths, data, offsets, present) in zip(features, got):
    values = _native_values(f, data, offsets)
    if values is None:
      return None
    out[f.name] = Flat(values, _int64s(lengths),
                       np.frombuffer(present, np.bool_))
  return out


def _native_values(f: Feature, data, offsets) -> Any:
  """A column's values from the core: int64 / float32 arrays, or Text;
  None for text that is not UTF-8."""
  if f.type is FeatureType.INT64:
    return _int64s(data)
  if f.type is FeatureType.FLOAT:
    return np.frombuffer(data, "<f4").astype(np.float32, copy=False)
  array = pa.LargeBinaryArray.from_buffers(
      pa.large_binary(), len(offsets) // 8 - 1,
      [None, pa.py_buffer(offsets), pa.py_buffer(data)])
  if f.type is FeatureType.STRING:  # utf-8 checked and cut in C++
    try:
      array = array.cast(pa.large_string())
    except pa.ArrowInvalid:
      return None
  return Text(array, (len(array),))


# The core's codes of feature types (decode.rs, Kind::from_code).
_NATIVE_KIND = {FeatureType.INT64: 0, FeatureType.FLOAT: 1,
                FeatureType.BYTES: 2, FeatureType.STRING: 2}


def _native_schema(features: Sequence[Feature]) -> Tuple[List[bytes], bytes]:
  return ([f.name.encode("utf-8") for f in features],
          bytes(_NATIVE_KIND[f.type] for f in features))


def shaped_sequences(context: Dict[str, Flat], lists: Dict[str, Steps],
                     schema: Schema, n: int) -> Optional[Dict[str, Any]]:
  """SequenceExamples' columns (`native_decode_sequences`', or
  read.sequence_columns') as read.arrays' decode_batch gives them
  ({"context", "feature_lists"}; a feature list {"values" [steps,
  *shape], "lengths" (steps per record)} where every step holds the
  feature's fixed shape, else {"values", "lengths" (per step),
  "steps"}); None where a fixed context feature is not fixed everywhere
  (read.sequence_columns then says so)."""
  shaped = _shaped(context, schema.context, n)
  if shaped is None:
    return None
  out = {}
  for f in schema.sequence:
    values, lengths, steps, _ = lists[f.name]
    if f.always_present and not f.is_variable_length and np.all(
        lengths == (f.num_values or 1)):
      out[f.name] = {"values": values.reshape(
          (len(lengths),) + tuple(f.shape)), "lengths": steps}
    else:
      out[f.name] = {"values": values.reshape((len(values),)),
                     "lengths": lengths, "steps": steps}
  return {"context": shaped, "feature_lists": out}


def _shaped(flat: Dict[str, Flat], features: Sequence[Feature], n: int
            ) -> Optional[Dict[str, Any]]:
  """`native_decode`'s output as `_Batch.columns()` gives it (None
  where that is None: a fixed feature not fixed everywhere)."""
  out = {}
  for f in features:
    values, lengths, present = flat[f.name]
    if f.always_present and not f.is_variable_length:
      per = int(np.prod(f.shape)) if f.shape else 1
      if not present.all() or (lengths != per).any():
        return None
      out[f.name] = values.reshape((n,) + tuple(f.shape))
    else:
      out[f.name] = {"values": values.reshape((len(values),)),
                     "lengths": lengths}
  return out


class _Batch:
  """One batch's bytes, back to back, and where each record is."""

  def __init__(self, records: Sequence[bytes], schema: Schema):
    self.schema = schema
    lengths = np.fromiter(map(len, records), np.int64, len(records))
    self.ends = np.cumsum(lengths)
    self.starts = self.ends - lengths
    self.buf = np.frombuffer(b"".join(records) + bytes(_PAD), np.uint8)
    self.size = int(self.ends[-1]) if len(records) else 0
    self.n = len(records)
    # words[i]: the 8 bytes from i as one little-endian integer.
    self.words = np.ndarray((self.size + _PAD - 7,), "<u8", self.buf,
                            strides=(1,))

  def varint(self, pos: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The varints at `pos`: (values, the positions after them)."""
    b = self.buf[pos].astype(np.uint64)
    value = b & 0x7F
    after = pos + 1
    more = np.flatnonzero(b >= 0x80)
    shift = 7
    while more.size:
      if shift > 63:
        raise _Unsupported("varint longer than 10 bytes")
      b = self.buf[after[more]].astype(np.uint64)
      value[more] |= (b & 0x7F) << np.uint64(shift)
      after[more] += 1
      more = more[b >= 0x80]
      shift += 7
    if after.size and after.max() > self.size:
      raise _Unsupported("truncated")
    if value.size and value.max() >= 2**31:  # protobuf's own limit
      raise _Unsupported("a length past 2 GB")
    return value.astype(np.int64), after

  def delimited(self, pos: np.ndarray, tag: int
                ) -> Tuple[np.ndarray, np.ndarray]:
    """The length-delimited fields `tag` at `pos`: (content start, end)."""
    buf = self.buf
    if pos.size and (buf[pos] != tag).any():
      raise _Unsupported(f"tag {tag:#x} expected")
    first = buf[pos + 1]
    if not (first & 0x80).any():  # lengths under 128: one byte
      length, start = first.astype(np.int64), pos + 2
    else:
      length, start = self.varint(pos + 1)
    end = start + length
    if end.size and end.max() > self.size:
      raise _Unsupported("truncated")
    return start, end

  def entries(self) -> List[List[Tuple[np.ndarray, ...]]]:
    """Every map entry of every record, per feature: [(records, their
    Feature's content start, end)] (in the records' order within each
    round; one per round of the walk)."""
    keys = _Keys([f.name.encode("utf-8") for f in self.schema.features],
                 self.words)
    rec = np.arange(self.n)
    pos, end = self.starts, self.ends
    # Example.features (1): the whole record but an empty Example.
    has = pos < end
    rec, pos = rec[has], pos[has]
    start, stop = self.delimited(pos, 0x0A)
    if (stop != end[rec]).any():
      raise _Unsupported("an Example with more than its features")
    found: List[List[Tuple[np.ndarray, ...]]] = [
        [] for _ in self.schema.features]
    more = start < stop
    rec, pos, end = rec[more], start[more], stop[more]
    last = np.full(rec.size, -1, np.int64)  # the key before, in order
    while rec.size:
      # Features.feature (1): a map entry {key (1), value (2)}; the n-th
      # entry of every record in one round.
      entry, entry_end = self.delimited(pos, 0x0A)
      key, key_end = self.delimited(entry, 0x0A)
      if (entry_end > end).any() or (key_end > entry_end).any():
        raise _Unsupported("a field past the end of its message")
      feature = keys.match(key, key_end, last + 1)
      value, value_end = self.delimited(key_end, 0x12)
      if (value_end != entry_end).any():
        raise _Unsupported("a map entry with more than key and value")
      if feature[0] == feature[-1] and (feature == feature[0]).all():
        found[feature[0]].append((rec, value, value_end))
      else:
        order = np.argsort(feature.astype(np.int16), kind="stable")
        bounds = np.cumsum(np.bincount(feature, minlength=len(found)))
        for i, (a, b) in enumerate(zip(bounds - np.diff(bounds, prepend=0),
                                       bounds)):
          if a < b:
            mine = order[a:b]
            found[i].append((rec[mine], value[mine], value_end[mine]))
      pos, last = entry_end, feature
      more = pos < end
      if not more.all():
        rec, pos, end, last = rec[more], pos[more], end[more], last[more]
    return found

  def columns(self) -> Dict[str, Any]:
    out = {}
    for f, rounds in zip(self.schema.features, self.entries()):
      if len(rounds) == 1:
        rec, value, value_end = rounds[0]
      elif rounds:
        rec, value, value_end = (np.concatenate(p) for p in zip(*rounds))
        order = np.argsort(rec, kind="stable")
        rec, value, value_end = rec[order], value[order], value_end[order]
        if (np.diff(rec) == 0).any():
          raise _Unsupported(f"{f.name}: twice in one record")
      else:
        rec = value = value_end = np.zeros(0, np.int64)
      out[f.name] = self.column(f, rec, value, value_end)
    return out

  def column(self, f: Feature, rec: np.ndarray, start: np.ndarray,
             end: np.ndarray) -> Any:
    """One feature's column from its Features' spans (records `rec`)."""
    if start.size and (end == start).any():
      raise _Unsupported("a Feature with no list")
    list_start, list_end = self.delimited(start, _KIND_TAG[f.type])
    if (list_end != end).any():
      raise _Unsupported("more than the list in a Feature")
    values: Any
    if f.type in (FeatureType.BYTES, FeatureType.STRING):
      values, counts = self.strings(f, list_start, list_end)
    else:
      values, counts = self.packed(f, list_start, list_end)
    lengths = np.zeros(self.n, np.int64)
    lengths[rec] = counts
    if f.always_present and not f.is_variable_length:
      per = int(np.prod(f.shape)) if f.shape else 1
      if rec.size != self.n or (counts != per).any():
        raise _Unsupported(f"{f.name}: not the fixed count everywhere")
      return values.reshape((self.n,) + tuple(f.shape))
    return {"values": values.reshape((len(values),)), "lengths": lengths}

  def packed(self, f: Feature, start: np.ndarray, end: np.ndarray
             ) -> Tuple[np.ndarray, np.ndarray]:
    """A float_list's or int64_list's values (packed, field 1) and the
    count per list."""
    has = end > start
    every = bool(has.all())
    payload, payload_end = self.delimited(start if every else start[has],
                                          0x0A)
    if (payload_end != (end if every else end[has])).any():
      raise _Unsupported("an unpacked or split list")
    sizes = payload_end - payload
    counts = np.zeros(start.size, np.int64)
    if f.type is FeatureType.FLOAT:
      if (sizes % 4).any():
        raise _Unsupported("a float list not of whole floats")
      counts[has] = sizes // 4
      if sizes.size and (sizes == 4).all():  # one float each
        return self.floats(payload), counts
    else:
      one = self.one_varint_each(payload, sizes)
      if one is not None:
        counts[has] = 1
        return one, counts
    first = np.zeros(start.size, np.int64)
    last = np.zeros(start.size, np.int64)
    first[has], last[has] = payload, payload_end
    data = self.buf[_ranges(first, last)]
    if f.type is FeatureType.FLOAT:
      return data.view("<f4").astype(np.float32), counts
    return _varints(data, last - first)

  def floats(self, pos: np.ndarray) -> np.ndarray:
    """The little-endian float32 at each of `pos`."""
    bits = self.buf[pos].astype(np.uint32)
    for j in (1, 2, 3):
      bits |= self.buf[pos + j].astype(np.uint32) << np.uint32(8 * j)
    return bits.view(np.float32)

  def one_varint_each(self, pos: np.ndarray, size: np.ndarray
                      ) -> Optional[np.ndarray]:
    """The varint (int64) in each [pos, pos + size) when each holds
    exactly one (a scalar feature's list); None when one holds more."""
    top = int(size.max()) if size.size else 0
    if not size.size or top > 10 or (size == 0).any():
      return None  # (an empty packed list holds no varint)
    value = np.zeros(pos.size, np.uint64)
    for j in range(top):
      b = self.buf[np.minimum(pos + j, self.size)]
      inside = j < size
      # A continuation bit on every byte but the last of each list.
      if (inside & (((b & 0x80) != 0) == (size - 1 == j))).any():
        return None
      bits = (b & 0x7F).astype(np.uint64) << np.uint64(7 * j)
      value |= bits if j == 0 else np.where(inside, bits, np.uint64(0))
    return value.view(np.int64)

  def strings(self, f: Feature, start: np.ndarray, end: np.ndarray
              ) -> Tuple[Text, np.ndarray]:
    """A bytes_list's values (field 1, repeated) as Text (of str or
    bytes), and the count per list."""
    list_index = np.arange(start.size)
    pos = start.copy()
    rounds: List[Tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    active = np.flatnonzero(pos < end)
    while active.size:
      a, b = self.delimited(pos[active], 0x0A)
      rounds.append((list_index[active], a, b))
      pos[active] = b
      if (b > end[active]).any():
        raise _Unsupported("a value past its list")
      active = active[b < end[active]]
    counts = np.zeros(start.size, np.int64)
    if not rounds:
      values = pa.array([], pa.large_binary())
    else:
      if len(rounds) == 1:  # one value in each list: in order already
        which, a, b = rounds[0]
      else:
        which, a, b = (np.concatenate(p) for p in zip(*rounds))
        order = np.argsort(which, kind="stable")
        which, a, b = which[order], a[order], b[order]
      counts = np.bincount(which, minlength=start.size)
      offsets = np.zeros(a.size + 1, np.int64)
      np.cumsum(b - a, out=offsets[1:])
      data = self.buf[_ranges(a, b)]
      values = pa.LargeBinaryArray.from_buffers(
          pa.large_binary(), len(a),
          [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if f.type is FeatureType.STRING:  # utf-8 checked and cut in C++
      try:
        values = values.cast(pa.large_string())
      except pa.ArrowInvalid as e:
        raise _Unsupported("not utf-8") from e
    return Text(values, (len(values),)), counts


class _Keys:
  """The schema's names, matched against map keys in the buffer word by
  word: a key is its length, its first 8 bytes, its last 8 and the 8-byte
  words between (none for keys up to 16 bytes), all compared."""

  def __init__(self, names: List[bytes], words: np.ndarray):
    self.names, self.words = names, words
    self.lengths = np.array([len(n) for n in names], np.int64)
    longest = int(self.lengths.max()) if names else 0
    self.mids = np.zeros((len(names), len(_middles(longest))), np.uint64)
    first, last = [], []
    for i, n in enumerate(names):
      first.append(_word(n[:8]))
      last.append(_word(n[-8:]) if len(n) > 8 else 0)
      for j, at in enumerate(_middles(len(n))):
        self.mids[i, j] = _word(n[at:at + 8])
    self.first = np.array(first, np.uint64)
    self.last = np.array(last, np.uint64)
    self.hashes = self._hash(self.lengths, self.first, self.last,
                             [(np.flatnonzero(self.lengths - 8 > at),
                               self.mids[:, j][self.lengths - 8 > at])
                              for j, at in enumerate(_middles(longest))])
    if np.unique(self.hashes).size != len(names):
      raise _Unsupported("two names hash alike")  # (not seen)
    self.order = np.argsort(self.hashes)
    self.sorted = self.hashes[self.order]

  @staticmethod
  def _hash(lengths, first, last, mids) -> np.ndarray:
    # (Arrays of uint64 wrap around without a warning.)
    h = (first * np.uint64(0x9E3779B97F4A7C15)
         ^ last * np.uint64(0xC2B2AE3D27D4EB4F)
         ^ lengths.astype(np.uint64))
    for which, words in mids:
      h[which] = (h[which] ^ words) * np.uint64(0x165667B19E3779F9)
    return h

  def match(self, start: np.ndarray, end: np.ndarray, guess: np.ndarray
            ) -> np.ndarray:
    """The feature index of each key between start and end; `guess`:
    the likely one (the name after the record's previous key: encoders
    write keys in order)."""
    if not self.names:
      raise _Unsupported("a key the schema does not name")
    length = end - start
    first = self.words[start]
    short = length < 8
    if short.any():
      shift = (8 * np.minimum(length, 8)).astype(np.uint64)
      first = np.where(short, first & ((np.uint64(1) << shift) -
                                       np.uint64(1)), first)
    over = length > 8  # (the last 8 bytes of a shorter key: 0)
    if over.all():
      last = self.words[end - 8]
    else:
      last = np.zeros(length.size, np.uint64)
      if over.any():
        last[over] = self.words[end[over] - 8]
    mids = []  # (which keys, their word) per middle word
    for at in _middles(int(length.max())) if length.size else ():
      which = np.flatnonzero(length - 8 > at)
      mids.append((which, self.words[start[which] + at]))
    index = np.minimum(guess, len(self.names) - 1)
    wrong = np.flatnonzero(~self._same(index, length, first, last, mids))
    if wrong.size:
      found = np.searchsorted(self.sorted,
                              self._hash(length, first, last, mids)[wrong])
      index[wrong] = self.order[np.minimum(found, len(self.order) - 1)]
      if not self._same(index, length, first, last, mids).all():
        raise _Unsupported("a key the schema does not name")
    return index

  def _same(self, index, length, first, last, mids) -> np.ndarray:
    """Whether each key is the name `index` gives, word for word."""
    same = ((self.first[index] == first) & (self.last[index] == last) &
            (self.lengths[index] == length))
    for j, (which, words) in enumerate(mids):
      if j >= self.mids.shape[1]:  # longer than any name
        same[which] = False
        continue
      same[which] &= self.mids[index[which], j] == words
    return same


def _middles(length: int) -> range:
  """Where the 8-byte words between a key's first and last 8 start."""
  return range(8, length - 8, 8)


def _word(data: bytes) -> int:
  return int.from_bytes(data.ljust(8, b"\0"), "little")


def _ranges(start: np.ndarray, end: np.ndarray) -> np.ndarray:
  """The positions of every [start, end) back to back."""
  counts = end - start
  total = int(counts.sum())
  if not total:
    return np.zeros(0, np.int64)
  shift = np.repeat(start - (np.cumsum(counts) - counts), counts)
  return shift + np.arange(total)


def _varints(data: np.ndarray, sizes: np.ndarray
             ) -> Tuple[np.ndarray, np.ndarray]:
  """Packed varints (as int64, two's complement as protobuf writes
  negatives), back to back in `data` in lists of `sizes` bytes: (values,
  count per list)."""
  if not data.size:
    return np.zeros(0, np.int64), np.zeros(sizes.size, np.int64)
  last = data < 0x80
  ends = np.cumsum(sizes)
  if (~last[ends[sizes > 0] - 1]).any():
    raise _Unsupported("a varint cut off at the end of its list")
  value_end = np.flatnonzero(last)
  value_start = np.concatenate([[0], value_end[:-1] + 1])
  if (value_end - value_start > 9).any():
    raise _Unsupported("varint longer than 10 bytes")
  index = np.arange(data.size) - np.repeat(value_start,
                                           value_end - value_start + 1)
  bits = (data & 0x7F).astype(np.uint64) << (7 * index).astype(np.uint64)
  values = np.add.reduceat(bits, value_start).view(np.int64)
  done = np.concatenate([[0], np.cumsum(last)])
  return values, done[ends] - done[ends - sizes]

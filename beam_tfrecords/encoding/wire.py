"""Vectorized protobuf wire encoding of tf.train.Example, in numpy.

Why not tfx-bsl's `RecordBatchToExamplesEncoder`: it writes the features of a
record in hash-map order, and that order changes from one process to the next
(the same RecordBatch gave four different byte strings in four runs, checked
with tfx-bsl 1.21). The product guarantees byte-identical output for the same
input, so records are built here with keys in sorted (bytewise) order.

Everything works on `encoding.ragged.Ragged` columns: one contiguous uint8
buffer plus n+1 offsets, the bytes of row i being buf[offsets[i]:offsets[i+1]].
A message is built as `Pieces` (pieces joined row by row, once, by
`materialize`); headers come from `varints` of lengths computed beforehand.

Wire layout (field numbers from tensorflow/core/example/*.proto):

  SequenceExample = 0x0A len Features (context)   omitted when empty
                    0x12 len FeatureLists         omitted when empty
  FeatureLists = (0x0A len ListEntry)*            one per present list
  ListEntry    = 0x0A len key  0x12 len FeatureList
  FeatureList  = (0x0A len Feature)*              one per step
  Example      = 0x0A len Features
  Features     = (0x0A len MapEntry)*            one per present feature
  MapEntry     = 0x0A len key  0x12 len Feature
  Feature      = 0x0A len BytesList | 0x12 len FloatList | 0x1A len Int64List
  BytesList    = (0x0A len bytes)*
  FloatList    = 0x0A len float32-LE*            packed, omitted when empty
  Int64List    = 0x0A len varint*                packed, omitted when empty

A missing (null) feature is left out of the record; an empty list is written
as a Feature holding an empty list (TensorFlow reads both as "no values" for
VarLenFeature; FixedLenFeature with a default fills only the missing one).
"""

from typing import (Any, Iterable, List, NamedTuple, Optional, Sequence,
                    Tuple, TypeVar, Union)

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.encoding.ragged import (Ragged, const, from_arrow, masked,
                                            offsets_of, ranges, to_arrow)

__all__ = ["Entry", "sorted_by_name", "varints", "varint_bytes", "Pieces",
           "materialize", "int64_feature", "float_feature", "bytes_feature",
           "features_message", "example_message", "feature_lists",
           "sequence_example_message", "packed", "unpacked"]

_UINT8 = np.uint8
_Named = TypeVar("_Named", bound=Tuple[Any, ...])


def _varint_lengths(values: np.ndarray) -> np.ndarray:
  lengths = np.ones(len(values), dtype=np.int64)
  for k in range(1, 10):
    lengths += values >= np.uint64(1 << (7 * k))
  return lengths


def _varint_length(value: int) -> int:
  return len(varint_bytes(value))


def varints(values: np.ndarray, present: Optional[np.ndarray] = None
            ) -> Ragged:
  """The varint encoding of int64/uint64 values (negatives take 10 bytes).

  Args:
    values: the numbers, one per row.
    present: optional bool mask; rows where it is False get no bytes.
  """
  v = np.asarray(values)
  v = v.view(np.uint64) if v.dtype == np.int64 else v.astype(np.uint64)
  if len(v) and v.max() < 128:  # one byte each: the common case of lengths
    if present is None:
      return Ragged(v.astype(_UINT8), np.arange(len(v) + 1, dtype=np.int64))
    return Ragged(v[present].astype(_UINT8), offsets_of(present))
  lengths = _varint_lengths(v)
  if present is not None:
    lengths = np.where(present, lengths, 0)
  offsets = offsets_of(lengths)
  buf = np.empty(int(offsets[-1]), dtype=_UINT8)
  starts = offsets[:-1]
  for k in range(10):
    rows = np.nonzero(lengths > k)[0]
    if len(rows) == 0:
      break
    byte = (v[rows] >> np.uint64(7 * k)) & np.uint64(0x7F)
    more = lengths[rows] > k + 1
    buf[starts[rows] + k] = (byte | np.where(more, 0x80, 0).astype(np.uint64)
                            ).astype(_UINT8)
  return Ragged(buf, offsets)


class _Const:
  """The same bytes in every row (present None) or in the rows where
  `present` is True; made into a column only when the message is built."""

  __slots__ = ("data", "present")

  def __init__(self, data: bytes, present: Optional[np.ndarray]):
    self.data = data
    self.present = present


class Pieces:
  """A message per row, not yet joined: row i is row i of every piece, in
  order. Pieces are Ragged columns or _Const; `lengths` is known up front,
  so messages nest (headers need only lengths) and the bytes are copied
  once, by `materialize`."""

  __slots__ = ("pieces", "lengths")

  def __init__(self, pieces: List["Piece"], lengths: np.ndarray):
    self.pieces = pieces
    self.lengths = lengths

  def __len__(self):
    return len(self.lengths)

  def to_list(self) -> List[bytes]:
    return materialize(self).to_list()


# One piece of a message: a column, or the same bytes in (some) rows.
Piece = Union[Ragged, _Const]
# A message per row: joined (Ragged) or not yet (Pieces).
Message = Union[Ragged, Pieces]


class Entry(NamedTuple):
  """One feature (or feature list) of every row of a message."""
  name: str
  value: Message       # its serialized Feature (FeatureList body) per row
  present: np.ndarray  # bool per row: False leaves the entry out


def sorted_by_name(entries: Iterable[_Named]) -> List[_Named]:
  """Entries ((name, ...) tuples) in the order a message holds them: by
  the name's UTF-8 bytes, as protobuf serializes map keys."""
  return sorted(entries, key=lambda entry: entry[0].encode("utf-8"))


_EMPTY = pa.scalar(b"", pa.large_binary())


def materialize(message: Message) -> Ragged:
  """The bytes of every row, joined in one pass (Arrow's
  binary_join_element_wise; constants present in every row are passed as
  scalars)."""
  if isinstance(message, Ragged):
    return message
  n = len(message)
  if not message.pieces:
    return Ragged(np.empty(0, dtype=_UINT8), np.zeros(n + 1, dtype=np.int64))
  if len(message.pieces) == 1 and isinstance(message.pieces[0], Ragged):
    return message.pieces[0]
  args: List[Any] = []
  for piece in message.pieces:
    if isinstance(piece, Ragged):
      args.append(to_arrow(piece))
    elif piece.present is None:
      args.append(pa.scalar(piece.data, pa.large_binary()))
    else:
      args.append(to_arrow(const(piece.data, piece.present)))
  if not any(isinstance(a, pa.Array) for a in args):
    # Only constants: give Arrow one column to set the length.
    first = message.pieces[0]
    assert isinstance(first, _Const)  # no column among the pieces
    args[0] = to_arrow(const(first.data, np.ones(n, dtype=bool)))
  return from_arrow(pc.binary_join_element_wise(*args, _EMPTY))


def _pieces_of(message: Message) -> List[Piece]:
  return message.pieces if isinstance(message, Pieces) else [message]


def _merged(pieces: List[Piece]) -> List[Piece]:
  """Adjacent constants with the same rows become one."""
  out: List[Piece] = []
  for piece in pieces:
    last = out[-1] if out else None
    if (isinstance(piece, _Const) and isinstance(last, _Const)
        and last.present is piece.present):
      out[-1] = _Const(last.data + piece.data, piece.present)
    elif not (isinstance(piece, _Const) and not piece.data):
      out.append(piece)
  return out


def _masked_message(message: Message, present: np.ndarray) -> Pieces:
  """`message` with the rows where present is False emptied."""
  pieces: List[Piece] = []
  absent = ~present
  for piece in _pieces_of(message):
    if isinstance(piece, _Const):
      pieces.append(_Const(piece.data, present if piece.present is None
                           else piece.present & present))
    elif piece.lengths[absent].any():
      pieces.append(masked(piece, present))
    else:
      pieces.append(piece)
  return Pieces(pieces, np.where(present, message.lengths, 0))


def _length_delimited(tag: int, payload: Message,
                      present: Optional[np.ndarray] = None) -> Pieces:
  """tag + varint(len) + payload per row (nothing where present is False).

  Not joined yet: the result is Pieces.
  """
  lengths = payload.lengths
  if present is not None:
    present = np.asarray(present, dtype=bool)
    if present.all():
      present = None
    elif lengths[~present].any():
      payload = _masked_message(payload, present)
      lengths = payload.lengths
  header: List[Piece]
  header_lengths: Union[int, np.ndarray]
  if len(lengths) and lengths.min() == lengths.max() and present is None:
    header = [_Const(bytes([tag]) + varint_bytes(int(lengths[0])), None)]
    header_lengths = 1 + _varint_length(int(lengths[0]))
  else:
    header = [_Const(bytes([tag]), present), varints(lengths, present)]
    header_lengths = 1 + _varint_lengths(lengths.astype(np.uint64))
  total = lengths + header_lengths
  if present is not None:
    total = np.where(present, total, 0)
  return Pieces(_merged(header + _pieces_of(payload)), total)


def _is_one_per_row(offsets: np.ndarray, num_values: int) -> bool:
  """Whether row i holds exactly value i, and there are no other values."""
  return len(offsets) > 0 and int(offsets[0]) == 0 and \
      int(offsets[-1]) == len(offsets) - 1 == num_values and bool(
          (np.diff(offsets) == 1).all())


def int64_feature(values: np.ndarray, offsets: np.ndarray,
                  present: Optional[np.ndarray] = None) -> Pieces:
  """Feature{int64_list} per row, from flat int64 values and row offsets;
  nothing where `present` is False."""
  encoded = varints(values.astype(np.int64, copy=False))
  per_row = encoded.regroup(np.asarray(offsets, dtype=np.int64))
  int64_list = _length_delimited(0x0A, per_row, np.diff(offsets) > 0)
  return _length_delimited(0x1A, int64_list, present)


def float_feature(values: np.ndarray, offsets: np.ndarray,
                  present: Optional[np.ndarray] = None) -> Pieces:
  """Feature{float_list} per row, from flat values (stored as float32)."""
  data = np.ascontiguousarray(values, dtype="<f4").view(_UINT8)
  per_row = Ragged(data, np.asarray(offsets, dtype=np.int64) * 4)
  float_list = _length_delimited(0x0A, per_row, np.diff(offsets) > 0)
  return _length_delimited(0x12, float_list, present)


def bytes_feature(data: np.ndarray, value_offsets: np.ndarray,
                  offsets: np.ndarray,
                  present: Optional[np.ndarray] = None) -> Pieces:
  """Feature{bytes_list} per row.

  Args:
    data: uint8 buffer of all values back to back.
    value_offsets: len(values)+1 offsets of each value in `data`.
    offsets: n+1 offsets of each row's first value in the value list.
    present: optional bool mask; rows where it is False get no bytes.
  """
  offsets = np.asarray(offsets, dtype=np.int64)
  values = Ragged(data, value_offsets.astype(np.int64))
  items = _length_delimited(0x0A, values)      # one BytesList item per value
  bytes_list: Message
  if _is_one_per_row(offsets, len(values)):
    bytes_list = items                         # a scalar column: no regroup
  else:
    bytes_list = materialize(items).regroup(offsets)
  return _length_delimited(0x0A, bytes_list, present)


def features_message(features: Sequence[Entry]) -> Pieces:
  """The Features message body per row.

  Args:
    features: at least one Entry, in the order they are written; callers
      sort them by name (`sorted_by_name`).
  """
  pieces: List[Piece] = []
  lengths: Optional[np.ndarray] = None
  for name, feature, present in features:
    present = np.asarray(present, dtype=bool)
    mask = None if present.all() else present
    key = name.encode("utf-8")
    key_field = _Const(b"\x0a" + varint_bytes(len(key)) + key, mask)
    value = _length_delimited(0x12, feature, mask)
    key_lengths = len(key_field.data) if mask is None else \
        mask * len(key_field.data)
    entry_pieces: List[Piece] = [key_field, *value.pieces]
    entry = _length_delimited(0x0A, Pieces(entry_pieces,
                                           value.lengths + key_lengths), mask)
    pieces += entry.pieces
    lengths = entry.lengths if lengths is None else lengths + entry.lengths
  if lengths is None:
    raise ValueError("a Features message needs at least one entry")
  return Pieces(_merged(pieces), lengths)


def example_message(features: Sequence[Entry], n: int) -> Ragged:
  """Serialized tf.train.Example per row (see `features_message`)."""
  if not features:
    return const(b"\x0a\x00", np.ones(n, dtype=bool))
  return materialize(_length_delimited(0x0A, features_message(features)))


def feature_lists(step_features: Message, step_offsets: np.ndarray) -> Ragged:
  """The FeatureList body per row.

  Args:
    step_features: one serialized Feature per step, all rows back to back.
    step_offsets: n+1 offsets of each row's first step.
  """
  framed = materialize(_length_delimited(0x0A, step_features))
  return framed.regroup(np.asarray(step_offsets, dtype=np.int64))


def sequence_example_message(context: Sequence[Entry], lists: Sequence[Entry],
                             n: int) -> Ragged:
  """Serialized tf.train.SequenceExample per row.

  Args:
    context: Feature entries as for `features_message`, sorted by name.
    lists: FeatureList body entries, sorted by name.
    n: rows.
  """
  pieces: List[Piece] = []
  lengths = np.zeros(n, dtype=np.int64)
  for tag, entries in ((0x0A, context), (0x12, lists)):
    if entries:
      body = features_message(entries)
      field = _length_delimited(tag, body, body.lengths > 0)
      pieces += field.pieces
      lengths = lengths + field.lengths
  if not pieces:
    return Ragged(np.empty(0, dtype=_UINT8), np.zeros(n + 1, dtype=np.int64))
  return materialize(Pieces(_merged(pieces), lengths))


def varint_bytes(value: int) -> bytes:
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    if value:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


def packed(columns: Sequence[Ragged]) -> Ragged:
  """Per row, each column's bytes as the varint of their length and the
  bytes, column after column (the packed steps of the grouped path: see
  beam_tfrecords_native's packing.rs, which gives the same bytes)."""
  n = len(columns[0]) if columns else 0
  pieces: List[Piece] = []
  total = np.zeros(n, dtype=np.int64)
  for column in columns:
    lengths = column.lengths
    pieces += [varints(lengths), column]
    total += lengths + _varint_lengths(lengths.astype(np.uint64))
  return materialize(Pieces(pieces, total))


def unpacked(rows: Ragged, k: int) -> List[Ragged]:
  """`packed`'s columns back: k Ragged, one per column. A row that is
  not k length-prefixed values is a ValueError naming the first such row
  (as the native core names it)."""
  if k < 1:
    raise ValueError("unpacked_values: k must be at least 1")
  offsets = np.asarray(rows.offsets, dtype=np.int64)
  if not len(offsets) or offsets[0] < 0 or (np.diff(offsets) < 0).any() \
      or offsets[-1] > len(rows.buf):
    raise ValueError("unpacked_values: offsets out of order or past the "
                     "data")
  buf, n = rows.buf, len(offsets) - 1
  pos, ends = offsets[:-1].copy(), offsets[1:]
  bad = np.zeros(n, dtype=bool)
  out = []
  for _ in range(k):
    length, used = _varints_at(buf, pos, ends, bad)
    start = pos + used
    bad |= start + length > ends
    size = np.where(bad, 0, length)
    pos = np.where(bad, pos, start + size)
    out.append(Ragged(buf[ranges(start, size)], offsets_of(size)))
  bad |= pos != ends
  if bad.any():
    raise ValueError(f"packed row {int(np.flatnonzero(bad)[0])} is not "
                     f"{k} length-prefixed values")
  return out


def _varints_at(buf: np.ndarray, pos: np.ndarray, ends: np.ndarray,
                bad: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
  """(the varint at each row's `pos`, its bytes), for the rows not `bad`;
  rows whose varint does not end before their row's end (or past 63 bits)
  are marked in `bad` (updated in place)."""
  n = len(pos)
  length = np.zeros(n, dtype=np.uint64)
  used = np.zeros(n, dtype=np.int64)
  going = ~bad
  for byte in range(10):
    at = pos + byte
    bad |= going & (at >= ends)
    going &= ~bad
    rows = np.flatnonzero(going)
    if not len(rows):
      break
    value = buf[at[rows]].astype(np.uint64)
    length[rows] |= (value & np.uint64(0x7F)) << np.uint64(7 * byte)
    used[rows] += 1
    going[rows] = value >= 0x80
  bad |= going | (length > np.uint64(np.iinfo(np.int64).max))
  return np.where(bad, 0, length).astype(np.int64), used

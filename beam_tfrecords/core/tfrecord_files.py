"""TFRecord files and Example protos in plain Python (no TensorFlow).

A TFRecord file is a sequence of records, each framed as

  uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)

(little-endian). `frame_records` writes them (core.shard_reader reads
files of them, checked); `decode_example` turns a serialized
tf.train.Example into a dict of name -> ("int64_list" | "float_list" |
"bytes_list", values), and a record that is not one into an InputError.
"""

import struct
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.core import native
from beam_tfrecords.core.errors import InputError

__all__ = ["masked_crc32c",
           "decode_example", "decode_sequence_example", "decode_feature",
           "decode_features", "frame_record", "frame_records",
           "frame_buffer", "unframe_records", "framed_ends", "proto_fields",
           "read_varint"]

_MASK_DELTA = 0xA282EAD8
# Fewer records than this are framed one by one (see frame_records).
_SMALL = 32


def masked_crc32c(data: bytes) -> int:
  crc = google_crc32c.value(data)
  return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
  """One record in TFRecord framing."""
  length = struct.pack("<Q", len(data))
  return (length + struct.pack("<I", masked_crc32c(length)) + data
          + struct.pack("<I", masked_crc32c(data)))


def _mask(crcs: np.ndarray) -> np.ndarray:
  c = crcs.astype(np.uint64)
  return ((((c >> np.uint64(15)) | (c << np.uint64(17))) + np.uint64(
      _MASK_DELTA)) & np.uint64(0xFFFFFFFF)).astype("<u4")


def frame_records(records: Sequence[bytes]) -> bytes:
  """Many records in TFRecord framing, back to back (= b"".join of
  frame_record): by the native core, else in numpy. `records` may be a
  list or one buffer with offsets (encoding.ragged.Ragged)."""
  n = len(records)
  if n == 0:
    return b""
  if hasattr(records, "buf") and hasattr(records, "offsets"):  # a Ragged
    return frame_buffer(records.buf, records.offsets)
  module = native.core()
  if module is None:
    return _frame_list(records)
  offsets = np.zeros(n + 1, dtype=np.int64)
  np.cumsum(np.fromiter(map(len, records), dtype=np.int64, count=n),
            out=offsets[1:])
  return module.frame(b"".join(records), offsets)


def frame_buffer(data: Any, offsets: np.ndarray) -> bytes:
  """The records data[offsets[i]:offsets[i+1]] in TFRecord framing
  (`data` a bytes-like object, `offsets` int64), with no per-record
  object on the native core."""
  offsets = np.require(offsets, dtype=np.int64, requirements=["C", "A"])
  module = native.core()
  if module is not None:
    return module.frame(data, offsets)
  whole = bytes(data)
  o = offsets.tolist()
  return _frame_list([whole[o[i]:o[i + 1]] for i in range(len(o) - 1)])


def _frame_list(records: Sequence[bytes]) -> bytes:
  """The pure-Python framing (the reference), with the CRCs per record
  and the framing built in numpy."""
  n = len(records)
  if n < _SMALL:  # numpy's per-call overhead is more than the work here
    return b"".join(map(frame_record, records))
  lengths = np.fromiter(map(len, records), dtype="<u8", count=n)
  crc = google_crc32c.value
  data_crcs = np.fromiter(map(crc, records), dtype=np.uint32, count=n)
  header = np.empty((n, 12), dtype=np.uint8)
  header[:, :8] = lengths.view(np.uint8).reshape(n, 8)
  # The CRC of the 8 length bytes, computed once per distinct length.
  unique, inverse = np.unique(lengths, return_inverse=True)
  length_crcs = np.fromiter((crc(int(v).to_bytes(8, "little"))
                             for v in unique), dtype=np.uint32,
                            count=len(unique))
  header[:, 8:] = _mask(length_crcs)[inverse].view(np.uint8).reshape(n, 4)
  footer = _mask(data_crcs).view(np.uint8).reshape(n, 4)
  # header | body | footer per record, joined row-wise by Arrow (C++).
  body_offsets = np.zeros(n + 1, dtype=np.int64)
  np.cumsum(lengths, out=body_offsets[1:])
  body = pa.LargeBinaryArray.from_buffers(
      pa.large_binary(), n, [None, pa.py_buffer(body_offsets),
                             pa.py_buffer(b"".join(records))])
  joined = pc.binary_join_element_wise(
      _fixed_rows(header), body, _fixed_rows(footer), _EMPTY)
  _, offsets, data = joined.buffers()
  end = int(np.frombuffer(offsets, dtype=np.int64)[n])
  return data.to_pybytes()[:end] if data.size != end else data.to_pybytes()


_EMPTY = pa.scalar(b"", pa.large_binary())


def unframe_records(data: bytes) -> List[bytes]:
  """The records of TFRecord-framed bytes (the inverse of frame_records;
  CRCs are not checked: for data this process framed itself)."""
  out = []
  pos, end = 0, len(data)
  unpack = struct.unpack_from
  while pos < end:
    (length,) = unpack("<Q", data, pos)
    start = pos + 12
    out.append(data[start:start + length])
    pos = start + length + 4
  if pos != end:
    raise ValueError("framed records end in the middle of a record")
  return out


def framed_ends(data: Any) -> np.ndarray:
  """Where each framed record of `data` ends (int64), found by walking
  the length fields (CRCs are not checked)."""
  module = native.core()
  if module is not None:
    return np.frombuffer(module.framed_ends(data), dtype=np.int64)
  ends: List[int] = []
  pos, end = 0, len(data)
  unpack = struct.Struct("<Q").unpack_from
  append = ends.append
  while pos < end:
    pos += unpack(data, pos)[0] + 16
    append(pos)
  if pos != end:
    raise ValueError("framed records end in the middle of a record")
  return np.array(ends, dtype=np.int64)


def _fixed_rows(rows: np.ndarray) -> pa.LargeBinaryArray:
  """An (n, k) uint8 array as n binary values of k bytes."""
  n, k = rows.shape
  offsets = np.arange(0, (n + 1) * k, k, dtype=np.int64)
  return pa.LargeBinaryArray.from_buffers(
      pa.large_binary(), n, [None, pa.py_buffer(offsets),
                             pa.py_buffer(np.ascontiguousarray(rows))])


# ---------------------------------------------------------------------------
# Protobuf wire decoding of Example / SequenceExample / Features / Feature.


def _malformed(what: str) -> InputError:
  return InputError(f"a record is not a serialized tf.train.Example or "
                    f"SequenceExample: {what}")


def read_varint(buf: bytes, pos: int) -> Tuple[int, int]:
  """(the varint at `pos`, the position after it)."""
  if pos < len(buf) and buf[pos] < 0x80:  # one byte: most tags and lengths
    return buf[pos], pos + 1
  result = shift = 0
  while True:
    if pos >= len(buf) or shift > 63:
      raise _malformed(f"a varint runs past byte {pos:,}")
    b = buf[pos]
    pos += 1
    result |= (b & 0x7F) << shift
    if not b & 0x80:
      return result, pos
    shift += 7


# A field's value: an int for a varint (wire type 0), else its bytes. Any,
# not Union[int, bytes]: each caller knows which from the field it reads,
# and a record of another shape fails in the caller, as it always did.
_WireValue = Any


def proto_fields(buf: bytes) -> Iterator[Tuple[int, int, _WireValue]]:
  """(field number, wire type, value) of a message; LEN values as bytes."""
  pos, end = 0, len(buf)
  while pos < end:
    key, pos = read_varint(buf, pos)
    field, wire_type = key >> 3, key & 7
    value: Union[int, bytes]
    if wire_type == 0:
      value, pos = read_varint(buf, pos)
    elif wire_type in _FIXED:
      size = _FIXED[wire_type]
      if wire_type == 2:
        size, pos = read_varint(buf, pos)
      value, pos = buf[pos:pos + size], pos + size
      if pos > end:
        raise _malformed(f"field {field} runs past the message's "
                         f"{end:,} bytes")
    else:
      raise _malformed(f"unsupported wire type {wire_type} (field "
                       f"{field})")
    yield field, wire_type, value


# Wire types whose value is bytes: LEN (its length read), I32, I64.
_FIXED = {2: 0, 5: 4, 1: 8}


def _text(value: bytes) -> str:
  try:
    return value.decode("utf-8")
  except UnicodeDecodeError as e:
    raise _malformed(f"a feature name is not UTF-8 ({e})") from e


def _signed64(v: int) -> int:
  return v - (1 << 64) if v >= 1 << 63 else v


def decode_feature(buf: bytes) -> Tuple[Optional[str], list]:
  """A serialized tf.train.Feature -> (kind, values); kind None if unset."""
  for field, _, value in proto_fields(buf):
    if field == 1:
      return "bytes_list", [v for f, _, v in proto_fields(value) if f == 1]
    if field == 2:
      out: List[float] = []
      for f, wt, v in proto_fields(value):
        if f == 1 and wt == 2:
          out.extend(struct.unpack(f"<{len(v) // 4}f", v))
        elif f == 1:
          out.append(struct.unpack("<f", v)[0])
      return "float_list", out
    if field == 3:
      out_i: List[int] = []
      for f, wt, v in proto_fields(value):
        if f == 1 and wt == 2:
          pos = 0
          while pos < len(v):
            n, pos = read_varint(v, pos)
            out_i.append(_signed64(n))
        elif f == 1:
          out_i.append(_signed64(v))
      return "int64_list", out_i
  return None, []


def decode_features(buf: bytes) -> Dict[str, Tuple[Optional[str], list]]:
  """A serialized tf.train.Features -> {name: (kind, values)}."""
  out = {}
  for field, _, entry in proto_fields(buf):
    if field != 1:
      continue
    key, feature = "", b""
    for f, _, v in proto_fields(entry):
      if f == 1:
        key = _text(v)
      elif f == 2:
        feature = v
    out[key] = decode_feature(feature)
  return out


def decode_example(buf: bytes) -> Dict[str, Tuple[Optional[str], list]]:
  """A serialized tf.train.Example -> {name: (kind, values)}."""
  for field, _, value in proto_fields(buf):
    if field == 1:
      return decode_features(value)
  return {}


def decode_sequence_example(buf: bytes) -> Tuple[Dict[str, Any],
                                               Dict[str, Any]]:
  """A serialized tf.train.SequenceExample -> (context, feature_lists).

  context is {name: (kind, values)} as for Examples; feature_lists is
  {name: [(kind, values) per step]}.
  """
  context, lists = {}, {}
  for field, _, value in proto_fields(buf):
    if field == 1:
      context.update(decode_features(value))
    elif field == 2:
      for f, _, entry in proto_fields(value):
        if f != 1:
          continue
        key, steps = "", []
        for k, _, v in proto_fields(entry):
          if k == 1:
            key = _text(v)
          elif k == 2:
            steps = [decode_feature(step) for sf, _, step in proto_fields(v)
                     if sf == 1]
        lists[key] = steps
  return context, lists

"""TFRecord files and Example protos in plain Python (no TensorFlow).

A TFRecord file is a sequence of records, each framed as

  uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)

(little-endian). `iter_tfrecords` reads them (gzip or not) and checks both
CRCs; `decode_example` turns a serialized tf.train.Example into a dict of
name -> ("int64_list" | "float_list" | "bytes_list", values).
"""

import gzip
import struct
import zlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.core import fs, native
from beam_tfrecords.core.array_record_files import is_array_record
from beam_tfrecords.core.errors import InputError

__all__ = ["iter_tfrecords", "iter_tfrecord_lists", "count_tfrecords", "masked_crc32c",
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


def frame_buffer(data, offsets: np.ndarray) -> bytes:
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


def framed_ends(data) -> np.ndarray:
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


def _compression(path: str, compression: Optional[str]) -> str:
  if compression is None:
    if path.endswith(".gz"):
      return fs.GZIP
    # No suffix: gzip when the file starts with gzip's magic bytes and not
    # with a TFRecord header (8 length bytes and their masked CRC).
    with fs.open_read(path, fs.UNCOMPRESSED) as f:
      head = f.read(12)
    if head[:2] == b"\x1f\x8b" and not (
        len(head) == 12 and
        masked_crc32c(head[:8]) == struct.unpack("<I", head[8:])[0]):
      return fs.GZIP
    return fs.UNCOMPRESSED
  return {"gzip": fs.GZIP, "none": fs.UNCOMPRESSED,
          "": fs.UNCOMPRESSED}[compression.lower()]


_READ_CHUNK = 8 << 20


def iter_tfrecords(path: str, compression: Optional[str] = None,
                   check_crc: bool = True) -> Iterator[bytes]:
  """Yields the records of one TFRecord file.

  Args:
    path: a local path, or any path Beam's file systems open.
    compression: "gzip", "none", or None: gzip for a ".gz" name or a file
      that starts like gzip.
    check_crc: verify both CRCs of every record.

  Raises:
    ValueError: the file is truncated or a CRC does not match; the
      message numbers records from 1, as rows are. An InputError (a
      ValueError) for an ArrayRecord file (`.array_record`), saying how
      to read it.
    OSError, zlib.error, EOFError: the (gzip) stream cannot be read; only
      after every record before the bad spot was yielded.
  """
  for records in iter_tfrecord_lists(path, compression, check_crc):
    yield from records


def iter_tfrecord_lists(path: str, compression: Optional[str] = None,
                        check_crc: bool = True) -> Iterator[List[bytes]]:
  """The records of one TFRecord file as `iter_tfrecords` gives them (the
  same errors, after the same records), in lists: the records of each
  read (8 MB), cut without a Python step between them."""
  if is_array_record(path):
    # Its first bytes would be taken for a record's length.
    raise InputError(
        f"{path} is an ArrayRecord file (file_format array_record), not a "
        "TFRecord file: read it with beam_tfrecords.core."
        "array_record_files.read_array_record, Grain's "
        "ArrayRecordDataSource or TFDS's as_data_source()")
  kind = _compression(path, compression)
  yielded = [0]
  try:
    yield from _framed(path, kind, check_crc, _READ_CHUNK, 0, yielded)
  except ValueError:
    raise
  except Exception:  # pylint: disable=broad-except
    # The stream broke off (gzip garbage, say) inside a chunk, whose good
    # part is lost with the exception: read again, each read asking only
    # for what the next record needs, to yield what precedes the bad spot
    # and fail there.
    yield from _framed(path, kind, check_crc, 0, yielded[0], [0])
    raise  # (only if reading so got past it)


def _framed(path: str, kind: str, check_crc: bool, chunk: int, skip: int,
            yielded: List[int]) -> Iterator[List[bytes]]:
  """The records of a file, read `chunk` bytes at a time (at least what
  the next record needs) and cut out of the buffer a list at a time; the
  first `skip` are not yielded; yielded[0] counts those that are."""
  # (Reading again after an error, the gzip module: it yields the bytes
  # before a bad trailer, which zlib's one call for both does not.)
  with _open_framed(path, kind, chunk) as f:
    buf, pos, index = b"", 0, 0
    while True:
      records, pos, wrong = _cut(buf, pos, check_crc)
      error = ValueError(f"{path}: {wrong} at record "
                         f"{index + len(records) + 1}") if wrong else None
      index += len(records)
      mine = records[max(0, len(records) - (index - skip)):] \
          if index > skip else []
      if mine:
        yield mine
        yielded[0] += len(mine)
      if error:
        raise error
      have = len(buf) - pos
      need = 12 if have < 12 else 16 + struct.unpack_from("<Q", buf, pos)[0]
      more = f.read(max(chunk, need - have))
      if more:
        buf, pos = buf[pos:] + more, 0
        continue
      if have == 0:
        return
      raise ValueError(
          f"{path}: truncated record header at record {index + 1}"
          if have < 12 else f"{path}: truncated record {index + 1}")


def _open_framed(path: str, kind: str, chunk: int):
  """The file's bytes for `_framed`. gzip is never read through Beam's
  gzip reader, which ends a truncated stream early without a word (the
  records after the cut would be left out silently): zlib from large
  reads (`_Gunzip`), or, reading again after an error, the gzip module;
  both raise EOFError where the data ends early."""
  if kind != fs.GZIP:
    return fs.open_read(path, kind)
  if chunk > 0:
    return _Gunzip(path)
  if fs.is_local(path):
    return fs.open_read(path, kind)
  return _GzipModule(path)


class _GzipModule:
  """A file on any file system, read through Python's gzip module."""

  def __init__(self, path: str):
    self._raw = fs.open_read(path, fs.UNCOMPRESSED)
    self._gzip = gzip.GzipFile(fileobj=self._raw, mode="rb")

  def __enter__(self) -> "_GzipModule":
    return self

  def __exit__(self, *exc) -> None:
    self._gzip.close()
    self._raw.close()

  def read(self, n: int) -> bytes:
    return self._gzip.read(n)


class _Gunzip:
  """A gzip file's members back to back, inflated by zlib straight
  from 1 MB reads (the gzip module inflates 8 KB at a time, which costs a
  third as much again as inflating: measured). zlib checks each
  member's CRC and length."""

  def __init__(self, path: str):
    self._file = fs.open_read(path, fs.UNCOMPRESSED)
    self._z = zlib.decompressobj(zlib.MAX_WBITS | 16)
    self._input = b""
    self._in_member = False

  def __enter__(self) -> "_Gunzip":
    return self

  def __exit__(self, *exc) -> None:
    self._file.close()

  def read(self, n: int) -> bytes:
    """Up to `n` bytes (at least one, b"" at the end)."""
    while True:
      if not self._input:
        self._input = self._file.read(1 << 20)
        if not self._input:
          if self._in_member:
            raise EOFError("Compressed file ended before the "
                           "end-of-stream marker was reached")
          return b""
      if self._z.eof:  # the next member, after any zeros (as gzip's)
        self._input = self._input.lstrip(b"\0")
        if not self._input:
          continue
        self._z = zlib.decompressobj(zlib.MAX_WBITS | 16)
      out = self._z.decompress(self._input, max(n, 1))
      self._input = self._z.unconsumed_tail or self._z.unused_data
      self._in_member = not self._z.eof
      if out:
        return out


def _cut(buf: bytes, pos: int, check_crc: bool
         ) -> Tuple[List[bytes], int, Optional[str]]:
  """The whole records in `buf` from `pos`: (them, where the rest starts,
  what is wrong with the next one or None). A corrupt length is not
  believed (nor read)."""
  unpack, crc = struct.unpack_from, masked_crc32c
  out: List[bytes] = []
  append, end = out.append, len(buf)
  while end - pos >= 12:
    if check_crc and crc(buf[pos:pos + 8]) != unpack("<I", buf, pos + 8)[0]:
      return out, pos, "corrupt length CRC"
    start = pos + 12
    stop = start + unpack("<Q", buf, pos)[0]
    if stop + 4 > end:
      break
    data = buf[start:stop]
    if check_crc and crc(data) != unpack("<I", buf, stop)[0]:
      return out, pos, "corrupt data CRC"
    append(data)
    pos = stop + 4
  return out, pos, None


def count_tfrecords(path: str) -> int:
  """The number of records in a TFRecord file (CRCs not checked)."""
  return sum(1 for _ in iter_tfrecords(path, check_crc=False))


# ---------------------------------------------------------------------------
# Protobuf wire decoding of Example / SequenceExample / Features / Feature.


def read_varint(buf: bytes, pos: int) -> Tuple[int, int]:
  """(the varint at `pos`, the position after it)."""
  result = shift = 0
  while True:
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
    elif wire_type == 2:
      length, pos = read_varint(buf, pos)
      value, pos = buf[pos:pos + length], pos + length
    elif wire_type == 5:
      value, pos = buf[pos:pos + 4], pos + 4
    elif wire_type == 1:
      value, pos = buf[pos:pos + 8], pos + 8
    else:
      raise ValueError(f"unsupported wire type {wire_type}")
    yield field, wire_type, value


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
        key = v.decode("utf-8")
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


def decode_sequence_example(buf: bytes):
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
            key = v.decode("utf-8")
          elif k == 2:
            steps = [decode_feature(step) for sf, _, step in proto_fields(v)
                     if sf == 1]
        lists[key] = steps
  return context, lists

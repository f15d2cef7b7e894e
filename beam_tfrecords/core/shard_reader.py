"""Reading one TFRecord shard, checked: a reader never hands out a wrong
record, nor fewer records than the shard holds without an error.

    for records in read_shard(path, expect=Expected.of(shard_info)):
        ...   # lists of serialized records, each one checked

What is checked (docs/reading.md, "What a reader checks"):

- Every record's framing: the masked CRC32C of its length and of its
  data, as tf.data checks them. A length is never believed past the end
  of what holds it (the member, or the file), so a damaged one allocates
  nothing.
- A gzip shard member by member. A member our sink wrote (core.members)
  says its size and record count; it is inflated whole, its CRC-32 and
  size (ISIZE) checked, and its records counted against its header
  before any of them leaves. Another writer's member (Beam's sink writes
  one per file) is inflated as it is read, held back up to HOLD bytes:
  its records leave CRC-checked, and a member longer than HOLD has its
  trailer checked after its first records left.
- Against the shard's entry in dataset.json (`Expected`), when given: its
  size before the first record; its record count and SHA-256 (of the
  bytes as read) at its end. So a shard that is empty, cut, has members
  dropped, duplicated or swapped, or bytes appended, raises
  ShardDamagedError naming the file (and the member and byte, where
  known), never a short or reordered read without a word.

`check=False` skips the CRCs and the SHA-256; sizes, counts and gzip's
own checks stay (benchmarks/read_suite.py measures what it saves).
"""

import dataclasses
import hashlib
import os
import struct
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from isal import isal_zlib

from beam_tfrecords.core import fs, native
from beam_tfrecords.core.errors import InputError, ShardDamagedError
from beam_tfrecords.core.members import HEADER_BYTES, MemberError, member_size
from beam_tfrecords.core.records import Records
from beam_tfrecords.core.tfrecord_files import masked_crc32c

__all__ = ["Expected", "read_shard", "check_whole", "iter_tfrecords",
           "iter_tfrecord_lists",
           "count_tfrecords", "unframe", "framed_records", "compression_of",
           "HOLD"]

# Bytes read from the file at a time.
_READ_BYTES = 4 << 20
# Inflated bytes of another writer's gzip member held back before records
# are cut out of them (its trailer not yet checked).
HOLD = 32 << 20
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")


@dataclasses.dataclass(frozen=True)
class Expected:
  """What a shard's dataset.json entry says of it (None: not known)."""
  records: Optional[int] = None
  size: Optional[int] = None
  sha256: Optional[str] = None

  @classmethod
  def of(cls, shard: Any) -> "Expected":
    """Of a core.info.ShardInfo."""
    return cls(shard.num_records, shard.num_bytes, shard.sha256)


def unframe(data: Any, check: bool = True
            ) -> Tuple[List[bytes], int, Optional[str]]:
  """The records of TFRecord-framed `data` from its start: (records,
  where the walk stopped, None or what is wrong there: "corrupt length
  CRC" / "corrupt data CRC"). A stop before the end with None is a record
  the data ends inside; its length is not believed. By the native core,
  else the same walk in Python."""
  module = native.core()
  if module is not None:
    return module.unframe(data, check)
  out: List[bytes] = []
  view, pos, end = memoryview(data), 0, len(data)
  while pos < end:
    if end - pos < 12:
      return out, pos, None
    if check and masked_crc32c(bytes(view[pos:pos + 8])) != _CRC.unpack_from(
        view, pos + 8)[0]:
      return out, pos, "corrupt length CRC"
    (length,) = _LENGTH.unpack_from(view, pos)
    left = end - pos - 12
    if length > left or left - length < 4:
      return out, pos, None
    start, stop = pos + 12, pos + 12 + length
    record = bytes(view[start:stop])
    if check and masked_crc32c(record) != _CRC.unpack_from(view, stop)[0]:
      return out, pos, "corrupt data CRC"
    out.append(record)
    pos = stop + 4
  return out, pos, None


def framed_records(data: Any, check: bool = True
                   ) -> Tuple[Sequence[bytes], int, Optional[str]]:
  """`unframe`, the records left in `data` where the native core is
  installed (core.records.Records: no bytes object per record until one
  is asked for), else a list of them."""
  module = native.core()
  if module is None:
    return unframe(data, check)
  spans, used, wrong = module.unframe_spans(data, check)
  return Records.of(data, spans), used, wrong


def compression_of(path: str, compression: Optional[str] = None) -> str:
  """fs.GZIP or fs.UNCOMPRESSED: as given ("gzip", "none"), else gzip for
  a ".gz" name or a file that starts with gzip's magic bytes and not with
  a TFRecord header (8 length bytes and their masked CRC)."""
  if compression is not None:
    try:
      return {"gzip": fs.GZIP, "none": fs.UNCOMPRESSED,
              "": fs.UNCOMPRESSED}[compression.lower()]
    except KeyError:
      raise InputError(f"compression {compression!r}: use 'gzip' or "
                       "'none'") from None
  if path.endswith(".gz"):
    return fs.GZIP
  with fs.open_read(path, fs.UNCOMPRESSED) as f:
    head = f.read(12)
  if head[:2] == b"\x1f\x8b" and not (
      len(head) == 12 and masked_crc32c(head[:8]) == _CRC.unpack(head[8:])[0]):
    return fs.GZIP
  return fs.UNCOMPRESSED


class _Shard:
  """One shard being read: its raw bytes (hashed as read), what is left
  of them in `buf` from `pos`, and the checks."""

  def __init__(self, path: str, raw: Any, size: Optional[int],
               check: bool, expect: Expected):
    self.path, self.raw, self.size, self.check = path, raw, size, check
    self.expect = expect
    self.hash = hashlib.sha256() if check and expect.sha256 else None
    self.read_bytes = 0  # raw bytes read so far
    self.buf: bytes = b""
    self.pos = 0
    self.at = 0  # the file offset of buf[0]
    self.records = 0  # records handed out (or cut) so far
    self.member = 0  # gzip members read so far
    self.carry = b""  # framed bytes of a record another member continues

  def damaged(self, what: str, offset: Optional[int] = None,
              member: Optional[int] = None,
              cut: bool = False) -> ShardDamagedError:
    where = f" (gzip member {member}, byte {offset:,})" if member is not None \
        else f" (byte {offset:,})" if offset is not None else ""
    # A dataset's shard (its dataset.json says what to expect), or any
    # TFRecord file (a build's input, say).
    fix = (". The shard is not the one its build wrote (damaged, cut or "
           "replaced): `beam-tfrecords verify` names every such file; "
           "restore it or build the dataset again") \
        if self.expect != Expected() else ""
    return ShardDamagedError(f"{self.path}: {what}{where}{fix}",
                             file=self.path, member=member, offset=offset,
                             reason=what + where, cut=cut)

  def read_raw(self) -> bytes:
    data = self.raw.read(_READ_BYTES)
    if data:
      self.read_bytes += len(data)
      if self.hash is not None:
        self.hash.update(data)
    return data

  def fill(self, n: int) -> bool:
    """At least `n` bytes in buf from pos (False: the file ends first).
    Reads _READ_BYTES at a time, whatever `n` is."""
    pieces, have = [], len(self.buf) - self.pos
    while have < n:
      data = self.read_raw()
      if not data:
        break
      pieces.append(data)
      have += len(data)
    if pieces:
      self.buf = b"".join([self.buf[self.pos:]] + pieces)
      self.at += self.pos
      self.pos = 0
    return have >= n

  # -- uncompressed --------------------------------------------------------

  def plain(self) -> Iterator[Sequence[bytes]]:
    while self.fill(1):
      records, used, wrong = framed_records(
          memoryview(self.buf)[self.pos:], self.check)
      if records:
        self.records += len(records)
        yield records
      self.pos += used
      if wrong:
        raise self.damaged(f"{wrong} at record {self.records + 1:,}",
                           self.at + self.pos)
      if not self.fill(self._record_bytes()):
        break
    if self.pos < len(self.buf):
      raise self.damaged(f"the file ends inside record {self.records + 1:,}",
                         self.at + self.pos, cut=True)

  def _record_bytes(self) -> int:
    """The bytes the record at pos takes (12 while its header is cut);
    one said to end past the file's end is refused before any read."""
    have = len(self.buf) - self.pos
    if have < 12:
      return 12
    (length,) = _LENGTH.unpack_from(self.buf, self.pos)
    end = self.at + self.pos + 16 + length
    if self.size is not None and end > self.size:
      raise self.damaged(
          f"the file ends inside record {self.records + 1:,} of "
          f"{length:,} bytes" if self.check else
          f"record {self.records + 1:,} says {length:,} bytes, more than "
          "the file holds (a damaged length, or a cut file)",
          self.at + self.pos, cut=self.check)
    return 16 + length

  # -- gzip ----------------------------------------------------------------

  def gzip(self) -> Iterator[Sequence[bytes]]:
    while self.fill(1):
      if self.buf[self.pos] == 0:  # zeros between members, as gzip skips
        self.pos = len(self.buf) - len(self.buf[self.pos:].lstrip(b"\0"))
        continue
      ours = self._member_head()
      if ours is None:
        yield from self._foreign()
      else:
        records = self._ours(*ours)
        if records:
          yield records
      self.member += 1
    if self.carry:
      raise self.damaged(f"the file ends inside record {self.records + 1:,}",
                         self.at + self.pos, cut=True)

  def _member_head(self) -> Optional[Tuple[int, int]]:
    """(size, records) of the member at pos if our sink wrote it, else
    None (another writer's, or not gzip: inflating it says so)."""
    if not self.fill(HEADER_BYTES):
      return None
    try:
      return member_size(self.buf[self.pos:self.pos + HEADER_BYTES],
                         self.at + self.pos)
    except MemberError:
      return None

  def _ours(self, size: int, count: int) -> Sequence[bytes]:
    """A member our sink wrote, read whole and checked: its records."""
    start = self.at + self.pos
    if self.size is not None and start + size > self.size:
      raise self.damaged(f"the file ends inside the member of {size:,} "
                         f"bytes, {self.size - start:,} bytes after its "
                         "start", start, self.member, cut=True)
    if not self.fill(size):
      raise self.damaged(f"the file ends inside the member of {size:,} "
                         "bytes", start, self.member, cut=True)
    if self.carry:
      raise self.damaged("a record cut at the end of the member before",
                         start, self.member)
    d = isal_zlib.decompressobj(wbits=31)
    try:
      framed = d.decompress(memoryview(self.buf)[self.pos:self.pos + size])
    except Exception as e:  # pylint: disable=broad-except
      raise self.damaged(f"the member does not inflate ({e})", start,
                         self.member) from e
    if not d.eof or d.unused_data:
      raise self.damaged(f"the member's data does not end where its header "
                         f"says ({size:,} bytes)", start, self.member)
    self.pos += size
    records, used, wrong = framed_records(framed, self.check)
    if wrong or used != len(framed) or len(records) != count:
      problem = wrong or (f"it holds {len(records):,} whole records, its "
                          f"header says {count:,}")
      raise self.damaged(f"{problem} in the member's records", start,
                         self.member)
    self.records += len(records)
    return records

  def _foreign(self) -> Iterator[Sequence[bytes]]:
    """Another writer's member, inflated as it is read: records cut out
    (CRC-checked) once HOLD bytes are held, and at its end."""
    start = self.at + self.pos
    if self.buf[self.pos:self.pos + 2] != b"\x1f\x8b"[:len(self.buf) -
                                                      self.pos]:
      raise self.damaged(
          f"no gzip member starts here (its first bytes are "
          f"{self.buf[self.pos:self.pos + 2]!r}: not gzip)", start,
          self.member)
    d = isal_zlib.decompressobj(wbits=31)
    held: List[bytes] = [self.carry]
    size = len(self.carry)
    while not d.eof:
      if not self.fill(1):
        raise self.damaged("the file ends inside the member", start,
                           self.member, cut=True)
      try:  # at most HOLD bytes out of one call (a deflate bomb)
        out = d.decompress(memoryview(self.buf)[self.pos:], HOLD)
      except Exception as e:  # pylint: disable=broad-except
        raise self.damaged(f"the member does not inflate ({e})", start,
                           self.member) from e
      self.pos = len(self.buf) - len(d.unconsumed_tail) - len(
          d.unused_data)
      held.append(out)
      size += len(out)
      if size > HOLD and not d.eof:
        yield from self._cut(b"".join(held), start)
        held, size = [self.carry], len(self.carry)
    yield from self._cut(b"".join(held), start)

  def _cut(self, framed: bytes, start: int) -> Iterator[Sequence[bytes]]:
    records, used, wrong = framed_records(framed, self.check)
    if wrong:
      if records:
        self.records += len(records)
        yield records
      raise self.damaged(f"{wrong} at record {self.records + 1:,}", start,
                         self.member)
    self.carry = framed[used:]
    if records:
      self.records += len(records)
      yield records

  # -- the end -------------------------------------------------------------

  def drain(self) -> None:
    """Reads the rest raw, for the size and the checksum (nothing is
    inflated)."""
    if self.hash is None:
      return
    while self.read_raw():
      pass

  def finish(self, whole: bool) -> None:
    """The shard read (`whole`: every record of it): its count, size and
    SHA-256 against dataset.json's."""
    expect = self.expect
    if whole and expect.records is not None and \
        self.records != expect.records:
      raise self.damaged(
          f"it holds {self.records:,} records; its dataset.json lists "
          f"{expect.records:,}")
    if expect.size is not None and (whole or self.hash is not None) and \
        self.read_bytes != expect.size:
      raise self.damaged(f"{self.read_bytes:,} bytes were read; its "
                         f"dataset.json lists {expect.size:,}")
    if self.hash is not None and self.hash.hexdigest() != expect.sha256:
      raise self.damaged(
          "its SHA-256 is not the one its dataset.json lists (the records "
          "read were other bytes, or in another order)")


def _open_raw(path: str) -> Tuple[Any, Optional[int]]:
  """The file's raw bytes and its size (None: not asked of a remote
  file system)."""
  try:
    if fs.is_local(path):
      f = open(path, "rb", buffering=0)  # pylint: disable=consider-using-with
      return f, os.fstat(f.fileno()).st_size
    return fs.open_read(path, fs.UNCOMPRESSED), None
  except IsADirectoryError as e:
    raise InputError(f"{path} is a folder, not a TFRecord file") from e
  except FileNotFoundError as e:
    raise _missing(path) from e


def _missing(path: str) -> ShardDamagedError:
  return ShardDamagedError(
      f"{path}: no such file (a shard its dataset.json lists is gone, or "
      "the name was damaged): restore it or build the dataset again",
      file=path, reason="no such file")


def _not_another_format(path: str) -> None:
  """Raises InputError naming the format if the file's suffix is another
  format's (its first bytes would be taken for a record's length)."""
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.core.shard_formats import of_file  # (it reads here)
  fmt = of_file(path)
  if fmt.own:
    raise InputError(
        f"{path} is an {fmt.label} file (file_format {fmt.name}), not a "
        f"TFRecord file: read it with {fmt.how_to_read or 'btr.open'}")


def read_shard(path: str, compression: Optional[str] = None,
               expect: Optional[Expected] = None, check: bool = True,
               upto: Optional[int] = None) -> Iterator[Sequence[bytes]]:
  """The records of one TFRecord file, a list at a time, every one
  checked (see the module's docstring).

  Args:
    path: a local path, or any path Beam's file systems open.
    compression: "gzip", "none", or None (compression_of).
    expect: what dataset.json says of the shard (None: nothing).
    check: check the records' CRCs and the shard's SHA-256.
    upto: stop once this many records were handed out (the last list may
      hold more): the rest is read raw for the checksum, not inflated.

  Raises:
    ShardDamagedError: the shard is not what its build wrote, after the
      records before the damage (never a damaged member's).
    InputError: an ArrayRecord file (named), or a folder.
  """
  _not_another_format(path)
  expect = expect or Expected()
  kind = compression_of(path, compression)
  raw, size = _open_raw(path)
  with raw:
    if size is None and expect.size is not None:
      size = fs.match(path)[0].size
    shard = _Shard(path, raw, size, check, expect)
    if expect.size is not None and size != expect.size:
      raise shard.damaged(
          f"it is {size:,} bytes; its dataset.json lists {expect.size:,} "
          "(an empty, cut or replaced file, or one with bytes added)")
    for records in shard.gzip() if kind == fs.GZIP else shard.plain():
      yield records
      if upto is not None and shard.records >= upto:
        shard.drain()
        shard.finish(whole=False)
        return
    shard.finish(whole=True)


def check_whole(path: str, expect: Expected, check: bool = True,
                name: Optional[str] = None) -> None:
  """A shard's size, and with `check` (on local disk) its SHA-256,
  against its dataset.json entry, without reading its records: for a
  reader that reads them itself (tf.data, which checks the records'
  CRCs and gzip's). `name`: the shard's name, when `path` is another way
  to it (/proc/self/fd/N).

  Raises:
    ShardDamagedError: the size or the checksum differs.
  """
  name = name or path
  try:
    size = os.stat(path).st_size if fs.is_local(path) else \
        fs.match(path)[0].size
  except (FileNotFoundError, IndexError) as e:
    raise _missing(name) from e
  wrong = None
  if expect.size is not None and size != expect.size:
    wrong = (f"it is {size:,} bytes; its dataset.json lists "
             f"{expect.size:,} (an empty, cut or replaced file, or one with "
             "bytes added)")
  elif check and expect.sha256 and fs.is_local(path) and fs.sha256_of(
      path, limit=size + 1)[1] != expect.sha256:
    wrong = "its SHA-256 is not the one its dataset.json lists"
  if wrong:
    raise ShardDamagedError(
        f"{name}: {wrong}. The shard is not the one its build wrote: "
        "`beam-tfrecords verify` names every such file; restore it or "
        "build the dataset again", file=name, reason=wrong)


def iter_tfrecord_lists(path: str, compression: Optional[str] = None,
                        check_crc: bool = True) -> Iterator[Sequence[bytes]]:
  """read_shard without expectations (a TFRecord file of any writer)."""
  return read_shard(path, compression, check=check_crc)


def iter_tfrecords(path: str, compression: Optional[str] = None,
                   check_crc: bool = True) -> Iterator[bytes]:
  """The records of one TFRecord file (gzip or not), one at a time, each
  checked (read_shard)."""
  for records in read_shard(path, compression, check=check_crc):
    yield from records


def count_tfrecords(path: str) -> int:
  """The number of records in a TFRecord file (CRCs not checked)."""
  return sum(map(len, read_shard(path, check=False)))

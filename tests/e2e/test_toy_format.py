"""A new output format is one module plus one registration (issue 61): a
toy format, defined in this file alone (length-prefixed records in a
plain file), goes through the build, btr.open (streaming, by number and
tf.data), validate, verify, the card, croissant.json and the preview
without a library file knowing its name."""

import json
import os
import struct

import pytest

import beam_tfrecords as btr
from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import ShardDamagedError
from beam_tfrecords.core.shard_formats import (ShardFormat, register_format,
                                               unregister_format)
from beam_tfrecords.read.stream import RecordStream

from tests.helpers.shard_size import SCHEMA, _csv

ROWS = 300
_LENGTH = struct.Struct("<I")


class _Writer:
  """Writes a local toy file: each record as a 4-byte length and its
  bytes."""

  def __init__(self, local: str, options: str):
    del options
    self._file = open(local, "wb")  # pylint: disable=consider-using-with

  def write(self, record: bytes) -> None:
    self._file.write(_LENGTH.pack(len(record)) + record)

  def close(self) -> None:
    self._file.close()


def _records(data: bytes):
  out, pos = [], 0
  while pos < len(data):
    if len(data) - pos < 4:
      raise ShardDamagedError("a toy file cut inside a length")
    (n,) = _LENGTH.unpack_from(data, pos)
    if pos + 4 + n > len(data):
      raise ShardDamagedError("a toy file cut inside a record")
    out.append(data[pos + 4:pos + 4 + n])
    pos += 4 + n
  return out


def _read(path, expect, check, upto):
  del check, upto
  with fs.open_read(path, fs.UNCOMPRESSED) as f:
    records = _records(f.read())
  if expect.records is not None and len(records) != expect.records:
    raise ShardDamagedError(f"{path}: {len(records)} records, dataset.json "
                            f"lists {expect.records}", file=path)
  yield records


class _Random:
  def __init__(self, local: str):
    with open(local, "rb") as f:
      self._records = _records(f.read())

  def num_records(self) -> int:
    return len(self._records)

  def read(self, positions):
    return [self._records[i] for i in positions]

  def close(self) -> None:
    pass


TOY = ShardFormat(
    "toy", ".toy", "NONE", "toy", "toy shards", "application/x-toy", _read,
    previewed=True, writer=_Writer, open_random=_Random)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  register_format(TOY)
  folder = tmp_path_factory.mktemp("toy")
  out = str(folder / "out")
  src = _csv(folder / "in.csv", ROWS)
  btr.build(SCHEMA, src, out, num_shards=3, file_format="toy")
  yield out, src
  unregister_format(TOY)


def test_a_toy_format_builds_and_reads_everywhere(built, tf):
  out, src = built
  info = btr.dataset_info(out)
  assert info.file_format == "toy" and info.compression == "NONE"
  shards = info.splits["train"].shards
  assert [s.file for s in shards] == [
      f"train-0000{i}-of-00003.toy" for i in range(3)]
  # The records are the input's rows, streamed, by number and by tf.data.
  with open(src) as f:
    rows = sorted(int(line.split(",")[0]) for line in list(f)[1:])
  assert sorted(r["id"] for r in btr.open(out).records()) == rows
  stream = list(RecordStream(out))
  by_number = btr.open(out).by_number()
  assert by_number.get(range(len(by_number))) == stream
  assert sorted(int(x["id"]) for x in btr.load(out)) == rows
  # validate, verify, the card, croissant.json and the preview know it.
  from beam_tfrecords.inspect.check import validate
  from beam_tfrecords.read.reader import dataset_schema
  report = validate(out, dataset_schema(out))
  assert (report.records, report.failures) == (ROWS, [])
  assert btr.verify(out).ok
  card = open(os.path.join(out, "README.md")).read()
  assert "toy shards" in card
  croissant = json.load(open(os.path.join(out, "croissant.json")))
  formats = {o["@id"]: o["encodingFormat"]
             for o in croissant["distribution"] if "@id" in o}
  assert {formats[s.file] for s in shards} == {"application/x-toy"}
  assert os.path.exists(os.path.join(out, "preview", "train.parquet"))


def test_a_cut_toy_shard_is_an_error(built, tmp_path):
  import shutil
  out = str(tmp_path / "copy")
  shutil.copytree(built[0], out)
  shard = btr.dataset_info(out).splits["train"].shards[0]
  path = os.path.join(out, shard.file)
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) - 3)
  with pytest.raises(ShardDamagedError, match="cut inside a record"):
    list(RecordStream(out))
  assert not btr.verify(out).ok

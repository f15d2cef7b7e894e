"""Readers never hand out a wrong or missing record (issue 60): each case
that broke on 3190bc9, on a real build. A shard that is empty, cut at a
member, missing a member or damaged inside one raises ShardDamagedError
naming it from every reader, with no record of the damaged member handed
out; random access in a long-running process sees an overwrite; states
and positions are checked."""

import gzip
import os
import shutil

import numpy as np
import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.shard_index import ShardIndex
from beam_tfrecords.read.random_access import RecordIndex
from beam_tfrecords.read.stream import RecordStream

from tests.helpers.shard_size import SCHEMA, _csv

ROWS = 2000


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """2,000 records in 2 shards of 4 KiB members."""
  folder = tmp_path_factory.mktemp("never_lie")
  out = str(folder / "out")
  btr.build(SCHEMA, _csv(folder / "in.csv", ROWS), out, num_shards=2,
            member_size="4KiB")
  return out


def _copy(built, tmp_path):
  out = str(tmp_path / "copy")
  shutil.copytree(built, out)
  shard = btr.dataset_info(out).splits["train"].shards[0]
  with open(os.path.join(out, shard.index.file), "rb") as f:
    offsets = ShardIndex.from_bytes(f.read(), "i").offsets.tolist()
  first = ShardIndex.from_bytes(
      open(os.path.join(out, shard.index.file), "rb").read(),
      "i").first_records.tolist()
  return out, os.path.join(out, shard.file), offsets, first


def _ids(records):
  from beam_tfrecords.core.tfrecord_files import decode_example
  return [decode_example(r)["id"][1][0] for r in records]


READERS = {
    "RecordStream": lambda out: RecordStream(out),
    "RecordStream.batches": lambda out: (
        r for b in RecordStream(out).batches(64) for r in b),
    "iter_records": lambda out: (
        r["id"] for r in btr.iter_records(out)),
    "open.records": lambda out: (
        r["id"] for r in btr.open(out).records()),
}


def _damage(kind, path, offsets):
  data = open(path, "rb").read()
  if kind == "empty":  # a failed copy
    data = b""
  elif kind == "cut_at_member":
    data = data[:offsets[3]]
  elif kind == "member_dropped":
    data = data[:offsets[2]] + data[offsets[3]:]
  elif kind == "member_damaged":  # a byte of member 2's deflate data
    at = (offsets[2] + offsets[3]) // 2
    data = data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1:]
  with open(path, "wb") as f:
    f.write(data)


@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
@pytest.mark.parametrize("kind", ["empty", "cut_at_member",
                                  "member_dropped", "member_damaged"])
def test_a_damaged_shard_is_an_error_never_fewer_records(built, tmp_path,
                                                         reader, kind):
  """On 3190bc9: a 0-byte shard gave 1,000 of 2,000 records, a cut one
  1,503, with no error; a damaged member's records came out with wrong
  values before a raw BadGzipFile."""
  want = [r["id"] for r in btr.iter_records(built)]
  out, path, offsets, first = _copy(built, tmp_path)
  _damage(kind, path, offsets)
  got = []
  with pytest.raises(btr.ShardDamagedError) as e:
    for value in READERS[reader](out):
      got.append(value)
  assert path in str(e.value) and e.value.file == path
  if kind == "member_damaged":
    # Members 0 and 1 whole, nothing of member 2.
    assert "(gzip member 2, byte" in str(e.value)
    # (batches: the records of a batch not yet whole are not given)
    assert len(got) == (first[2] if reader != "RecordStream.batches"
                        else first[2] // 64 * 64)
  else:  # the size, before the first record of the shard
    assert f"it is {os.path.getsize(path):,} bytes; its dataset.json " \
           "lists" in str(e.value)
    assert got == []
  values = got if reader.startswith("iter") or reader.startswith(
      "open") else _ids(got)
  assert values == want[:len(values)]


@pytest.mark.parametrize("kind", ["empty", "cut_at_member",
                                  "member_dropped", "member_damaged",
                                  "members_swapped"])
def test_load_stops_at_a_damaged_shard(built, tmp_path, tf, kind):
  """tf.data reads the records itself: the shard's size and SHA-256 are
  checked before its first record."""
  out, path, offsets, _ = _copy(built, tmp_path)
  if kind == "members_swapped":
    data = open(path, "rb").read()
    a, b = (offsets[1], offsets[2]), (offsets[2], offsets[3])
    with open(path, "wb") as f:
      f.write(data[:a[0]] + data[b[0]:b[1]] + data[a[0]:a[1]] + data[b[1]:])
  else:
    _damage(kind, path, offsets)
  # (py_function reports every error as tf.errors.UnknownError; its
  # message is ShardDamagedError's.)
  with pytest.raises(tf.errors.OpError, match=(
      f"{path}: (it is [\\d,]+ bytes; its dataset\\.json lists|its SHA-256 "
      "is not the one its dataset\\.json lists)")):
    list(btr.load(out, decode=False))
  # With check=False a swap of whole members is what only the checksum
  # sees: tf.data reads them in their new order.
  if kind == "members_swapped":
    assert len(list(btr.load(out, decode=False, check=False))) == ROWS


def test_members_swapped_are_caught_by_the_checksum(built, tmp_path):
  """Members of one size and count swapped: every member is whole, so
  the stream hands out its records, then raises at the shard's end (its
  SHA-256); random access raises before any record."""
  out, path, offsets, _ = _copy(built, tmp_path)
  data = open(path, "rb").read()
  spans = list(zip(offsets[:-1], offsets[1:]))
  a, b = spans[1], spans[2]
  with open(path, "wb") as f:
    f.write(data[:a[0]] + data[b[0]:b[1]] + data[a[0]:a[1]] + data[b[1]:])
  with pytest.raises(btr.ShardDamagedError, match="its SHA-256 is not the "
                     "one its dataset.json lists"):
    list(RecordStream(out))
  with pytest.raises(btr.ShardDamagedError, match="its SHA-256 is not the "
                     "one its dataset.json lists"):
    RecordIndex(out)[0]


def _rebuild(out, tmp_path, offset):
  """The same number of rows, of the same sizes, other values."""
  src = _csv(tmp_path / f"in{offset}.csv", ROWS, offset=offset, seed=9)
  btr.build(SCHEMA, src, out, num_shards=2, member_size="4KiB",
            overwrite=True)


@pytest.mark.parametrize("compression", ["gzip", "none"])
def test_random_access_in_a_long_process_sees_an_overwrite(tmp_path,
                                                           compression):
  """On 3190bc9 the descriptor cache kept files by path for the whole
  process: a reader made after an overwrite read the old build (with
  uncompressed shards of the same size, the old records silently), or
  with gzip raised a false 'the index is stale' on every read."""
  out = str(tmp_path / "ds")
  src = _csv(tmp_path / "a.csv", ROWS, offset=30_000, seed=9)
  members = {"member_size": "4KiB"} if compression == "gzip" else {}
  btr.build(SCHEMA, src, out, num_shards=2, compression=compression,
            **members)
  old = _ids(RecordStream(out))
  sizes = [s.num_bytes for s in btr.dataset_info(out).shards()]
  before = RecordIndex(out)
  assert _ids([before[0], before[ROWS - 1]]) == [old[0], old[-1]]
  src = _csv(tmp_path / "b.csv", ROWS, offset=20_000, seed=9)
  btr.build(SCHEMA, src, out, num_shards=2, compression=compression,
            overwrite=True, **members)
  if compression == "none":  # shards of the same sizes: the silent case
    assert [s.num_bytes for s in btr.dataset_info(out).shards()] == sizes
  new = _ids(RecordStream(out))
  assert min(new) == 20_000
  after = btr.open(out).by_number()
  for _ in range(3):  # (on 3190bc9: every read failed, or was old)
    assert _ids(after.get(range(0, ROWS, 97))) == new[::97]
  # A reader made before the overwrite says so, on every read.
  for _ in range(2):
    with pytest.raises(btr.DatasetReplacedError, match="was replaced by a "
                       "newer build while it was read"):
      before[5]


@pytest.mark.parametrize("position", [1.9, "7", True, None, [[1]],
                                      np.float32(2)],
                         ids=["float", "str", "bool", "none", "nested",
                              "numpy_float"])
def test_positions_are_whole_numbers_only(built, position):
  records = btr.open(built).by_number()
  with pytest.raises(TypeError, match="whole number"):
    records[position]
  if position is not None and not isinstance(position, bool):
    with pytest.raises(TypeError, match="whole numbers"):
      records.get([position] if not isinstance(position, list)
                  else position)
  seventh = _ids(RecordStream(built))[7]
  assert _ids([records[np.int64(7)], records[7]]) == [seventh, seventh]


@pytest.mark.parametrize("state, message", [
    ({"position": "12"}, r"the saved state's 'position' is '12', not a "
     "whole number"),
    ({"position": None}, r"'position' is None"),
    ({}, r"'position' is None"),
    ({"position": 10**9}, r"the state's position 1,000,000,000 \(origin "
     r"0\) is outside this reader's 2,000 records"),
    ({"position": -1}, r"position -1 .* is outside"),
], ids=["text", "null", "missing", "past_the_end", "negative"])
def test_a_hand_edited_state_is_refused(built, state, message):
  good = RecordStream(built).state_dict()
  with pytest.raises(btr.InputError, match=message):
    RecordStream(built).load_state_dict(dict(good, **state) if state
                                        else {k: v for k, v in good.items()
                                              if k != "position"})
  with pytest.raises(btr.InputError, match="a saved state is a dict"):
    RecordStream(built).load_state_dict([1, 2])


def test_a_state_of_another_build_is_refused(tmp_path):
  out = str(tmp_path / "ds")
  _rebuild(out, tmp_path, 0)
  stream = RecordStream(out)
  it = iter(stream)
  for _ in range(5):
    next(it)
  state = stream.state_dict()
  # The same records again (--force): the state still holds.
  btr.build(SCHEMA, str(tmp_path / "in0.csv"), out, num_shards=2,
            member_size="4KiB", overwrite=True, force=True)
  again = RecordStream(out)
  again.load_state_dict(state)
  assert _ids(again) == _ids(RecordStream(out))[5:]
  _rebuild(out, tmp_path, 50_000)  # other records
  with pytest.raises(btr.InputError, match="the state was saved reading "
                     "another build of the datasets"):
    RecordStream(out).load_state_dict(state)


def test_a_foreign_gzip_member_is_checked_before_its_records(tmp_path):
  """Beam's sink writes one gzip member per shard: its records are held
  until its CRC-32 is checked (up to HOLD bytes)."""
  from beam_tfrecords.core.shard_reader import iter_tfrecords
  from beam_tfrecords.core.tfrecord_files import frame_records
  framed = frame_records([b"%d" % i for i in range(1000)])
  data = bytearray(gzip.compress(framed))
  data[-6] ^= 1  # the trailer's size
  path = tmp_path / "beam.tfrecord.gz"
  path.write_bytes(bytes(data))
  got = []
  with pytest.raises(btr.ShardDamagedError, match="gzip member 0"):
    for r in iter_tfrecords(str(path)):
      got.append(r)
  assert got == []

"""beam_tfrecords/sinks/shards.py, on values: Deterministic sharded files:
every byte is decided by the data."""

import hashlib
import os

from isal import isal_zlib
import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError
from beam_tfrecords.building.planning import shard_plan
from beam_tfrecords.core.tfrecord_files import frame_record, frame_records
import numpy as np
from beam_tfrecords.schema import load_schema
from beam_tfrecords.sinks import codec, deflate, shard_files

from tests.helpers.gzip_determinism import (_address_slots, _compress,
                                            _member, _new, _slot, _usual)
from tests.helpers.shard_size import SCHEMA, _csv


@pytest.mark.parametrize("position", [0, 1, 2])
def test_isal_hashes_position_2_by_the_compressors_address(position):
  """The defect, in python-isal itself: a compressor whose address gives
  the slot of the member's position 0, 1 or 2 writes other bytes (the
  same data). If this fails, python-isal no longer has the defect. The
  workaround in sinks.deflate.compressor() can then go, and the pinned
  bytes may change. (Five compressors at different addresses: in one full
  run of the suite out of many, one such compressor wrote the usual
  bytes, so its stream lay further from the object than STREAM_WITHIN.)"""
  held, differ = [], []
  for _ in range(5):
    comp = _new()
    while len(_address_slots(comp)) != 1:  # not next to a 64 KiB boundary
      held.append(comp)
      comp = _new()
    held.append(comp)
    (slot,) = _address_slots(comp)
    data = _member(position, slot)
    odd = _compress(comp, data)
    assert isal_zlib.decompress(odd, wbits=31) == data
    differ.append(odd != _usual(data))
  assert any(differ)


@pytest.mark.parametrize("position", [0, 1, 2])
def test_gzip_member_writes_the_usual_bytes_at_a_colliding_address(
    position, monkeypatch):
  """A reproducer of the defect through gzip_member. It fails on the old
  gzip_member (one ISA-L compressor used wherever it lies). The allocator
  hands a freed compressor's memory to the next one, so the member is made
  for the slot of that address. gzip_member must notice this and write
  the usual bytes."""
  made = []
  real = isal_zlib.compressobj

  def recording(*args, **kwargs):
    comp = real(*args, **kwargs)
    made.append(id(comp))
    return comp

  held = []
  for attempt in range(100):
    probe = _new()
    where, slots = id(probe), _address_slots(probe)
    if len(slots) != 1:
      held.append(probe)
      continue
    del probe
    data = _member(position, next(iter(slots)), attempt)
    probe = _new()
    again = id(probe)
    del probe
    if again != where:
      continue
    made.clear()
    with monkeypatch.context() as m:
      m.setattr(isal_zlib, "compressobj", recording)
      got = deflate.gzip_member(data, None)
    if made and made[0] == where:
      break
  else:
    pytest.skip("the allocator never gave a freed compressor's memory to "
                "the next one")
  assert isal_zlib.decompress(got, wbits=31) == data
  assert got == _usual(data), (
      "gzip_member used a compressor at an address whose hash slot is the "
      "member's own (ISA-L's first-byte defect, sinks/deflate.py)")


def test_a_compressor_is_chosen_by_the_members_slots_only():
  """The choice itself: the slots of positions 0-2 of the member, and a
  retry only when one of them is the slot of the compressor's address."""
  data = frame_records([b"x" * 300, b"y" * 300])
  assert deflate.isal_member_slots(data) == {_slot(data[i:i + 4])
                                            for i in range(3)}
  comp = deflate.compressor(None, data)
  assert not _address_slots(comp) & deflate.isal_member_slots(data)
  assert deflate.isal_address_slots(comp) == _address_slots(comp)


def test_default_plan_and_option_errors(tmp_path):
  schema = load_schema(dict(SCHEMA, splits={"hash": "id", "weights": {
      "train": "75%", "eval": "25%"}}))
  gib = 2**30
  plan = shard_plan(schema, None, None, 4 * gib)
  # 4 GiB of CSV, estimated at a byte out per byte in, 256 MiB files;
  # Parquet (compressed) at two.
  assert plan.shards == {"train": 12, "eval": 4}
  assert plan.max_bytes == {"train": 256 * 2**20, "eval": 256 * 2**20}
  assert shard_plan(schema, None, "1GiB", 4 * gib).shards == {
      "train": 3, "eval": 1}
  assert shard_plan(schema, None, "1GiB", 4 * gib, "parquet").shards == {
      "train": 6, "eval": 2}
  assert shard_plan(schema, {"eval": 4}, None, 10).max_bytes == {
      "train": 256 * 2**20, "eval": None}
  with pytest.raises(InputError, match="--num-shards fixes the number of "
                     "files of every split"):
    shard_plan(schema, 4, "1GiB", 10)
  with pytest.raises(InputError, match="--max-shard-size must be a size of "
                     "at least 1KiB"):
    shard_plan(schema, None, "12 parsecs", 10)
  with pytest.raises(InputError, match="--max-shard-size works with the "
                     "deterministic sink"):
    btr.build(SCHEMA, _csv(tmp_path / "a.csv", 3), str(tmp_path / "o"),
              max_shard_size="1MB", sink="beam")


def test_final_names_with_many_shards(tmp_path):
  from beam_tfrecords.sinks.parts import ShardWritten
  from beam_tfrecords.core.shard_names import rolled_name
  from beam_tfrecords.sinks.shards import finish_shard_names
  n = 100_000
  files = []
  for writer, rolls in ((0, 1), (1, 2), (n - 1, 1)):
    for roll in range(rolls):
      name = rolled_name("train", writer, n, roll, ".tfrecord.gz")
      (tmp_path / name).write_bytes(b"x")
      files.append(ShardWritten("train", name, 1, 1, writer, roll))
  out = finish_shard_names(str(tmp_path), files)
  names = [f.file for f in out]
  assert names == ["train-00000-of-00004.tfrecord.gz",
                   "train-00001-of-00004.tfrecord.gz",
                   "train-00002-of-00004.tfrecord.gz",
                   "train-00003-of-00004.tfrecord.gz"]
  assert sorted(os.listdir(tmp_path)) == names
  # A retried commit finds the files renamed already.
  assert [f.file for f in finish_shard_names(str(tmp_path), files)] == \
      names
  assert sorted(os.listdir(tmp_path)) == names
  # A commit retried after only some renames: the rest are done.
  os.rename(tmp_path / names[2], tmp_path / files[2].file)
  assert [f.file for f in finish_shard_names(str(tmp_path), files)] == \
      names
  assert sorted(os.listdir(tmp_path)) == names


def _records(n, seed=0):
  import random
  rng = random.Random(seed)
  return [bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
          for _ in range(n)]


def test_members_hold_at_most_the_cap_and_say_their_records():
  import gzip
  from beam_tfrecords.core.members import inflate, member_table
  from beam_tfrecords.core.tfrecord_files import unframe_records
  records = _records(400) + [b"z" * 5000] + _records(50, 1)
  framed = frame_records(records)
  data = deflate.gzip_members(framed, None, cap=2048)
  table = member_table(data)
  assert sum(m.records for m in table) == len(records)
  assert inflate(data) == gzip.decompress(data) == framed
  at = 0
  for m in table:
    piece = unframe_records(inflate(data[m.offset:m.offset + m.size]))
    assert piece == records[at:at + m.records]
    # Within the cap, but for the record larger than it (alone).
    assert len(frame_records(piece)) <= 2048 or piece == [b"z" * 5000]
    at += m.records
  # Greedy: no member would have room for its successor's first record.
  sizes = [len(frame_records(records[a:a + m.records])) for a, m in zip(
      [sum(t.records for t in table[:i]) for i in range(len(table))], table)]
  firsts = [len(records[sum(t.records for t in table[:i])]) + 16
            for i in range(1, len(table))]
  assert all(s + f > 2048 for s, f in zip(sizes, firsts))
  # The same bytes every time; the empty shard's one empty member.
  assert deflate.gzip_members(framed, None, cap=2048) == data
  assert member_table(deflate.gzip_members(b"", None))[0].records == 0


@pytest.mark.parametrize("kind", ["gzip", "plain"])
def test_every_tfrecord_file_gets_its_index(tmp_path, kind):
  """ShardFiles writes index/<file>.index (ours) for gzip shards and
  DALI's index/<file>.idx for uncompressed ones, from what it wrote:
  inline parts, members and part files; a shard cut into files by the
  limit gets one per file, renamed with it by finish_shard_names."""
  from beam_tfrecords.core.members import member_table
  from beam_tfrecords.core.shard_index import ShardIndex
  from beam_tfrecords.sinks.shards import finish_shard_names
  gz = kind == "gzip"
  c = codec.TFRECORD_GZIP if gz else codec.TFRECORD_PLAIN
  records = _records(600)
  part = tmp_path / "p.part"
  framed = frame_records(records[100:200])
  part.write_bytes(deflate.gzip_members(framed, None, 1024) if gz else framed)
  out = shard_files.ShardFiles(str(tmp_path), "train", 0, 1, c, None,
                          20_000 if gz else None, 60_000, member_cap=1024)
  for r in records[:100]:
    out.inline(frame_record(r), 1)
  out.part_file(str(part), part.stat().st_size, 100)
  data = frame_records(records[200:600])
  out.member(deflate.gzip_members(data, None, 1024) if gz else data, 400)
  written = finish_shard_names(str(tmp_path), out.close())
  assert sum(w.records for w in written) == 600
  assert len(written) > 1 if gz else len(written) == 1  # cut by the limit
  for w in written:
    shard = (tmp_path / w.file).read_bytes()
    index = (tmp_path / w.index_file).read_bytes()
    assert w.index_bytes == len(index)
    assert w.index_sha256 == hashlib.sha256(index).hexdigest()
    if gz:
      assert w.index_file == f"index/{w.file}.index"
      table = member_table(shard)
      got = ShardIndex.from_bytes(index, w.index_file)
      assert got.offsets.tolist() == [m.offset for m in table] + [len(shard)]
      assert got.records == w.records
      got.check(len(shard), lambda o, n: shard[o:o + n], w.index_file,
                w.file)
    else:
      assert w.index_file == f"index/{w.file}.idx"
      lines = index.decode("ascii").splitlines()
      sizes = [len(r) + 16 for r in records]
      offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
      assert lines == [f"{o} {s}" for o, s in zip(offsets, sizes)]
  assert sorted(os.listdir(tmp_path / "index")) == sorted(
      w.index_file[len("index/"):] for w in written)


@pytest.mark.parametrize("shuffle", [None, (7, 3)])
def test_another_deal_s_parts_give_the_records_back_in_order(shuffle):
  """A unit kept under one shard plan (core.unit_cache) is dealt again
  under another: sinks.shards.undealt gets the batch's records back, in
  order, from the parts (gzip members and framed records) the first deal
  made."""
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.sinks.shards import Shuffle, _DealFn, undealt
  records = [os.urandom(n % 300) for n in range(5000)]
  order = ("day01.csv", 0, 3)
  kinds = set()
  for n in (1, 3, 24):
    deal = None if shuffle is None else Shuffle(shuffle[0],
                                                {"train": shuffle[1]})
    fn = _DealFn({"train": n}, codec.TFRECORD_GZIP, None, None, deal)
    parts = [(shard, fn._part("train", shard, key, part, spill=False))
             for (shard, key), part in fn._deal("train", order,
                                                records).items()]
    kinds |= {p[1][1] for p in parts}
    how = {"shards": n, "gzip": True, "framed": True,
           "shuffle": None if shuffle is None else list(shuffle)}
    assert undealt("train", order, parts, how) == records, n
  assert kinds == {0, 1}  # framed records and gzip members both came back

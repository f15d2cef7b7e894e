"""Random access (issue 47): records by number through the index beside
every gzip shard, a global shuffle from (seed, epoch) with exact shares,
and stale or missing indexes refused by name. Real builds, real files;
the records compared with what the streaming reader and tf.data read."""

import json
import os
import shutil

import numpy as np
import pytest

import beam_tfrecords as btr
from beam_tfrecords.read.global_order import GlobalOrder
from beam_tfrecords.read.random_access import RecordIndex
from beam_tfrecords.read.stream import RecordStream

from tests.helpers.records import tf_read
from tests.helpers.shard_size import SCHEMA, _csv

ROWS = 3000


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """A split of 3,000 records in 3 shards cut into members of 4 KiB."""
  folder = tmp_path_factory.mktemp("random_access")
  src = _csv(folder / "in.csv", ROWS)
  out = str(folder / "out")
  btr.build(SCHEMA, src, out, num_shards=3, member_size="4KiB")
  return out


def _ids(records):
  return [btr_decode(r) for r in records]


def btr_decode(record):
  from beam_tfrecords.core.tfrecord_files import decode_example
  return decode_example(record)["id"][1][0]


def test_records_by_number_are_the_streams(built, tf):
  info = btr.dataset_info(built)
  shards = info.splits["train"].shards
  assert all(s.index is not None and s.index.file ==
             f"index/{s.file}.index" for s in shards)
  assert info.options.member_bytes == 4096
  records = RecordIndex(built, "train")
  stream = list(RecordStream(built, "train"))
  assert len(records) == len(stream) == ROWS
  # What tf.data reads from the shards, in order, is what the index gives.
  files = [os.path.join(built, s.file) for s in shards]
  read = tf_read(tf, files)
  assert read == stream
  assert [records[i] for i in range(0, ROWS, 7)] == stream[::7]
  picks = np.random.default_rng(0).integers(0, ROWS, 500).tolist()
  assert records.get(picks) == [stream[i] for i in picks]
  assert records.get([]) == []
  # The same through the one read handle.
  handle = btr.open(built)
  assert handle.by_number("train").get([3, 2]) == [stream[3], stream[2]]
  assert list(handle.stream("train", shuffle_seed=1, shuffle="global")) == \
      list(RecordStream(built, "train", shuffle_seed=1, shuffle="global"))
  with pytest.raises(IndexError, match="record 3000 of a split of 3,000"):
    records[ROWS]


def test_a_global_shuffle_is_a_permutation_with_exact_shares(built):
  everything = sorted(_ids(RecordStream(built, "train")))
  assert everything == list(range(ROWS))
  one = _ids(RecordStream(built, "train", shuffle_seed=5,
                          shuffle="global"))
  assert sorted(one) == everything
  # The order is the permutation's (the index's numbering: stream order).
  order = GlobalOrder(ROWS, 5, 0)(np.arange(ROWS))
  stream = _ids(RecordStream(built, "train"))
  assert one == [stream[i] for i in order]
  # The same for the same seed and epoch, however many at a time; another
  # epoch, another order.
  assert _ids(RecordStream(built, "train", shuffle_seed=5,
                           shuffle="global", lookahead=97)) == one
  other = _ids(RecordStream(built, "train", shuffle_seed=5, epoch=1,
                            shuffle="global"))
  assert sorted(other) == everything and other != one
  # Any record may follow any other: not file by file.
  assert len({i // 1000 for i in one[:30]}) == 3
  # Shares: 4 ranks of 2 workers each, blocks of 8: no record twice.
  parts = []
  for rank in range(4):
    rank_records = []
    streams = [RecordStream(built, "train", shard=(rank, 4),
                            worker=(w, 2), shuffle_seed=5,
                            shuffle="global", block=8) for w in range(2)]
    lists = [_ids(s) for s in streams]
    # The workers' blocks in turn give the rank's share in order.
    at = [0, 0]
    while at[0] < len(lists[0]) or at[1] < len(lists[1]):
      for w in range(2):
        rank_records += lists[w][at[w]:at[w] + 8]
        at[w] += 8
    assert rank_records == one[rank * ROWS // 4:(rank + 1) * ROWS // 4]
    parts += rank_records
  assert parts == one


def test_a_stream_resumes_a_global_shuffle_exactly(built):
  full = _ids(RecordStream(built, "train", shuffle_seed=2,
                           shuffle="global"))
  stream = RecordStream(built, "train", shuffle_seed=2, shuffle="global")
  it = iter(stream)
  first = [btr_decode(next(it)) for _ in range(1234)]
  state = json.loads(json.dumps(stream.state_dict()))
  assert state["position"] == 1234 and state["shuffle"] == "global"
  again = RecordStream(built, "train", shuffle_seed=2, shuffle="global")
  again.load_state_dict(state)
  assert first + _ids(again) == full
  with pytest.raises(btr.InputError, match="shuffle_seed=2"):
    RecordStream(built, "train", shuffle_seed=3,
                 shuffle="global").load_state_dict(state)


def test_stale_foreign_and_missing_indexes_are_refused(built, tmp_path):
  out = str(tmp_path / "copy")
  shutil.copytree(built, out)
  info = btr.dataset_info(out)
  s0, s1 = info.splits["train"].shards[:2]
  # Another shard's index beside this one: both files named.
  shutil.copy(os.path.join(out, s1.index.file),
              os.path.join(out, s0.index.file))
  records = RecordIndex(out, "train")
  with pytest.raises(btr.ShardIndexError) as e:
    records[0]
  # Checked against the checksum dataset.json lists for it, first.
  assert f"the index {os.path.join(out, s0.index.file)} of the shard " \
         f"{os.path.join(out, s0.file)} is damaged: " in str(e.value)
  # Records in the second shard still read.
  assert btr_decode(records[s0.num_records]) == \
      btr_decode(list(RecordStream(built, "train"))[s0.num_records])
  # The index is its own, the shard beside it another's: both named.
  shutil.copy(os.path.join(built, s0.index.file),
              os.path.join(out, s0.index.file))
  shutil.copy(os.path.join(out, s1.file), os.path.join(out, s0.file))
  with pytest.raises(btr.ShardIndexError) as e:
    RecordIndex(out, "train")[0]
  assert f"the index {os.path.join(out, s0.index.file)} does not belong " \
         f"to the shard {os.path.join(out, s0.file)}" in str(e.value)
  # Not an index at all.
  with open(os.path.join(out, s1.index.file), "wb") as f:
    f.write(b"garbage")
  with pytest.raises(btr.ShardIndexError, match=r"is damaged: it is 7 "
                     r"bytes, dataset\.json lists [\d,]+"):
    RecordIndex(out, "train")[s0.num_records]
  # A dataset without indexes (Beam's sink writes none): said, with what
  # to do instead.
  beam_out = str(tmp_path / "beam")
  btr.build(SCHEMA, _csv(tmp_path / "b.csv", 20), beam_out, num_shards=1,
            sink="beam")
  with pytest.raises(btr.InputError, match="has no index, so its records "
                     "cannot be read by number .* read it as a stream"):
    RecordIndex(beam_out, "train")
  with pytest.raises(ValueError, match="needs a shuffle_seed"):
    RecordStream(built, "train", shuffle="global")


def test_member_size_is_checked(tmp_path):
  src = _csv(tmp_path / "a.csv", 5)
  with pytest.raises(btr.InputError, match="--member-size must be a size "
                     "from 1KiB to 1GiB"):
    btr.build(SCHEMA, src, str(tmp_path / "o"), member_size="10")
  with pytest.raises(btr.InputError, match="--member-size works with the "
                     "deterministic sink"):
    btr.build(SCHEMA, src, str(tmp_path / "o"), member_size="64KiB",
              sink="beam")


TFDS_SCHEMA = {"name": "s", "features": {
    "id": {"type": "int64", "required": True},
    "text": {"type": "string", "required": True}}}


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
  """Uncompressed shards (--tfds), each with DALI's index."""
  folder = tmp_path_factory.mktemp("plain")
  out = str(folder / "out")
  btr.build(TFDS_SCHEMA, _csv(folder / "in.csv", 1000), out, num_shards=2,
            tfds=True)
  return out


def test_uncompressed_shards_have_dalis_index_and_random_access(plain,
                                                                 tmp_path):
  from beam_tfrecords.core.tfrecord_files import frame_record
  info = btr.dataset_info(plain)
  stream = list(RecordStream(plain, "train"))
  at = 0
  for s in info.splits["train"].shards:
    assert s.index.file == f"index/{s.file}.idx"
    # DALI's tfrecord2idx layout: "offset framed_size" per record.
    lines = open(os.path.join(plain, s.index.file)).read().splitlines()
    sizes = [len(frame_record(r)) for r in stream[at:at + s.num_records]]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    assert lines == [f"{o} {n}" for o, n in zip(offsets, sizes)]
    at += s.num_records
  records = RecordIndex(plain, "train")
  picks = np.random.default_rng(1).integers(0, 1000, 300).tolist()
  assert records.get(picks) == [stream[i] for i in picks]
  assert sorted(_ids(RecordStream(plain, "train", shuffle_seed=4,
                                  shuffle="global"))) == list(range(1000))
  # A stale index: another shard's lines (the sizes do not tile it).
  out = str(tmp_path / "copy")
  shutil.copytree(plain, out)
  s0, s1 = btr.dataset_info(out).splits["train"].shards
  with open(os.path.join(out, s0.index.file), "a") as f:
    f.write(f"{os.path.getsize(os.path.join(out, s0.file))} 20\n")
  with pytest.raises(btr.ShardIndexError, match=r"the index .*00000-of-"
                     r"00002\.tfrecord\.idx of the shard .*00000-of-00002"
                     r"\.tfrecord is damaged: it is [\d,]+ bytes or more, "
                     r"dataset\.json lists [\d,]+"):
    RecordIndex(out, "train")[0]


def test_dali_reads_the_uncompressed_shards_with_their_index(plain):
  """NVIDIA DALI's own TFRecord reader (CPU only) over our shards and
  index files, without its tfrecord2idx step: every record, in order.
  (The `dali` extra; CI installs it.)"""
  if os.environ.get("BTR_REQUIRE_EXTRAS"):
    import nvidia.dali  # noqa: F401
  else:
    pytest.importorskip("nvidia.dali")
  from nvidia.dali import fn, pipeline_def
  import nvidia.dali.tfrecord as tfrec
  info = btr.dataset_info(plain)
  shards = info.splits["train"].shards

  @pipeline_def(batch_size=100, num_threads=1, device_id=None)
  def pipe():
    read = fn.readers.tfrecord(
        path=[os.path.join(plain, s.file) for s in shards],
        index_path=[os.path.join(plain, s.index.file) for s in shards],
        features={"id": tfrec.FixedLenFeature([1], tfrec.int64, -1),
                  "text": tfrec.FixedLenFeature((), tfrec.string, "")},
        random_shuffle=False, name="reader")
    return read["id"], read["text"]

  p = pipe()
  p.build()
  assert p.epoch_size("reader") == 1000
  ids, texts = [], []
  for _ in range(10):
    id_batch, text_batch = p.run()
    ids += [int(id_batch.at(i)[0]) for i in range(len(id_batch))]
    texts += [text_batch.at(i).tobytes().decode() for i in
              range(len(text_batch))]
  stream = list(RecordStream(plain, "train"))
  assert ids == _ids(stream)
  from beam_tfrecords.core.tfrecord_files import decode_example
  assert texts == [decode_example(r)["text"][1][0].decode() for r in stream]


def test_random_access_to_chunks_of_many_records_is_warned(tmp_path,
                                                          caplog):
  pytest.importorskip("array_record.python.array_record_module")
  out = str(tmp_path / "grouped")
  btr.build(SCHEMA, _csv(tmp_path / "a.csv", 100), out, num_shards=1,
            file_format="array_record",
            array_record_options="group_size:64")
  stream = list(RecordStream(out, "train"))
  with caplog.at_level("WARNING"):
    records = RecordIndex(out, "train")
  assert "holds 64 records per chunk" not in caplog.text
  assert "its ArrayRecord shards hold 64 records per chunk " \
         "(--array-record-options group_size:64)" in caplog.text
  assert records.get([99, 0]) == [stream[99], stream[0]]


def test_uncompressed_output_without_tfds(tmp_path, tf):
  """--compression none: uncompressed TFRecord shards with DALI's index,
  for schemas --tfds refuses (features that may be missing); tf.data and
  our readers read them, and random access reads each record alone."""
  out = str(tmp_path / "plain")
  src = _csv(tmp_path / "a.csv", 300)
  btr.build(SCHEMA, src, out, num_shards=2, compression="none")
  gz = str(tmp_path / "gz")
  btr.build(SCHEMA, src, gz, num_shards=2)
  info = btr.dataset_info(out)
  assert info.compression == "NONE" and info.options.member_bytes is None
  shards = info.splits["train"].shards
  assert [s.file for s in shards] == ["train-00000-of-00002.tfrecord",
                                      "train-00001-of-00002.tfrecord"]
  assert [s.index.file for s in shards] == [
      f"index/{s.file}.idx" for s in shards]
  records = list(RecordStream(gz, "train"))
  assert list(RecordStream(out, "train")) == records
  read = tf_read(tf, [os.path.join(out, s.file) for s in shards], "")
  assert read == records
  assert RecordIndex(out, "train").get([299, 3]) == [records[299],
                                                      records[3]]
  for flag, value, said in (("gzip_level", 6, "--gzip-level"),
                            ("member_size", "64KiB", "--member-size"),
                            ("max_shard_size", "1MB", "--max-shard-size")):
    with pytest.raises(btr.InputError, match="--compression none writes "
                       f"one uncompressed TFRecord file per shard with the "
                       f"deterministic sink: drop {said}"):
      btr.build(SCHEMA, src, str(tmp_path / "x"), compression="none",
                **{flag: value})
  with pytest.raises(btr.InputError, match="--compression is for TFRecord "
                     "shards"):
    btr.build(SCHEMA, src, str(tmp_path / "x"), compression="none",
              file_format="array_record")


def test_validate_checks_every_index_against_its_shard(built, plain,
                                                       tmp_path):
  from beam_tfrecords.inspect.check import validate
  from beam_tfrecords.schema import load_schema
  assert validate(built, load_schema(SCHEMA)).ok
  assert validate(plain, load_schema(TFDS_SCHEMA)).ok
  out = str(tmp_path / "copy")
  shutil.copytree(built, out)
  s0, s1 = btr.dataset_info(out).splits["train"].shards[:2]
  shutil.copy(os.path.join(out, s1.index.file),
              os.path.join(out, s0.index.file))
  report = validate(out, load_schema(SCHEMA))
  assert not report.ok
  assert report.failures == [
      f"{s0.index.file}: its SHA-256 is not the one dataset.json lists (the "
      "index was changed or replaced)"]


def test_descriptors_stay_few_and_transformed_needs_a_transform(
    built, monkeypatch):
  from beam_tfrecords.read import random_access
  monkeypatch.setattr(random_access._DESCRIPTORS, "MAX_OPEN", 1)
  before = len(os.listdir("/proc/self/fd"))
  records = RecordIndex(built, "train")
  stream = list(RecordStream(built, "train"))
  picks = list(range(0, ROWS, 37))  # every shard, many times over
  assert records.get(picks) == [stream[i] for i in picks]
  assert len(os.listdir("/proc/self/fd")) <= before + 1
  records.close()
  assert len(os.listdir("/proc/self/fd")) <= before
  with pytest.raises(btr.InputError, match="has no transformed records"):
    RecordIndex(built, "train", transformed=True)


def test_validate_compares_every_member_with_the_index(built, tmp_path):
  """An index whose ends match its shard (size, first and last member)
  but whose middle does not: validate reads the shard's members and says
  so; dataset.json's digest of the index was updated too (and _SUCCESS's
  seal of dataset.json)."""
  import hashlib
  from beam_tfrecords.core.generations import sealed
  from beam_tfrecords.core.shard_index import ShardIndex
  from beam_tfrecords.inspect.check import validate
  from beam_tfrecords.schema import load_schema
  out = str(tmp_path / "copy")
  shutil.copytree(built, out)
  s0 = btr.dataset_info(out).splits["train"].shards[0]
  path = os.path.join(out, s0.index.file)
  index = ShardIndex.from_bytes(open(path, "rb").read(), path)
  assert index.members > 3
  offsets = index.offsets.copy()
  offsets[2] += 1
  bad = ShardIndex(offsets, index.first_records, index.first_digest,
                   index.last_digest).to_bytes()
  with open(path, "wb") as f:
    f.write(bad)
  meta_path = os.path.join(out, "dataset.json")
  meta = json.load(open(meta_path))
  meta["splits"]["train"]["shards"][0]["index"]["sha256"] = \
      hashlib.sha256(bad).hexdigest()
  with open(meta_path, "w") as f:
    json.dump(meta, f)
  success = os.path.join(out, "_SUCCESS")
  with open(success, encoding="utf-8") as f:
    resealed = sealed(f.read(), open(meta_path, "rb").read())
  with open(success, "w", encoding="utf-8") as f:
    f.write(resealed)
  report = validate(out, load_schema(SCHEMA))
  assert report.failures == [f"{s0.index.file}: its members are not the "
                             f"shard's ({s0.file})"]

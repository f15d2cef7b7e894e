"""Readers of a dataset that an overwrite replaces (issue 44): the old
dataset whole, the new one whole, or DatasetReplacedError ("read it
again"); never a silent mix of two builds' shards, never a raw
file-not-found. Covers iter_records, RecordStream, btr.load, the PyTorch
Dataset and iter_transformed's guard, on the same shard names and on
other ones (another shard count)."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.errors import DatasetReplacedError
from beam_tfrecords.core.generations import Pinned
from beam_tfrecords.core.tfrecord_files import decode_example
from beam_tfrecords.read.stream import RecordStream


SCHEMA = {"name": "r", "features": {"id": {"type": "int64", "required": True}}}
OLD, NEW = range(0, 4000), range(100_000, 106_000)


def _csv(path, ids):
  path.write_text("id\n" + "".join(f"{i}\n" for i in ids))
  return str(path)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
  root = tmp_path_factory.mktemp("replaced")
  return {"old": _csv(root / "old.csv", OLD), "new": _csv(root / "new.csv", NEW)}


def _build(inputs, which, out, shards):
  btr.build(SCHEMA, inputs[which], str(out), num_shards=shards,
            overwrite=True, force=True)


def _ids_of(records):
  return [decode_example(r)["id"][1][0] for r in records]


# Slow: the fast tier publishes over hand-made datasets while they are
# read, tests/unit/read/test_stream.py::test_a_stream_stops_at_the_next_file_of_a_replaced_dataset.
@pytest.mark.slow
@pytest.mark.parametrize("new_shards", [4, 3], ids=["same-names",
                                                     "other-names"])
def test_a_record_stream_stops_at_the_next_file_of_a_replaced_dataset(
    tmp_path, inputs, new_shards):
  out = tmp_path / "ds"
  _build(inputs, "old", out, 4)
  per_file = [s.num_records for s in btr.dataset_info(str(out)).splits[
      "train"].shards]
  stream = RecordStream(str(out), "train")
  it = iter(stream)
  got = [next(it)]  # the first file is open
  _build(inputs, "new", out, new_shards)
  with pytest.raises(DatasetReplacedError) as e:
    for record in it:
      got.append(record)
  assert str(e.value).startswith(
      f"{out} was replaced by a newer build while it was read")
  assert "Read it again" in str(e.value)
  # What came before the error: the first file of the old dataset, whole.
  ids = _ids_of(got)
  assert len(ids) == per_file[0] and set(ids) <= set(OLD)
  # Read again: the new dataset, whole.
  assert sorted(r["id"] for r in btr.iter_records(str(out))) == list(NEW)


# Slow: tests/unit/read/test_reader.py::test_iter_records_of_a_replaced_dataset_never_mixes
# is the same on hand-made datasets, in the fast tier.
@pytest.mark.slow
def test_iter_records_of_a_replaced_dataset_never_mixes(tmp_path, inputs):
  out = tmp_path / "ds"
  _build(inputs, "old", out, 4)
  it = btr.iter_records(str(out))
  first = next(it)
  _build(inputs, "new", out, 4)
  with pytest.raises(DatasetReplacedError):
    rest = [first] + list(it)
    assert not rest  # unreachable: the read stops
  assert first["id"] in OLD


@pytest.mark.slow
@pytest.mark.parametrize("new_shards", [4, 3], ids=["same-names",
                                                     "other-names"])
def test_load_of_a_replaced_dataset_stops_with_an_error_saying_so(tmp_path, inputs, tf,
                                                        new_shards):
  out = tmp_path / "ds"
  _build(inputs, "old", out, 4)
  ds = btr.load(str(out), batch_size=100)
  it = iter(ds)
  got = list(next(it)["id"].numpy())
  _build(inputs, "new", out, new_shards)
  # (py_function reports any error as UnknownError: the message says it.)
  with pytest.raises(tf.errors.OpError) as e:
    for batch in it:
      got += list(batch["id"].numpy())
  assert f"{out} was replaced by a newer build while it was read" in str(
      e.value)
  assert set(got) <= set(OLD)
  # A new load reads the new dataset whole (and the old one's descriptors
  # are closed: each file read to its end closes its own).
  again = sorted(int(x) for b in btr.load(str(out), batch_size=1000)
                 for x in b["id"].numpy())
  assert again == list(NEW)


def test_load_reads_a_whole_dataset_through_the_descriptors_it_opened(
    tmp_path, inputs, tf):
  out = tmp_path / "ds"
  _build(inputs, "old", out, 4)
  before = len(os.listdir("/proc/self/fd"))
  ds = btr.load(str(out), batch_size=512)
  for _ in range(5):  # 20 files opened: at most MAX_OPEN stay open
    ids = sorted(int(x) for b in ds for x in b["id"].numpy())
    assert ids == list(OLD)
  assert len(os.listdir("/proc/self/fd")) <= before + Pinned.MAX_OPEN
  # A share and a seeded order read the same way.
  share = sorted(int(x) for b in btr.load(str(out), batch_size=512,
                                          shard=(1, 3), shuffle_seed=4)
                 for x in b["id"].numpy())
  assert share == sorted(r["id"] for r in btr.iter_records(
      str(out), shard=(1, 3), shuffle_seed=4))


def test_a_dataset_being_published_is_waited_for(tmp_path, inputs):
  """Between the switch's first and last step there is no _SUCCESS: a
  reader waits for the switch (a journal says one is under way)."""
  out = tmp_path / "ds"
  _build(inputs, "old", out, 4)
  staging = out / ".staging-0123456789ab"
  staging.mkdir()
  (staging / "publish.json").write_text("{}")
  success = (out / "_SUCCESS").read_bytes()
  (out / "_SUCCESS").rename(staging / "_SUCCESS")
  started = time.monotonic()
  with pytest.raises(DatasetReplacedError) as e:
    btr.dataset_info(str(out))
  assert time.monotonic() - started >= 1.5  # it waited
  assert "is being replaced by a new build right now" in str(e.value)
  # Back in place within the wait: read as usual.
  (staging / "_SUCCESS").rename(out / "_SUCCESS")
  assert (out / "_SUCCESS").read_bytes() == success
  assert btr.dataset_info(str(out)).counts.records_written == len(OLD)


def test_the_torch_dataset_of_a_replaced_dataset_never_mixes(
    tmp_path, inputs, monkeypatch):
  torch = pytest.importorskip("torch") if not os.environ.get(
      "BTR_REQUIRE_EXTRAS") else __import__("torch")
  del torch
  from beam_tfrecords.read import torch as torch_reader
  from beam_tfrecords.read.torch import Dataset
  # Decoded 1,000 records at a time (8,192 by default: the whole old
  # dataset, read before the switch, would be handed out whole, rightly).
  monkeypatch.setattr(torch_reader, "_GROUP", 1000)
  out = tmp_path / "ds"
  _build(inputs, "old", out, 4)
  it = iter(Dataset(str(out)))
  first = next(it)
  _build(inputs, "new", out, 4)
  with pytest.raises(DatasetReplacedError):
    for _ in it:
      pass
  assert int(first["id"]) in OLD


WRITER = textwrap.dedent("""
    import json, sys
    import beam_tfrecords as btr
    schema, old, new, out, rounds = (json.loads(sys.argv[1]), sys.argv[2],
                                     sys.argv[3], sys.argv[4],
                                     int(sys.argv[5]))
    for i in range(rounds):
      btr.build(schema, new if i % 2 == 0 else old, out, num_shards=4,
                overwrite=True, force=True)
      print("built", i, flush=True)
""")


@pytest.mark.slow
def test_readers_looping_during_alternating_overwrites_never_mix(
    tmp_path, inputs, tf):
  out = tmp_path / "ds"
  _build(inputs, "old", out, 4)
  writer = subprocess.Popen(
      [sys.executable, "-c", WRITER, json.dumps(SCHEMA), inputs["old"],
       inputs["new"], str(out), "8"], stdout=subprocess.PIPE, text=True)
  counts, replaced = [], 0
  deadline = time.monotonic() + 240
  try:
    while writer.poll() is None and time.monotonic() < deadline:
      for read in ("iter_records", "stream", "load"):
        try:
          if read == "iter_records":
            ids = [r["id"] for r in btr.iter_records(str(out))]
          elif read == "stream":
            ids = _ids_of(RecordStream(str(out), "train"))
          else:
            ids = [int(x) for b in btr.load(str(out), batch_size=1000)
                   for x in b["id"].numpy()]
        except (DatasetReplacedError, tf.errors.OpError) as e:
          assert "replaced by a new" in str(e), e
          replaced += 1
          continue
        assert sorted(ids) in (list(OLD), list(NEW)), (read, len(ids))
        counts.append(len(ids))
  finally:
    writer.wait(timeout=300)
  assert writer.returncode == 0
  # Both datasets were read whole, many times.
  assert {len(OLD), len(NEW)} <= set(counts), counts

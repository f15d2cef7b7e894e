"""Runs (sinks.runs): many chunks' parts per shard, merged back by key a
window at a time, and written in bulk: the same parts in the same order,
and the same file bytes, as one part at a time."""

import io
import random

import pytest

from beam_tfrecords.core.tfrecord_files import frame_records
from beam_tfrecords.sinks import codec, deflate, part_files, runs, shard_files


def _part(rng, key):
  how = rng.choice([part_files.INLINE] * 8 + [part_files.MEMBER, part_files.PART_FILE])
  records = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 60)))
             for _ in range(rng.randint(1, 3))]
  data = frame_records(records)
  if how == part_files.MEMBER:
    data = deflate.gzip_members(data, None)
  elif how == part_files.PART_FILE:
    data = f"/parts/{key}"
  return (key, how, data, len(records),
          len(data) if how != part_files.PART_FILE else 1000)


def _parts(seed, sources=5, per_source=120):
  """`sources` sorted lists of parts with distinct keys, interleaved."""
  rng = random.Random(seed)
  keys = rng.sample(range(10**6), sources * per_source)
  lists = [sorted(keys[i::sources]) for i in range(sources)]
  return [[_part(rng, (k,)) for k in keys] for keys in lists]


@pytest.mark.parametrize("page", [100, 3000, 1 << 20])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("heap", [False, True])
def test_windows_give_the_parts_in_key_order(monkeypatch, page, seed, heap):
  monkeypatch.setattr(runs, "PAGE_BYTES", page)
  if heap:  # more runs than windows take: merged by a heap
    monkeypatch.setattr(runs, "MAX_WINDOW_RUNS", 2)
  lists = _parts(seed)
  files = {}

  def spill(data):
    path = f"run{len(files)}"
    files[path] = data
    return path

  packed = [runs.pack(runs.Parts.of(p), 0, spill if i % 2 else None, 0)
            for i, p in enumerate(lists[:-1])]
  plain = list(reversed(lists[-1]))  # plain parts come in any order
  every = packed + plain
  opener = lambda path: io.BytesIO(files[path])
  expected = sorted((p for ps in lists for p in ps), key=lambda p: p[0])
  assert list(runs.in_key_order(every, opener)) == expected
  got = [t for w in runs.windows(every, opener) for t in w.tuples()]
  assert got == expected
  if page == 100:
    assert len(list(runs.windows(every, opener))) > 10


@pytest.mark.parametrize("member_bytes", [50, 700, 1 << 20])
def test_inline_many_writes_the_same_members(tmp_path, monkeypatch,
                                             member_bytes):
  monkeypatch.setattr(shard_files, "INLINE_MEMBER_BYTES", member_bytes)
  rng = random.Random(3)
  parts = [_part(rng, (k,)) for k in range(400)]
  for p in parts:
    if p[1] == part_files.PART_FILE:  # a real part file to copy
      path = tmp_path / p[2].strip("/").replace("/", "_")
      path.write_bytes(deflate.gzip_members(
          frame_records([b"x" * 10] * p[3]), None))
  parts = [(k, how, str(tmp_path / d.strip("/").replace("/", "_"))
            if how == part_files.PART_FILE else d, n, size)
           for k, how, d, n, size in parts]

  def write(directory, bulk):
    out = shard_files.ShardFiles(str(directory), "train", 0, 1,
                                 codec.TFRECORD_GZIP, None, None)
    if bulk:
      shard_files.write_window(out, runs.Parts.of(parts))
    else:
      for _, how, data, count, size in parts:
        if how == part_files.INLINE:
          out.inline(data, count)
        elif how == part_files.MEMBER:
          out.member(data, count)
        else:
          out.part_file(data, size, count)
    return out.close(), (directory / "train-00000-of-00001.tfrecord.gz"
                         ).read_bytes()

  (tmp_path / "one").mkdir()
  (tmp_path / "bulk").mkdir()
  one, one_bytes = write(tmp_path / "one", False)
  bulk, bulk_bytes = write(tmp_path / "bulk", True)
  assert bulk_bytes == one_bytes
  assert bulk == one
  assert one[0].records == sum(p[3] for p in parts)
  # Members: one per MEMBER part, and the INLINE parts in between cut
  # into members of member_bytes.
  members = one_bytes.count(b"\x1f\x8b\x08")
  assert members >= sum(1 for p in parts if p[1] == part_files.MEMBER)

"""The unit store (core/unit_cache.py): a unit is complete, every file
checked, or absent; a damaged file makes it a miss; kept part files are
linked into the build that reuses them (and files a batch keeps, in
order); parts dealt another way come back
as another deal's; eviction keeps the least recently used out first."""

import hashlib
import os

from isal import isal_zlib

from beam_tfrecords.core.unit_cache import (MANIFEST, KeptSplit, UnitStore,
                                            unit_key)

DEAL, OTHER = "d" * 16, "e" * 16
HOW = {"shards": 2, "gzip": True, "framed": True, "shuffle": None}


def _part_file(folder, data: bytes) -> str:
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, f"batch-{hashlib.sha1(data).hexdigest()}.part")
  with open(path, "wb") as f:
    f.write(data)
  return path


def _unit(store, key, batches, scratch, deal=DEAL):
  """Batches of (result, part file bytes or None: no records)."""
  for i, (result, data) in enumerate(batches):
    store.put(key, i, result, splits=["train"] if data is not None else [])
    if data is not None:
      path = _part_file(scratch, data)
      parts = [(0, (("in.csv", 0, i), 0, ("old", 0, len(data)), 3,
                    len(data)))]
      assert store.keep_parts(key, i, "train", deal, path,
                              isal_zlib.crc32(data), parts, HOW)
  store.complete(key, len(batches), {"path": "in.csv"})


def test_a_complete_unit_loads_as_it_was_kept(tmp_path):
  store = UnitStore(str(tmp_path / "s"))
  key = unit_key({"unit": ["in.csv", 0, None], "file": [10, 1.5]})
  assert store.load(key) is None  # absent
  store.put(key, 0, (["stats"], (3, 3), []), splits=["train"])
  assert store.load(key) is None  # not marked complete
  _unit(store, key, [((["stats"], (3, 3), []), b"abc" * 1000),
                     (([], (1, 0), [{"row": 7}]), None)], tmp_path / "p")
  into = str(tmp_path / "staging" / ".parts")
  got = store.load(key, into=into, deal=DEAL)
  assert [g.result for g in got] == [(["stats"], (3, 3), []),
                                     ([], (1, 0), [{"row": 7}])]
  assert got[1].parts == {}
  split = got[0].parts["train"]
  assert isinstance(split, KeptSplit) and split.other_deal is None
  # Linked into the build's staging folder: the build reads its own link.
  assert os.path.dirname(split.path) == os.path.join(into, "train")
  assert open(split.path, "rb").read() == b"abc" * 1000
  kept = os.path.join(store.root, key[:2], key, f"00000-train-{DEAL}.part")
  assert os.stat(kept).st_ino == os.stat(split.path).st_ino
  assert split.parts[0][1][:2] == (("in.csv", 0, 0), 0)
  assert [u.key for u in store.units()] == [key]
  # Evicted while a build reads it: its link stays readable.
  store.clear()
  assert open(split.path, "rb").read() == b"abc" * 1000


def test_another_deal_s_parts_come_back_to_be_dealt_again(tmp_path):
  store = UnitStore(str(tmp_path / "s"))
  key = unit_key({"n": 1})
  _unit(store, key, [(("r",), b"x" * 500)], tmp_path / "p", deal=OTHER)
  got = store.load(key, deal=DEAL)
  assert got[0].parts["train"].other_deal == HOW
  # Both deals kept side by side: each build finds its own.
  _unit(store, key, [(("r",), b"y" * 500)], tmp_path / "p", deal=DEAL)
  assert store.load(key, deal=DEAL)[0].parts["train"].other_deal is None
  assert open(store.load(key, deal=DEAL)[0].parts["train"].path,
              "rb").read() == b"y" * 500
  # A deal whose records cannot be got back (not framed TFRecords) is a
  # miss for another deal.
  key2 = unit_key({"n": 2})
  store.put(key2, 0, ("r",), splits=["train"])
  store.keep_parts(key2, 0, "train", OTHER, _part_file(tmp_path / "q", b"z"),
                   isal_zlib.crc32(b"z"), [],
                   dict(HOW, framed=False))
  store.complete(key2, 1)
  assert store.load(key2, deal=DEAL) is None


def test_kept_files_are_linked_checked_and_named_in_order(tmp_path):
  store = UnitStore(str(tmp_path / "s"))
  key = unit_key({"files": 1})
  spills = [_part_file(tmp_path / "spill", data)
            for data in (b"first" * 300, b"second" * 200)]
  crcs = [isal_zlib.crc32(open(p, "rb").read()) for p in spills]
  store.put(key, 0, ("steps", (0, 5, 7)), files=list(zip(spills, crcs)))
  store.complete(key, 1)
  into = str(tmp_path / "staging" / ".parts")
  got = store.load(key, into=into)
  assert got[0].result == ("steps", (0, 5, 7)) and got[0].parts == {}
  # In the order given, linked into the build's folder (not copied).
  assert [open(p, "rb").read() for p in got[0].files] == [
      b"first" * 300, b"second" * 200]
  assert [os.path.dirname(p) for p in got[0].files] == [into, into]
  assert [os.stat(p).st_ino for p in got[0].files] == [
      os.stat(p).st_ino for p in spills]
  # Without `into`: named where they are kept.
  folder = os.path.join(store.root, key[:2], key)
  assert store.load(key)[0].files == (os.path.join(folder, "00000-0.file"),
                                      os.path.join(folder, "00000-1.file"))
  # The build's own files may go (its staging folder is removed): the
  # store's links keep them.
  for p in spills:
    os.remove(p)
  assert open(store.load(key)[0].files[1], "rb").read() == b"second" * 200
  # A damaged, cut or missing kept file is a miss, and the unit goes.
  for damage in ("flip", "cut", "remove"):
    key = unit_key({"files": damage})
    spill = _part_file(tmp_path / "spill2", damage.encode() * 100)
    store.put(key, 0, "r", files=[(spill, isal_zlib.crc32(
        open(spill, "rb").read()))])
    store.complete(key, 1)
    path = os.path.join(store.root, key[:2], key, "00000-0.file")
    data = open(path, "rb").read()
    os.remove(path)
    if damage == "flip":
      open(path, "wb").write(data[:-1] + bytes([data[-1] ^ 1]))
    elif damage == "cut":
      open(path, "wb").write(data[:-1])
    assert store.load(key, into=into) is None, damage
    assert not os.path.exists(os.path.dirname(path)), damage
  # (What it linked before it found the damage is gone too.)
  assert sorted(os.listdir(into)) == sorted(
      os.path.basename(p) for p in got[0].files)
  # A file that cannot be kept: the batch is not kept, put says so, and
  # the files it had linked before are not left behind.
  key = unit_key({"files": "gone"})
  assert not store.put(key, 0, "r", files=[
      (_part_file(tmp_path / "spill3", b"kept"), 0),
      (str(tmp_path / "nothing"), 0)])
  folder = os.path.join(store.root, key[:2], key)
  assert not os.path.isdir(folder) or os.listdir(folder) == []


def test_keys_name_everything_in_any_order():
  a = unit_key({"schema": {"x": 1, "y": 2}, "file": [1, 2.0]})
  assert a == unit_key({"file": [1, 2.0], "schema": {"y": 2, "x": 1}})
  assert a != unit_key({"schema": {"x": 1, "y": 2}, "file": [1, 2.5]})
  assert len(a) == 64


def test_a_damaged_or_missing_file_is_a_miss_and_goes(tmp_path):
  store = UnitStore(str(tmp_path / "s"))
  into = str(tmp_path / "into")
  for damage in ("flip", "cut", "remove", "part", "part-cut", "parts",
                 "manifest"):
    key = unit_key({"damage": damage})
    _unit(store, key, [(b"x" * 1000, b"p" * 999), (b"y" * 1000, b"q" * 999)],
          tmp_path / "p")
    folder = os.path.join(store.root, key[:2], key)
    target = {"flip": "00001.batch", "cut": "00001.batch",
              "remove": "00001.batch", "part": f"00001-train-{DEAL}.part",
              "part-cut": f"00001-train-{DEAL}.part",
              "parts": f"00001-train-{DEAL}.parts",
              "manifest": MANIFEST}[damage]
    path = os.path.join(folder, target)
    if damage in ("flip", "part", "parts"):
      data = bytearray(open(path, "rb").read())
      data[-3] ^= 0x40
      os.remove(path)  # (a link: the kept file, not the scratch one)
      open(path, "wb").write(bytes(data))
    elif damage in ("cut", "part-cut"):
      data = open(path, "rb").read()
      os.remove(path)
      open(path, "wb").write(data[:20])
    elif damage == "remove":
      os.remove(path)
    else:
      open(path, "w").write("{not json")
    assert store.load(key, into=into, deal=DEAL) is None, damage
    if damage != "manifest":  # a damaged unit is removed
      assert not os.path.exists(folder), damage
    # and the links it had made into the build's folder are gone too
    linked = os.path.join(into, "train")
    assert not os.path.isdir(linked) or os.listdir(linked) == [], damage


def test_evict_removes_least_recently_used_first_and_clear_all(tmp_path):
  store = UnitStore(str(tmp_path / "s"))
  keys = [unit_key({"n": n}) for n in range(3)]
  for n, key in enumerate(keys):
    _unit(store, key, [(("r",), os.urandom(10_000))], tmp_path / "p")
    manifest = os.path.join(store.root, key[:2], key, MANIFEST)
    os.utime(manifest, (1000 + n, 1000 + n))
  store.load(keys[0], deal=DEAL)  # used now: the newest
  one = store.size() // 3
  assert store.evict(2 * one + 100) == [keys[1]]
  assert store.evict(0, keep=2000) == [keys[2]]  # keys[0] used after 2000
  assert [u.key for u in store.units()] == [keys[0]]
  assert store.clear() > 10_000
  assert list(store.units()) == [] and store.size() == 0


def test_large_results_are_compressed_where_that_pays(tmp_path):
  store = UnitStore(str(tmp_path / "s"))
  # Raw records (a grouped build's kept assembly) shrink; random bytes
  # (like steps already compressed) are kept as they are.
  records = b"".join(b"\x0a\x08carrier\x12\x04UA%03d" % (i % 1000)
                     for i in range(200_000))
  noise = os.urandom(1 << 20)
  for name, value, smaller in (("records", records, True),
                               ("noise", noise, False)):
    key = unit_key({"kind": name})
    store.put(key, 0, {"records": value})
    store.complete(key, 1)
    kept = os.path.join(store.root, key[:2], key, "00000.batch")
    size = os.path.getsize(kept)
    assert (size < len(value) // 4) is smaller, (name, size)
    if not smaller:  # as it is: the pickle and the head, nothing more
      assert size - len(value) < 120, size - len(value)
    assert store.load(key)[0].result == {"records": value}
    # A flipped bit in the compressed bytes: a miss, as any damage.
    data = bytearray(open(kept, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(kept, "wb").write(bytes(data))
    assert store.load(key) is None


def test_a_file_of_another_version_is_a_miss(tmp_path):
  store = UnitStore(str(tmp_path / "s"))
  key = unit_key({"version": 3})
  store.put(key, 0, "result")
  store.complete(key, 1)
  kept = os.path.join(store.root, key[:2], key, "00000.batch")
  data = open(kept, "rb").read()
  open(kept, "wb").write(b"BTRUNIT3" + data[8:])
  assert store.load(key) is None


class _ClientError(Exception):
  """What a bucket's client raises (not an OSError)."""


def test_a_bucket_s_own_errors_are_a_miss_and_leave_nothing(tmp_path,
                                                             monkeypatch):
  """A local store and files on a bucket: an error of the bucket's client
  while keeping a part file, or while serving one into a build's staging
  folder there, is not kept / a miss; no temporary or partial file is
  left, and nothing is raised."""
  from beam_tfrecords.core import fs, unit_cache  # pylint: disable=import-outside-toplevel
  store = UnitStore(str(tmp_path / "store"))
  key = unit_key({"k": 1})
  _unit(store, key, [("r", b"abc")], tmp_path / "scratch")
  copies, removed = [], []

  def failing_copy(source, target, read_bytes=0):
    del read_bytes
    copies.append((source, target))
    if fs.is_local(target):
      with open(target, "wb") as f:
        f.write(b"part")  # (half-way)
    raise _ClientError("SlowDown: please reduce your request rate")
  monkeypatch.setattr(unit_cache.fs, "copy", failing_copy)
  monkeypatch.setattr(unit_cache._REMOTE, "remove", removed.append)  # pylint: disable=protected-access
  assert not store.keep_parts(key, 1, "train", DEAL, "s3://b/out/x.part", 0,
                              [], HOW)
  assert copies[-1][0] == "s3://b/out/x.part"
  assert not [n for _, _, names in os.walk(tmp_path / "store")
              for n in names if ".tmp-" in n or n.startswith("00001")]
  assert store.load(key, into="s3://b/out/.staging-1") is None
  assert copies[-1][1].startswith("s3://b/out/.staging-1/train/kept-")
  assert removed == [copies[-1][1]]  # (the partial object)
  # The local case is untouched: the unit is gone (a miss), and a kept
  # unit loads into a local folder by links.
  monkeypatch.undo()
  _unit(store, key, [("r", b"abc")], tmp_path / "scratch")
  loaded = store.load(key, into=str(tmp_path / "staging"))
  assert loaded is not None and os.stat(
      loaded[0].parts["train"].path).st_nlink >= 2

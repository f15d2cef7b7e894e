"""The unit store (core/unit_cache.py): a unit is complete, every batch
checked, or absent; a damaged batch makes it a miss; eviction keeps the
least recently used out first."""

import os

import numpy as np

from beam_tfrecords.core.unit_cache import MANIFEST, UnitStore, unit_key


def _unit(store, key, batches):
  for i, result in enumerate(batches):
    store.put(key, i, result)
  store.complete(key, len(batches), {"path": "in.csv"})


def test_a_complete_unit_loads_as_it_was_put(tmp_path):
  store = UnitStore(str(tmp_path / "s"))
  key = unit_key({"unit": ["in.csv", 0, None], "file": [10, 1.5]})
  results = [([("train", ("in.csv", 0, 0), np.arange(5))], (3, 3), []),
             ([], (1, 0), [{"row": 7, "reason": "bad"}])]
  assert store.load(key) is None  # absent
  store.put(key, 0, results[0])
  store.put(key, 1, results[1])
  assert store.load(key) is None  # not marked complete
  store.complete(key, 2)
  got = store.load(key)
  assert got[1] == results[1]
  assert got[0][0][0][:2] == ("train", ("in.csv", 0, 0))
  assert got[0][0][0][2].tolist() == [0, 1, 2, 3, 4]
  assert [u.key for u in store.units()] == [key]
  assert store.has(key)


def test_keys_name_everything_in_any_order():
  a = unit_key({"schema": {"x": 1, "y": 2}, "file": [1, 2.0]})
  assert a == unit_key({"file": [1, 2.0], "schema": {"y": 2, "x": 1}})
  assert a != unit_key({"schema": {"x": 1, "y": 2}, "file": [1, 2.5]})
  assert len(a) == 64


def test_a_damaged_or_missing_batch_is_a_miss_and_goes(tmp_path):
  store = UnitStore(str(tmp_path / "s"))
  for damage in ("flip", "cut", "remove", "manifest"):
    key = unit_key({"damage": damage})
    _unit(store, key, [b"x" * 1000, b"y" * 1000])
    folder = os.path.join(store.root, key[:2], key)
    batch = os.path.join(folder, "00001.batch")
    if damage == "flip":
      data = bytearray(open(batch, "rb").read())
      data[-3] ^= 0x40
      open(batch, "wb").write(bytes(data))
    elif damage == "cut":
      os.truncate(batch, 20)
    elif damage == "remove":
      os.remove(batch)
    else:
      open(os.path.join(folder, MANIFEST), "w").write("{not json")
    assert store.load(key) is None, damage
    if damage != "manifest":  # a damaged batch: the unit is removed
      assert not os.path.exists(folder), damage


def test_evict_removes_least_recently_used_first_and_clear_all(tmp_path):
  store = UnitStore(str(tmp_path / "s"))
  keys = [unit_key({"n": n}) for n in range(3)]
  for n, key in enumerate(keys):
    _unit(store, key, [os.urandom(10_000)])
    manifest = os.path.join(store.root, key[:2], key, MANIFEST)
    os.utime(manifest, (1000 + n, 1000 + n))
  store.load(keys[0])  # used now: the newest
  one = store.size() // 3
  assert store.evict(2 * one + 100) == [keys[1]]
  assert store.evict(0, keep=2000) == [keys[2]]  # keys[0] used after 2000
  assert [u.key for u in store.units()] == [keys[0]]
  assert store.clear() > 10_000
  assert list(store.units()) == [] and store.size() == 0

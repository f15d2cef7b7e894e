"""beam_tfrecords/read/random_access.py, on values: the member cache keeps
what it took first (a cycle over more members than it holds still hits),
and the last few members used."""

from beam_tfrecords.read.random_access import MemberCache


def test_the_cache_keeps_its_first_members_and_the_last_few():
  cache = MemberCache(limit=30)
  for m in range(3):
    cache.put(m, bytes(10))  # 30 bytes: the limit, kept for good
  for m in range(3, 3 + MemberCache.RECENT + 2):
    cache.put(m, bytes(10))  # past the limit: the last RECENT only
  assert [m for m in range(20) if cache.get(m) is not None] == \
      [0, 1, 2] + list(range(5, 3 + MemberCache.RECENT + 2))
  # A cycle over all of them again: the kept ones hit every time.
  assert all(cache.get(m) is not None for m in (0, 1, 2))
  # A member used again is recent again.
  cache.get(5)
  cache.put(99, bytes(10))
  assert cache.get(5) is not None and cache.get(6) is None


def test_no_cache_keeps_nothing():
  cache = MemberCache(limit=0)
  cache.put(1, b"x")
  assert cache.get(1) is None

"""beam_tfrecords/read/random_access.py, on values: the member cache keeps
what it took first (a cycle over more members than it holds still hits),
and the last few members used, within its byte limit."""

from beam_tfrecords.read.random_access import MemberCache


def test_the_cache_keeps_its_first_members_and_the_last_few():
  cache = MemberCache(limit=100)
  for m in range(10):
    cache.put(m, [bytes(10)], 10)  # 100 bytes: the limit, kept for good
  for m in range(10, 30):
    cache.put(m, [bytes(10)], 10)  # past the limit: the last RECENT only
  assert [m for m in range(40) if cache.get(m) is not None] == \
      list(range(10)) + list(range(30 - MemberCache.RECENT, 30))
  # A member used again is recent again.
  cache.get(22)
  cache.put(99, [bytes(10)], 10)
  assert cache.get(22) is not None and cache.get(23) is None


def test_the_recent_members_stay_within_the_limit_too():
  cache = MemberCache(limit=30)
  for m in range(3):
    cache.put(m, [bytes(10)], 10)
  for m in range(3, 10):
    cache.put(m, [bytes(10)], 10)
  assert [m for m in range(10) if cache.get(m) is not None] == \
      [0, 1, 2, 7, 8, 9]
  cache.put("big", [bytes(31)], 31)  # larger than the whole cache: not kept
  assert cache.get("big") is None


def test_no_cache_keeps_nothing():
  cache = MemberCache(limit=0)
  cache.put(1, [b"x"], 1)
  assert cache.get(1) is None

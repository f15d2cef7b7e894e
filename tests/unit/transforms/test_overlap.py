"""beam_tfrecords/transforms/overlap.py, on values: records (or key
values) found in more than one split, counted exactly by their digests,
whichever bucket and batch they came in."""

import hashlib

import pytest

from beam_tfrecords.transforms.overlap import digest, overlap_of


def _digests(*values):
  return b"".join(digest(v) for v in values)


def test_a_digest_is_blake2b_of_16_bytes():
  assert digest(b"record") == hashlib.blake2b(b"record",
                                              digest_size=16).digest()
  assert len(digest(b"")) == 16 and digest(b"a") != digest(b"b")


@pytest.mark.parametrize("parts,count", [
    ([], 0),
    ([("train", _digests(b"a", b"a", b"b"))], 0),
    ([("train", _digests(b"a", b"b")), ("test", _digests(b"c"))], 0),
    ([("train", _digests(b"a", b"b")), ("test", _digests(b"b", b"c"))], 1),
    ([("train", _digests(b"a", b"a")), ("test", _digests(b"a", b"a"))], 1),
    ([("train", _digests(b"a")), ("test", _digests(b"a")),
      ("eval", _digests(b"a"))], 1),
    ([("train", _digests(b"a")), ("train", _digests(b"b")),
      ("test", _digests(b"b")), ("test", _digests(b"a", b"z"))], 2),
    ([("train", b""), ("test", _digests(b"a"))], 0),
], ids=["nothing", "one_split", "disjoint", "one_shared",
        "repeats_count_once", "three_splits_count_once",
        "batches_of_a_split_together", "an_empty_part"])
def test_overlap_counts_distinct_values_in_more_than_one_split(parts, count):
  assert overlap_of(parts) == count
  assert overlap_of(list(reversed(parts))) == count

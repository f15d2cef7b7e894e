"""beam_tfrecords/transforms/encode.py, on values: the digests of a
written row's key values (expect: disjoint_keys), which two splits share
exactly when they share a key."""

import numpy as np
import pyarrow as pa

from beam_tfrecords.transforms.encode import key_digests
from beam_tfrecords.transforms.overlap import digest, overlap_of

COLUMNS = {"user": pa.array(["ann", "bo", "ann", None, "cy"]),
           "day": [1, 1, 1, 2, None]}


def test_each_written_rows_key_values_together_once_per_row():
  got = key_digests(COLUMNS, ("user", "day"), np.array([2, 0, 1, 0]))
  # Rows 0, 1 and 2 (the rows given, once each, in row order).
  assert got == b"".join(digest(repr(k).encode("utf-8"))
                         for k in (("ann", 1), ("bo", 1), ("ann", 1)))


def test_a_row_without_a_key_value_is_left_out():
  assert key_digests(COLUMNS, ("user", "day"), np.array([3, 4])) == b""
  assert len(key_digests(COLUMNS, ("user",), np.array([3, 4]))) == 16


def test_splits_that_share_a_key_overlap():
  train = key_digests(COLUMNS, ("user",), np.array([0, 1]))
  test = key_digests(COLUMNS, ("user",), np.array([2, 4]))
  assert overlap_of([("train", train), ("test", test)]) == 1  # ann
  other = key_digests(COLUMNS, ("user", "day"), np.array([4]))
  assert overlap_of([("train", train), ("test", other)]) == 0

"""beam_tfrecords/transforms/grouped.py, on values: how many buckets a
grouped build's steps are spread over, from the input's size."""

import pytest

from beam_tfrecords.transforms.grouped import (BUCKET_BYTES, DEFAULT_BUCKETS,
                                               buckets_for)

MB = 1 << 20


@pytest.mark.parametrize("input_bytes,buckets", [
    (None, DEFAULT_BUCKETS),
    (0, DEFAULT_BUCKETS),
    (1, 16),
    (16 * BUCKET_BYTES, 16),
    (16 * BUCKET_BYTES + 1, 32),
    (100 * BUCKET_BYTES, 128),
    (256 * BUCKET_BYTES, 256),
    (10_000 * BUCKET_BYTES, 256),
], ids=["unknown", "empty", "one_byte", "16_buckets_worth", "one_byte_more",
        "100_buckets_worth", "the_most", "past_the_most"])
def test_buckets_are_a_power_of_two_of_about_bucket_bytes(input_bytes,
                                                          buckets):
  assert BUCKET_BYTES == 8 * MB and DEFAULT_BUCKETS == 64
  assert buckets_for(input_bytes) == buckets

"""beam_tfrecords/encoding/splitting.py, on values: Splits: which split each
input row (or group) goes to. No Beam here."""

import random

import pyarrow as pa

from beam_tfrecords.encoding.splitting import hash_columns, key_hash


def test_vectorized_hash_equals_the_python_definition():
  rng = random.Random(3)
  ints = [rng.randrange(-10**12, 10**12) for _ in range(500)] + [None, 0]
  texts = ["", "a", "é東", None] + [str(rng.random()) for _ in range(300)]
  texts = (texts * 3)[:len(ints)]
  got = hash_columns([pa.array(ints, pa.int64()), pa.array(texts)], len(ints))
  want = [key_hash([None if i is None else str(i).encode(),
                    None if t is None else t.encode("utf-8")])
          for i, t in zip(ints, texts)]
  assert got.tolist() == want
  # The split of a key never depends on the batch it is in.
  single = [int(hash_columns([pa.array([i], pa.int64())], 1)[0])
            for i in ints[:20]]
  assert single == hash_columns([pa.array(ints[:20], pa.int64())],
                                20).tolist()

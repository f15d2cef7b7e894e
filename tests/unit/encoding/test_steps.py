"""beam_tfrecords/encoding/steps.py, on values: Grouped rows -> steps, as
columns (the first half of grouped sequences)."""

import numpy as np
import pyarrow as pa

from beam_tfrecords.encoding import StepEncoder
from beam_tfrecords.encoding.steps import key_hash

from tests.helpers.group_rejection import FLOAT_KEYS


def test_step_batch_names_the_key_of_bad_rows():
  rows = [{"k": "0.0", "t": "1", "v": "1"},
          {"k": "-0.0", "t": "2", "v": "oops"},   # key -0.0 is key 0.0
          {"k": None, "t": "3", "v": "3"},         # no key: no group
          {"k": "nan", "t": "4", "v": "4"},        # NaN key: no group
          {"k": "nan", "t": "5", "v": "x"},        # ... even if bad too
          {"k": "2.5", "t": "y", "v": "5"}]
  batch = StepEncoder(FLOAT_KEYS).encode_rows(rows)
  assert [e.row for e in batch.errors] == [1, 2, 3, 4, 5]
  assert [(k, len(s)) for k, s in batch.groups] == [((0.0,), 1)]
  assert [(k, r) for k, r, _ in batch.bad] == [((0.0,), 1), ((2.5,), 5)]
  assert repr(batch.bad[0][0][0]) == "0.0"
  assert batch.bad[0][2] == 'In feature "v": could not parse \'oops\' as ' \
      "int64"
  assert batch.bad[1][2] == batch.errors[-1].reason


def test_rows_kept_with_drop_false_are_marked_and_hash_like_any():
  # drop=False: every row stays in the table (the grouped build's bucket
  # order leaves the marked ones out in the copy it makes anyway); the
  # rows that became steps are drop=True's table, value for value, and
  # hash the same; a row without a key (null, NaN) still hashes.
  columns = {"k": pa.array(["0.0", "-0.0", None, "nan", "nan", "2.5"],
                           pa.binary()),
             "t": pa.array(["1", "2", "3", "4", "5", "y"], pa.binary()),
             "v": pa.array(["1", "oops", "3", "4", "x", "5"], pa.binary())}
  encoder = StepEncoder(FLOAT_KEYS)
  dropped = encoder.encode_table(columns, 6, list(range(6)))
  kept = encoder.encode_table(columns, 6, list(range(6)), drop=False)
  assert dropped.good is None
  assert kept.good.tolist() == [True, False, False, False, False, False]
  assert kept.table.num_rows == 6
  assert kept.table.filter(pa.array(kept.good)).equals(dropped.table)
  assert [e.row for e in kept.errors] == [e.row for e in dropped.errors]
  assert kept.bad == dropped.bad
  hashes = key_hash(kept.table)
  assert hashes[kept.good].tolist() == key_hash(dropped.table).tolist()
  assert hashes.dtype == np.uint64 and len(hashes) == 6

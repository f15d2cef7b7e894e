"""beam_tfrecords/encoding/steps.py, on values: Grouped rows -> steps, as
columns (the first half of grouped sequences)."""

from beam_tfrecords.encoding import StepEncoder

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

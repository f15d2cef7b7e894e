"""beam_tfrecords/encoding/assembler.py, on values: One group's steps -> its
SequenceExample(s), in Python. No Beam here."""

import random

from beam_tfrecords.encoding import SequenceAssembler, StepEncoder

from tests.helpers.group_rejection import FLOAT_KEYS


def _steps(schema, rows, numbers):
  batch = StepEncoder(schema).encode_columns(
      {c: [r.get(c) for r in rows] for c in ("k", "t", "v")}, len(rows),
      row_numbers=numbers)
  ((_, steps),) = batch.groups
  return steps


def test_assembler_rejects_the_group_and_names_the_first_bad_row():
  steps = _steps(FLOAT_KEYS, [{"k": "1", "t": str(t), "v": str(t)}
                              for t in range(5)], [10, 11, 12, 13, 14])
  batches = [("b.csv", steps[:2]), ("a.csv", steps[2:])]
  bad = [("b.csv", 2, "reason b", 1), ("a.csv", 9, "reason a9", 2),
         ("a.csv", None, "reason a?", 1), ("a.csv", 8, "reason a8", 1)]
  assembler = SequenceAssembler(FLOAT_KEYS)
  results = []
  for seed in range(4):
    shuffled = list(bad)
    random.Random(seed).shuffle(shuffled)
    results.append(assembler.assemble(batches[::-1] if seed % 2 else batches,
                                      shuffled))
  assert all(r == results[0] for r in results)
  result = results[0]
  assert result.records == [] and result.rows_written == 0
  (error,) = result.errors
  assert error.rows == 5 and not error.dropped
  assert error.reason == (
      "group_rejected_because_of_row: a.csv row 8: reason a8 (5 of its rows "
      "were rejected; on_bad_step: drop_step writes the sequence without "
      "them)")
  # The group's first steps (t = 0, 1, 2).
  assert error.examples == (("b.csv", 10), ("b.csv", 11), ("a.csv", 12))


def test_assembler_under_drop_step_and_without_good_rows():
  schema = {**FLOAT_KEYS, "on_bad_step": "drop_step"}
  steps = _steps(schema, [{"k": "1", "t": str(t), "v": str(t)}
                          for t in range(3)], [1, 2, 3])
  bad = [("a.csv", 4, "reason", 1)]
  dropped = SequenceAssembler(schema).assemble([("a.csv", steps)], bad)
  plain = SequenceAssembler(FLOAT_KEYS).assemble([("a.csv", steps)])
  assert dropped.errors == [] and dropped.steps == [3]
  assert dropped.records == plain.records
  # Only bad rows (a batch sent just its marker): nothing more to reject.
  empty = SequenceAssembler(FLOAT_KEYS).assemble([("a.csv", [])], bad)
  assert empty.records == [] and empty.errors == []

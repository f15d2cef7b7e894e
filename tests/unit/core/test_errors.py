"""beam_tfrecords/core/errors.py, on values: Errors that name where the problem
is and what to do about it."""

from beam_tfrecords import BadRowsError, InputError
from beam_tfrecords.core.errors import from_worker


def test_worker_errors_keep_their_type():
  """Worker threads, processes and remote runners report an exception as
  traceback text; build() raises it as the package's own type again."""
  text = ("Traceback (most recent call last):\n  File \"x.py\", line 1\n"
          "beam_tfrecords.core.errors.InputError: /d/t.csv.gz: the gzip data ends "
          "early [while running 'ReadInputs/Read']\n")
  typed = from_worker(RuntimeError(text))
  assert isinstance(typed, InputError)
  # Without the step name Beam adds: the message is the package's own.
  assert str(typed) == "/d/t.csv.gz: the gzip data ends early"
  two_lines = from_worker(RuntimeError(
      "Traceback ...\nbeam_tfrecords.core.errors.BadRowsError: 3 rows\n  e.g. x\n"))
  assert isinstance(two_lines, BadRowsError)
  assert str(two_lines) == "3 rows\n  e.g. x"
  other = RuntimeError("ZeroDivisionError: division by zero")
  assert from_worker(other) is other

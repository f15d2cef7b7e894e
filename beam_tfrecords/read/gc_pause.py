"""Python's cycle collector paused while a batch's rows are made.

A reader that hands out one dict per record makes a batch's rows at once:
thousands of new containers (dicts, and lists for feature lists) that
hold no reference cycles. CPython's collector runs after every 700 new
containers, and as they survive, over older generations too: the whole
heap, which with TensorFlow or torch imported holds hundreds of
thousands of objects. Made with it paused, a batch is scanned once,
when it resumes.

Measured (1,010,328 flight rows on 2 cores): `btr.iter_records` of the
37,976 SequenceExamples grouped per tailnum and month took 3.06-3.84
CPU-s with the collector running and 1.72-1.81 with it off; making
8,192 per-record rows for the PyTorch `Dataset` took 1.4-1.8 µs a row,
0.7 paused.

    with paused_gc():
      rows = [...]

The collector is process-wide: it stays off for every thread while any
one pauses it (a batch's rows: milliseconds), and is left as it was
found (off stays off).
"""

import contextlib
import gc
from typing import Iterator

__all__ = ["paused_gc"]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
  """The cycle collector off inside the block, then as it was."""
  was = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    if was:
      gc.enable()

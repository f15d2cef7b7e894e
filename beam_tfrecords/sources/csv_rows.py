"""Row numbers of a CSV read unit, for the dead-letter rows.

A unit's rows are numbered from its first row (1 for a whole file; for a
byte range, the records before it counted once, when first needed), and
consecutively until a malformed record shows up; then the unit is parsed
again with Python's csv module to learn which records were malformed.
"""

import csv
import io
from typing import Any, List, Mapping, Optional

from beam_tfrecords.sources import files as file_io
from beam_tfrecords.sources.base import ReadUnit

__all__ = ["MAX_BLOCK", "RowNumbering", "first_row", "row_at"]

# Block sizes grow from 4 MiB up to this when a row does not fit.
MAX_BLOCK = 1 << 30


class RowNumbering:
  """Row numbers of a unit's good and malformed records.

  Consecutive while no malformed record has been seen. After the first
  one, the unit is parsed once with Python's csv module to find which
  records are malformed; good row g is then the g-th record that is not.
  If the two parsers disagree on the count, malformed rows get no number.
  """

  def __init__(self, unit: ReadUnit, opts: Mapping[str, Any], expected: int,
               first_row):
    self._unit = unit
    self._opts = opts
    self._expected = expected
    self._first_row = first_row  # callable: the unit's first row number
    self._base = None
    # sorted record indexes of malformed records
    self._bad: Optional[List[int]] = None
    self._walk = (0, 0, 0)  # (good rows, malformed rows, records) passed

  @property
  def irregular(self) -> bool:
    """Whether malformed records make the good rows' numbers skip."""
    return bool(self._bad)

  @property
  def base(self) -> Optional[int]:
    if self._base is None:
      self._base = self._first_row()
    return self._base

  def saw_malformed(self, count: int) -> None:
    if count and self._bad is None:
      try:
        counts = self._field_counts()
        self._bad = [k for k, c in enumerate(counts) if c != self._expected]
      except Exception:  # pylint: disable=broad-except
        self._bad = []

  def malformed_row(self, k: int) -> Optional[int]:
    if self._bad is None or k >= len(self._bad) or self.base is None:
      return None
    return self.base + self._bad[k]

  def good_rows(self, start: int, n: int) -> List[Optional[int]]:
    """Row numbers of good rows start .. start + n - 1 of the unit."""
    if n == 0:
      return []
    if not self._bad:  # None or [] (unknown: consecutive)
      base = self.base
      return ([None] * n if base is None
              else list(range(base + start, base + start + n)))
    base = self.base
    # Walk records, skipping malformed ones; calls come in order, so the
    # walk goes on from where the last one stopped.
    g, b, record = self._walk if self._walk[0] <= start else (0, 0, 0)
    bad = self._bad
    out = []
    while g < start + n:
      if b < len(bad) and bad[b] == record:
        b += 1
      else:
        if g >= start:
          out.append(None if base is None else base + record)
        g += 1
      record += 1
    self._walk = (g, b, record)
    return out

  def _field_counts(self) -> List[int]:
    unit, opts = self._unit, self._opts
    if unit.end is None:
      with file_io.open_input(unit.path) as f:
        data = f.read()
    else:
      data, _ = file_io.read_range(unit.path, unit.start, unit.end)
    text = data.decode(opts["encoding"], "replace")
    csv.field_size_limit(max(csv.field_size_limit(), MAX_BLOCK))
    quote = opts["quote_char"] or None
    rows = csv.reader(io.StringIO(text, newline=""),
                      delimiter=opts["delimiter"], quotechar=quote,
                      quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE)
    counts = [len(r) for r in rows if r]  # pyarrow skips empty lines
    if opts["header"] and unit.start == 0:
      counts = counts[1:]
    return counts


def row_at(numbering: RowNumbering, good: int) -> Optional[int]:
  """The row number of good row `good` of a unit whose rows are
  consecutive (None: unknown)."""
  base = numbering.base
  return None if base is None else base + good


def first_row(path: str, start: int, header_lines: int) -> int:
  """The data row number of the first record at or after byte `start`."""
  if start == 0:
    return 1  # the header, if any, is skipped by the reader
  # Records, like pyarrow counts them: empty lines do not count.
  return file_io.count_records_before(path, start) - header_lines + 1

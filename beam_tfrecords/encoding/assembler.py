"""One group's steps -> its SequenceExample(s), in Python. No Beam here.

`SequenceAssembler.assemble` orders the steps of one group (Python
values, `encoding.grouped_sequences.Step`), checks the context, applies
`max_length` and writes the record(s), or says why the group is not
written (`GroupError`). It is the reference
for `encoding.groups.GroupAssembler`, which does the same for many groups
at once with Arrow and numpy, and hands it the groups that need an error
message (the rare ones: rejected, truncated, too large, conflicting).
"""

import heapq
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from beam_tfrecords.encoding import record_bytes, wire
from beam_tfrecords.encoding.grouped_sequences import (ENTRY_OVERHEAD,
                                                       GROUP_REJECTED,
                                                       STEP_OVERHEAD, BadRows,
                                                       GroupError, GroupResult,
                                                       Step, StepEntry)
from beam_tfrecords.encoding.sequences import SchemaSource, check_sequence
from beam_tfrecords.schema import Derive, Overflow
from beam_tfrecords.schema.model import OnBadStep

__all__ = ["SequenceAssembler"]

# A group's steps as they come: (source path, steps) per batch.
Batches = Iterable[Tuple[str, Sequence[Step]]]

def _show_feature(value: Optional[bytes]) -> str:
  from beam_tfrecords.core.tfrecord_files import decode_feature  # only for messages
  if value is None:
    return "missing"
  kind, values = decode_feature(value)
  shown = [v.decode("utf-8", "backslashreplace") if isinstance(v, bytes)
           else v for v in values]
  return repr(shown[0]) if len(shown) == 1 else repr(shown)


def _where(entry: StepEntry) -> Tuple[str, Optional[int]]:
  return (entry.path, entry.row)


class SequenceAssembler:
  """Orders the steps of one group and writes its SequenceExample(s).

  Args:
    schema: the SequenceExample schema with group_by.
  """

  EXAMPLES = 3  # (source, row) examples kept per group error

  def __init__(self, schema: SchemaSource):
    self._schema = check_sequence(schema)
    s = self._schema
    row_read = [f for f in s.context if f.column is not None]
    self._ctx_index = {f.name: i for i, f in enumerate(row_read)}
    self._constant = [f for f in row_read if f.derive is None]
    descending = [k.descending for k in s.order_by]

    def key(entry: StepEntry) -> tuple:
      # Unpacked, not entry.order: this runs once per step of every sort.
      order, features, context, row, path = entry
      if any(descending):
        order = tuple(_descending(v) if d else v
                      for v, d in zip(order, descending))
      # Ties: the step's serialized values, then its context values
      # (missing sorts first), so no record depends on input order; last
      # the row's place (steps equal in all values write the same bytes
      # either way; this only fixes which rows errors/ names).
      return (order, features, tuple((c is not None, c or b"")
                                     for c in context),
              path, -1 if row is None else row)
    # Steps sort by the order_by values, then (ties) by their own values.
    self._key = key

  def __reduce__(self):
    return (SequenceAssembler, (self._schema.to_dict(),))

  def assemble(self, batches: Batches, bad: Sequence[BadRows] = ()
               ) -> GroupResult:
    """One group's steps, in batches of (source path, steps).

    `bad` are the group's rows that could not become steps (they are in
    errors/ already), as BadRows or tuples of its fields; under
    on_bad_step: reject_group, any of them rejects the group's other rows
    too.
    `batches` is iterated more than once (Beam's grouped values allow it).
    Under overflow reject / keep_first / keep_last, memory stays bounded
    by max_length steps (plus what the runner holds); without max_length
    or with split, the group's steps are held and sorted in memory.
    """
    s = self._schema
    n = sum(len(steps) for _, steps in batches)
    if n == 0:
      return GroupResult([], [], [])
    if bad and s.on_bad_step is OnBadStep.REJECT_GROUP:
      return GroupResult([], [], [self._rejected_for(batches, bad, n)])
    # The steps one record may hold (all of them without max_length).
    max_len = n if s.max_length is None else s.max_length
    over = n > max_len
    if over and s.overflow is Overflow.REJECT:
      first = heapq.nsmallest(self.EXAMPLES, self._entries(batches),
                              key=self._key)
      return GroupResult([], [], [GroupError(
          rows=n, reason=f"the group has {n:,} rows, more than max_length "
          f"{max_len:,} (overflow: reject); raise max_length or choose "
          "overflow: split / keep_first / keep_last",
          examples=tuple(_where(e) for e in first))])
    if self._constant and self._varies(self._entries(batches)):
      # Rare: sort so the message names the same two rows on every run.
      entries = sorted(self._entries(batches), key=self._key)
      return GroupResult([], [], [self._context_conflict(entries)])
    errors = []
    if over and s.overflow is not Overflow.SPLIT:
      keep_last = s.overflow is Overflow.KEEP_LAST
      # The dropped steps are the n - max_len at the other end; a few of
      # them (the nearest to the kept ones) are named as examples.
      shown = min(self.EXAMPLES, n - max_len)
      if keep_last:
        kept = heapq.nlargest(max_len, self._entries(batches), key=self._key)
        kept.reverse()
        gone = heapq.nlargest(max_len + shown, self._entries(batches),
                              key=self._key)[max_len:]
      else:
        kept = heapq.nsmallest(max_len, self._entries(batches), key=self._key)
        gone = heapq.nsmallest(max_len + shown, self._entries(batches),
                               key=self._key)[max_len:]
      errors.append(GroupError(
          rows=n - max_len, dropped=True,
          reason=f"max_length {max_len:,} (overflow: {s.overflow.value}) "
          f"left out the {'first' if keep_last else 'last'} "
          f"{n - max_len:,} of {n:,} steps",
          examples=tuple(_where(e) for e in gone)))
      pieces = [kept]
    else:
      entries = sorted(self._entries(batches), key=self._key)
      step = max_len if over else n
      pieces = [entries[i:i + step] for i in range(0, n, step)]
    records, steps = [], []
    for index, piece in enumerate(pieces):
      size = self._size_bound(piece)
      if size > s.max_record_bytes:
        errors.append(GroupError(
            rows=len(piece), reason=f"the sequence would be about "
            f"{size:,} bytes, over max_record_bytes {s.max_record_bytes:,}; "
            "set max_length with overflow: split",
            examples=tuple(_where(e) for e in piece[:self.EXAMPLES])))
        continue
      records.append(self._record(piece, index))
      steps.append(len(piece))
    return GroupResult(records, steps, errors)

  def _rejected_for(self, batches: Batches, bad: Sequence[BadRows], n: int
                    ) -> GroupError:
    """The error of a group rejected because some of its rows were."""
    marks = [BadRows._make(b) for b in bad]  # plain tuples too
    # The smallest (source, row) names the group's bad row, whatever order
    # the batches came in.
    path, row, reason, _ = min(marks, key=lambda b: (
        b.path, b.row is None, b.row or 0, b.reason))
    count = sum(b.rows for b in marks)
    more = f"{count:,} of its rows were rejected; " if count > 1 else ""
    first = heapq.nsmallest(self.EXAMPLES, self._entries(batches),
                            key=self._key)
    return GroupError(
        rows=n, reason=f"{GROUP_REJECTED}: {_place(path, row)}: {reason} "
        f"({more}on_bad_step: drop_step writes the sequence without "
        f"{'them' if count > 1 else 'it'})",
        examples=tuple(_where(e) for e in first))

  def _size_bound(self, piece: List[StepEntry]) -> int:
    """At least the serialized size of the record `piece` makes."""
    s = self._schema
    size = sum(len(f) + STEP_OVERHEAD for e in piece for f in e.features)
    size += sum(len(c) for c in piece[0].context if c is not None)
    size += sum(len(c) for c in piece[-1].context if c is not None)
    size += sum(len(f.name.encode("utf-8")) + ENTRY_OVERHEAD
                for f in s.context + s.sequence)
    return size + 2 * ENTRY_OVERHEAD

  @staticmethod
  def _entries(batches: Batches) -> Iterator[StepEntry]:
    """Each step with its source path (a fresh pass each call)."""
    for path, steps in batches:
      for step in steps:
        yield StepEntry._make(step + (path,))  # faster than StepEntry(...)

  def _varies(self, entries: Iterable[StepEntry]) -> bool:
    """Whether a context value that must be constant is not (one pass)."""
    columns = [self._ctx_index[f.name] for f in self._constant]
    first = None
    for e in entries:
      values = [e.context[j] for j in columns]
      if first is None:
        first = values
      elif values != first:
        return True
    return False

  def _context_conflict(self, entries: List[StepEntry]) -> GroupError:
    """The error of a group whose context values differ (`_varies`)."""
    for f in self._constant:
      j = self._ctx_index[f.name]
      first = entries[0].context[j]
      for e in entries:
        if e.context[j] != first:
          return GroupError(
              rows=len(entries),
              reason=f'context feature "{f.name}" differs inside the group: '
              f"{_show_feature(first)} ({_where_text(entries[0])}) vs "
              f"{_show_feature(e.context[j])} ({_where_text(e)}); make it a "
              "sequence feature, or declare derive: first / last to take "
              "the value of the first / last step",
              examples=(_where(entries[0]), _where(e)))
    raise ValueError("the group's context values do not differ")

  def _record(self, piece: List[StepEntry], index: int) -> bytes:
    s = self._schema
    context: List[Tuple[str, bytes]] = []
    for f in s.context:
      if f.derive is Derive.LENGTH or f.derive is Derive.PART:
        number = len(piece) if f.derive is Derive.LENGTH else index
        context.append((f.name, record_bytes.frame(
            0x1A, record_bytes.frame(0x0A, wire.varint_bytes(number)))))
        continue
      j = self._ctx_index[f.name]
      value = (piece[-1] if f.derive is Derive.LAST else piece[0]).context[j]
      if value is not None:
        context.append((f.name, value))
    lists = [(f.name, [e.features[i] for e in piece])
             for i, f in enumerate(s.sequence)]
    return record_bytes.sequence_example_bytes(
        wire.sorted_by_name(context), wire.sorted_by_name(lists))


class _Reversed:
  """Wraps a value so that it sorts in reverse (descending bytes keys)."""
  __slots__ = ("v",)

  def __init__(self, v):
    self.v = v

  def __eq__(self, other):
    return self.v == other.v

  def __lt__(self, other):
    return other.v < self.v


def _descending(value):
  return -value if isinstance(value, (int, float)) else _Reversed(value)


def _where_text(entry: StepEntry) -> str:
  return _place(entry.path, entry.row)


def _place(path: str, row: Optional[int]) -> str:
  return f"{path} row {row}" if row is not None else path

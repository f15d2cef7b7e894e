"""Grouped rows -> SequenceExamples: the path, and what travels on it.

A SequenceExample schema with `group_by` makes one sequence per group of
rows, in three steps (no Beam here; `transforms.grouped` wires them):

1. `encoding.steps.StepEncoder` turns each row into one step, keyed by the
   group key: its `order_by` values, the serialized Feature of each
   sequence feature and of each context feature read from rows;
2. the runner brings the steps of a key together (a GroupByKey);
3. `encoding.groups.GroupAssembler` orders the steps of many groups at
   once, checks the context, applies `max_length` and writes the records;
   `encoding.assembler.SequenceAssembler` does the same for one group (the
   reference), and writes the groups that need an error message.

Steps inside a group are ordered by the `order_by` values, then, where
those tie, by the step's own serialized values: the result depends only on
the rows, not on file order, runner or worker count.

A group with a rejected row (one that could not become a step, though its
group key was read) is rejected whole unless the schema says
`on_bad_step: drop_step`: a sequence with a gap in it is not written.

Context values must be the same on every row of a group. When they are not,
the whole group goes to the dead-letter output with both values and where
they came from; a feature declared `derive: first` / `derive: last` takes
the value of the first / last step instead.

This module holds the values that pass between those steps.
"""

import dataclasses
from typing import Iterator, List, NamedTuple, Optional, Tuple

import numpy as np

from beam_tfrecords.encoding.ragged import Ragged

__all__ = ["Step", "StepEntry", "BadStep", "BadRows", "GroupError",
           "GroupResult", "GroupedRecords", "GROUP_REJECTED", "STEP_OVERHEAD",
           "ENTRY_OVERHEAD"]


class Step(NamedTuple):
  """One step of a grouped sequence, as Python values (the reference,
  `SequenceAssembler`, takes a group's steps so).

  Attributes:
    order: the order_by values.
    features: the serialized Feature of each sequence feature (schema
      order).
    context: the serialized Feature of each context feature read from rows
      (schema order), None where missing.
    row: the row's number in its file (None: not known).
  """
  order: tuple
  features: Tuple[bytes, ...]
  context: Tuple[Optional[bytes], ...]
  row: Optional[int]


class StepEntry(NamedTuple):
  """A Step and the path of the file its row came from: what the
  reference orders, and names in messages."""
  order: tuple
  features: Tuple[bytes, ...]
  context: Tuple[Optional[bytes], ...]
  row: Optional[int]
  path: str


class BadStep(NamedTuple):
  """A row that could not become a step, though its group key was read:
  its group is incomplete."""
  key: tuple   # the group key, stored values in group_by order
  row: int     # the row's index in its batch
  reason: str


class BadRows(NamedTuple):
  """Rows of a group that could not become steps, as one batch reports
  them."""
  path: str             # the source file
  row: Optional[int]    # the row number of the first
  reason: str           # its reason
  rows: int             # how many rows


# How the reason of a group rejected for one of its rows starts.
GROUP_REJECTED = "group_rejected_because_of_row"

# Upper bounds of the framing bytes around a step's Feature (tag + length)
# and around a map entry (tags, lengths), for the record size check.
STEP_OVERHEAD = 11
ENTRY_OVERHEAD = 33


@dataclasses.dataclass(frozen=True)
class GroupError:
  """Rows of a group that are not in a record, and why.

  Attributes:
    rows: how many input rows this accounts for.
    reason: what happened, for a person.
    dropped: True when a declared policy (keep_first / keep_last) left the
      rows out; False when they were rejected.
    examples: up to a few (source, row) of the rows concerned.
  """
  rows: int
  reason: str
  dropped: bool = False
  examples: Tuple[Tuple[str, Optional[int]], ...] = ()


@dataclasses.dataclass
class GroupResult:
  """What one group became.

  Attributes:
    records: serialized SequenceExamples (several with overflow: split).
    steps: the number of steps in each record.
    errors: the group's rows that are in no record.
  """
  records: List[bytes]
  steps: List[int]
  errors: List[GroupError]

  @property
  def rows_written(self) -> int:
    return sum(self.steps)


@dataclasses.dataclass
class GroupedRecords:
  """The records of many groups, in group key order.

  Attributes:
    keys: the group key of each group with records, ascending.
    records: every record, group after group.
    offsets: len(keys) + 1 offsets of each group's first record.
    steps: the steps in each record.
    errors: (group key, GroupError) of the groups' rows in no record, in
      key order.
    hashes: the sink's stable hash of each key (sinks.shards.stable_hash),
      when the producer computed them (in parallel); None: the sink does.
  """
  keys: List[tuple]
  records: Ragged
  offsets: np.ndarray
  steps: np.ndarray
  errors: List[Tuple[tuple, GroupError]]
  hashes: Optional[np.ndarray] = None

  def __len__(self) -> int:
    return len(self.keys)

  def __iter__(self) -> Iterator[bytes]:
    """The records, as bytes (a batch's items, for sinks that take them
    one by one)."""
    return iter(self.records.to_list())

  def batches(self) -> Iterator[Tuple[tuple, List[bytes]]]:
    """(key, [record]) per group."""
    records = self.records.to_list()
    o = self.offsets.tolist()
    for i, key in enumerate(self.keys):
      yield key, records[o[i]:o[i + 1]]

  @property
  def rows_written(self) -> int:
    return int(self.steps.sum())

"""Record batches (or rows) -> serialized tf.train.Example. No Beam here.

`ExampleEncoder(schema).encode(record_batch)` returns the serialized records
of the rows that encode, in row order, and the rows that do not, each with
its reasons. An encoder pickles as the schema dict it was built from.
"""

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from beam_tfrecords.encoding import columns as col
from beam_tfrecords.encoding import messages, wire
from beam_tfrecords.encoding.ragged import Ragged
from beam_tfrecords.encoding.stats import column_stats
from beam_tfrecords.schema import Feature, FeatureType, Schema, load_schema

__all__ = ["RowError", "EncodedBatch", "ExampleEncoder", "row_errors"]


@dataclasses.dataclass(frozen=True)
class RowError:
  """Why one input row was not encoded.

  Attributes:
    row: the row's index in the batch it came from.
    problems: (feature, reason) pairs, in feature order.
  """
  row: int
  problems: Tuple[Tuple[str, str], ...]

  @property
  def reason(self) -> str:
    return "; ".join(f'In feature "{f}": {r}' for f, r in self.problems)


def row_errors(problems: Dict[int, List[Tuple[str, str]]]) -> List[RowError]:
  """RowErrors from row -> [(feature, reason)], in row order."""
  return [RowError(row=r, problems=tuple(p))
          for r, p in sorted(problems.items())]


@dataclasses.dataclass
class EncodedBatch:
  """The result of encoding one batch.

  Attributes:
    records: serialized records of the rows that encoded, in row order.
    rows: the input row index of each record.
    errors: the rows that did not encode.
    steps: for SequenceExamples, the number of steps of each record.
    dropped_steps: steps left out by a max_length policy (keep_first/last).
  """
  records: Ragged
  rows: np.ndarray
  errors: List[RowError]
  steps: Optional[np.ndarray] = None
  dropped_steps: int = 0
  # feature name -> encoding.stats.column_stats of the written records
  # (when asked for).
  stats: Optional[Dict[str, dict]] = None

  @property
  def rows_written(self) -> int:
    """Input rows that are in a record (a split row counts once)."""
    return len(np.unique(self.rows)) if self.steps is not None \
        else len(self.rows)

  def record_list(self) -> List[bytes]:
    return self.records.to_list()


class ExampleEncoder:
  """Encodes rows as tf.train.Example the way a schema says.

  Args:
    schema: a Schema, a schema dict or a path to a schema file.
  """

  def __init__(self, schema):
    self._schema: Schema = load_schema(schema)

  @property
  def schema(self) -> Schema:
    return self._schema

  def __reduce__(self):
    return (ExampleEncoder, (self._schema.to_dict(),))

  def encode(self, batch: pa.RecordBatch) -> EncodedBatch:
    """Encodes an Arrow RecordBatch (or Table) whose columns are the sources."""
    return self.encode_columns(col.batch_columns(batch), batch.num_rows)

  def encode_columns(self, columns: Mapping[str, Any], num_rows: int,
                     stats: bool = False) -> EncodedBatch:
    """Encodes columns (pa.Array, or lists of Python values) by name;
    with `stats`, also describes each feature of the written records."""
    converted = [(feature,) + col.convert_input(feature, columns, num_rows)
                 for feature in self._schema.features]
    return self._assemble(converted, num_rows, stats)

  def encode_rows(self, rows: Sequence[Mapping[str, Any]]) -> EncodedBatch:
    """Encodes Python dicts (column -> value) value by value."""
    converted = []
    for feature in self._schema.features:
      cells = [col.input_of(feature, row) for row in rows]
      converted.append((feature,) + col.convert_cells(feature, cells))
    return self._assemble(converted, len(rows))

  def _assemble(self, converted, n: int, stats: bool = False
                ) -> EncodedBatch:
    problems: Dict[int, List[Tuple[str, str]]] = {}
    finished: List[Tuple[Feature, pa.LargeListArray]] = []
    for feature, lists, errors in converted:
      lists = col.apply_missing(feature, lists, errors)
      for row, reason in errors.items():
        problems.setdefault(row, []).append((feature.name, reason))
      finished.append((feature, lists))
    good = np.ones(n, dtype=bool)
    if problems:
      good[list(problems)] = False
    rows = np.nonzero(good)[0]
    keep = None if good.all() else pa.array(good)
    fields = []
    described: Dict[str, dict] = {}
    for feature, lists in finished:
      if keep is not None:
        lists = lists.filter(keep)
      if stats:
        described[feature.name] = column_stats(feature, lists)
      present = lists.is_valid().to_numpy(zero_copy_only=False)
      fields.append(messages.Field(feature.name,
                                   messages.typed(feature, lists), present))
    records = messages.examples(wire.sorted_by_name(fields), len(rows))
    return EncodedBatch(records=records, rows=rows,
                        errors=row_errors(problems),
                        stats=described if stats else None)

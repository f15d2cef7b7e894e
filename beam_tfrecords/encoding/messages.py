"""Whole batches of Features, Examples and SequenceExamples from typed
columns: one contract, two paths.

A `Column` is a batch's column not yet encoded (flat values and n+1 row
offsets, as Arrow holds them). The functions here give the serialized
messages of every row as one `Ragged`, by the native core where it is
installed (`core.native`) and by the pure-Python reference (`wire`)
otherwise; both give the same bytes for every input
(tests/unit/encoding/test_messages.py checks them against each other
over random schemas).

    cols = [Field("x", int64_column(values, offsets), present), ...]
    examples(sorted_by_name(cols), n)        # Ragged: one Example per row
"""

from typing import List, NamedTuple, Optional, Sequence

import numpy as np
import pyarrow as pa

from beam_tfrecords.core import native
from beam_tfrecords.encoding import wire
from beam_tfrecords.encoding.ragged import Ragged, masked
from beam_tfrecords.schema import Feature, FeatureType

__all__ = ["INT64", "FLOAT", "BYTES", "RAW", "STEPS", "Column", "Field",
           "typed", "int64_column", "raw_column", "steps_column",
           "feature_values", "packed_values", "unpacked_values", "examples",
           "sequence_examples"]

# Column kinds (beam_tfrecords_native's numbering).
INT64, FLOAT, BYTES, RAW, STEPS = range(5)

_I64 = np.int64


class Column(NamedTuple):
  """One column of a batch, not yet encoded.

  Row i holds:
    INT64, FLOAT  values[offsets[i]:offsets[i+1]] (int64 / float32)
    BYTES         values offsets[i]..offsets[i+1], value j being
                  data[value_offsets[j]:value_offsets[j+1]]
    RAW           data[offsets[i]:offsets[i+1]], already serialized
    STEPS         serialized step Features offsets[i]..offsets[i+1], step s
                  being data[value_offsets[s]:value_offsets[s+1]]
  Its value in a message is a Feature (INT64, FLOAT, BYTES), the bytes as
  they are (RAW) or a FeatureList body (STEPS).
  """
  kind: int
  offsets: np.ndarray
  data: np.ndarray                       # values, or uint8 data
  value_offsets: Optional[np.ndarray] = None

  @property
  def rows(self) -> int:
    return len(self.offsets) - 1


class Field(NamedTuple):
  """A column as an entry of a map (Features, FeatureLists)."""
  name: str
  column: Column
  present: np.ndarray  # bool per row: False leaves the entry out


def _contiguous(a, dtype) -> np.ndarray:
  return np.require(np.asarray(a), dtype=dtype, requirements=["C", "A"])


def int64_column(values: np.ndarray, offsets: np.ndarray) -> Column:
  return Column(INT64, _contiguous(offsets, _I64), _contiguous(values, _I64))


def raw_column(ragged: Ragged) -> Column:
  """Bytes already serialized (a Feature per row, say)."""
  return Column(RAW, _contiguous(ragged.offsets, _I64),
                _contiguous(ragged.buf, np.uint8))


def steps_column(steps: Ragged, offsets: np.ndarray) -> Column:
  """FeatureLists from serialized step Features: row i holds steps
  offsets[i]..offsets[i+1]."""
  return Column(STEPS, _contiguous(offsets, _I64),
                _contiguous(steps.buf, np.uint8),
                _contiguous(steps.offsets, _I64))


def typed(feature: Feature, lists: pa.LargeListArray) -> Column:
  """A converted column (`columns.convert_input`'s large_list) by its
  feature's type: int64, float32 or bytes values."""
  offsets = _contiguous(lists.offsets, _I64)
  values = lists.values
  if feature.type is FeatureType.INT64:
    return Column(INT64, offsets, _contiguous(
        values.to_numpy(zero_copy_only=False), _I64))
  if feature.type is FeatureType.FLOAT:
    return Column(FLOAT, offsets, _contiguous(
        values.to_numpy(zero_copy_only=False), "<f4"))
  buffers = values.buffers()
  value_offsets = np.frombuffer(buffers[1], dtype=_I64)[
      values.offset:values.offset + len(values) + 1]
  data = (np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None
          else np.empty(0, dtype=np.uint8))
  return Column(BYTES, offsets, data, _contiguous(value_offsets, _I64))


def _reference(column: Column, present: Optional[np.ndarray]) -> wire.Message:
  """The column's values by the pure-Python path (wire)."""
  kind, offsets = column.kind, column.offsets
  if kind == INT64:
    return wire.int64_feature(column.data, offsets, present)
  if kind == FLOAT:
    return wire.float_feature(column.data, offsets, present)
  if kind == BYTES:
    assert column.value_offsets is not None
    return wire.bytes_feature(column.data, column.value_offsets, offsets,
                              present)
  if kind == RAW:
    ragged = Ragged(column.data, offsets)
  else:
    assert column.value_offsets is not None
    ragged = wire.feature_lists(Ragged(column.data, column.value_offsets),
                                offsets)
  return ragged if present is None else masked(ragged, present)


def _native_column(name: str, column: Column,
                   present: Optional[np.ndarray]) -> tuple:
  return (name.encode("utf-8"), column.kind, column.offsets,
          None if present is None else present.view(np.uint8),
          column.data, column.value_offsets)


def _mask(present) -> Optional[np.ndarray]:
  """None for every row present, else a contiguous bool array."""
  present = np.ascontiguousarray(present, dtype=bool)
  return None if present.all() else present


def feature_values(column: Column, present: Optional[np.ndarray] = None
                   ) -> Ragged:
  """The column's value per row with no key (a Feature, the bytes as they
  are, or a FeatureList body); empty where `present` is False."""
  n = column.rows
  mask = None if present is None else _mask(present)
  module = native.core()
  if module is None:
    return wire.materialize(_reference(column, mask))
  data, offsets = module.values(n, _native_column("", column, mask))
  return Ragged(np.frombuffer(data, dtype=np.uint8),
                np.frombuffer(offsets, dtype=_I64))


def packed_values(columns: Sequence[Column], n: int) -> Ragged:
  """Per row, every column's value (as `feature_values` gives it) packed
  into one byte string: the varint of its length, then its bytes, column
  after column (the steps of the grouped path travel so: one column for
  all their Features)."""
  module = native.core()
  if module is None:
    if not columns:
      return Ragged(np.empty(0, np.uint8), np.zeros(n + 1, _I64))
    return wire.packed([wire.materialize(_reference(c, None))
                        for c in columns])
  data, offsets = module.packed_values(
      n, [_native_column("", c, None) for c in columns])
  return Ragged(np.frombuffer(data, dtype=np.uint8),
                np.frombuffer(offsets, dtype=_I64))


def unpacked_values(rows: Ragged, k: int) -> List[Ragged]:
  """`packed_values`' k columns back, each as a Ragged of its values; a
  row that is not k packed values is a ValueError."""
  module = native.core()
  if module is None:
    return wire.unpacked(rows, k)
  data, offsets, starts = module.unpacked_values(
      _contiguous(rows.buf, np.uint8), _contiguous(rows.offsets, _I64), k)
  buf = np.frombuffer(data, dtype=np.uint8)
  offsets = np.frombuffer(offsets, dtype=_I64).reshape(k, len(rows) + 1)
  return [Ragged(buf[starts[c]:starts[c + 1]], offsets[c]) for c in range(k)]


def _encoded(module, groups, n: int, omit_empty: bool) -> Ragged:
  data, offsets = module.encode(n, [
      (tag, [_native_column(f.name, f.column, _mask(f.present))
             for f in fields]) for tag, fields in groups], omit_empty)
  return Ragged(np.frombuffer(data, dtype=np.uint8),
                np.frombuffer(offsets, dtype=_I64))


def _entries(fields: Sequence[Field]):
  return [wire.Entry(f.name, _reference(f.column, None), f.present)
          for f in fields]


def examples(fields: Sequence[Field], n: int) -> Ragged:
  """A serialized tf.train.Example per row; `fields` sorted by name
  (`wire.sorted_by_name`)."""
  module = native.core()
  if module is None:
    return wire.example_message(_entries(fields), n)
  return _encoded(module, [(0x0A, fields)], n, omit_empty=False)


def sequence_examples(context: Sequence[Field], lists: Sequence[Field],
                      n: int) -> Ragged:
  """A serialized tf.train.SequenceExample per row: `context` Features and
  `lists` (STEPS or RAW FeatureList bodies), each sorted by name."""
  module = native.core()
  if module is None:
    return wire.sequence_example_message(_entries(context), _entries(lists),
                                         n)
  return _encoded(module, [(0x0A, context), (0x12, lists)], n,
                  omit_empty=True)


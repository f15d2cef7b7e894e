"""Serialized tf.train.SequenceExamples -> tfx-bsl's Arrow RecordBatch
(what TFT's TensorAdapter reads), with int64 feature lists whole.

    decode = SequenceBatchDecoder(tfmd_schema).DecodeBatch
    batch = decode(records)      # tfx-bsl's layout and types

tfx-bsl's SequenceExamplesToRecordBatchDecoder keeps only the low 32 bits
of int64 feature list values (2**31 comes back as -2**31, 2**40 + 5 as
5; context values are whole). Its batch is kept as it is but for those
columns, which are made again from the records: by the native core
(decode_sequence_examples) where it is installed and the records are in
its layout, else a record at a time in pure Python
(read.sequence_columns). Absent feature lists stay null, as tfx-bsl
gives them.
"""

from typing import Dict, List, Sequence, Tuple

import numpy as np
import pyarrow as pa

from beam_tfrecords.core import native
from beam_tfrecords.read.sequence_columns import sequence_example

__all__ = ["SequenceBatchDecoder"]

# TFMD's FeatureType -> the native core's codes (decode.rs, Kind).
_CODES = {2: 0, 3: 1, 1: 2}  # INT, FLOAT, BYTES


class SequenceBatchDecoder:
  """tfx-bsl's SequenceExample decoder of a TFMD schema (serialized),
  its int64 feature lists made whole."""

  def __init__(self, tfmd_schema: bytes):
    # pylint: disable=import-outside-toplevel
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx_bsl.coders import sequence_example_coder
    from beam_tfrecords.schema.tfmd import SEQUENCE_FEATURE
    self._tfx = sequence_example_coder.SequenceExamplesToRecordBatchDecoder(
        SEQUENCE_FEATURE, tfmd_schema)
    schema = schema_pb2.Schema.FromString(tfmd_schema)
    self._context = [(f.name, f.type) for f in schema.feature
                     if f.name != SEQUENCE_FEATURE]
    self._lists = [(c.name, c.type) for f in schema.feature
                   if f.name == SEQUENCE_FEATURE
                   for c in f.struct_domain.feature]
    self._ints = [name for name, kind in self._lists if kind == 2]
    self._column = SEQUENCE_FEATURE

  def DecodeBatch(self, records: Sequence[bytes]) -> pa.RecordBatch:  # pylint: disable=invalid-name
    """tfx-bsl's DecodeBatch, int64 feature lists whole."""
    batch = self._tfx.DecodeBatch(list(records))
    if not self._ints or not records or \
        self._column not in batch.schema.names:
      return batch
    whole = self._native(records)
    if whole is None:
      whole = self._python(records)
    at = batch.schema.get_field_index(self._column)
    lists = batch.column(at)
    names = [lists.type.field(i).name for i in range(lists.type.num_fields)]
    fields = [whole[name].cast(lists.field(i).type) if name in whole
              else lists.field(i) for i, name in enumerate(names)]
    made = pa.StructArray.from_arrays(
        fields, fields=[lists.type.field(i) for i in range(len(names))],
        mask=lists.is_null() if lists.null_count else None)
    return batch.set_column(at, batch.schema.field(at), made)

  def _native(self, records: Sequence[bytes]
              ) -> "Dict[str, pa.Array] | None":
    """The int64 feature lists by the native core, or None."""
    module = native.core()
    if module is None or any(k not in _CODES for _, k in
                             self._context + self._lists):
      return None
    try:
      got = module.decode_sequence_examples(
          [bytes(r) for r in records],
          [n.encode("utf-8") for n, _ in self._context],
          bytes(_CODES[k] for _, k in self._context),
          [n.encode("utf-8") for n, _ in self._lists],
          bytes(_CODES[k] for _, k in self._lists))
    except ValueError:
      return None
    if isinstance(got, str):
      return None
    out = {}
    for (name, _), (steps, lengths, data, _, present) in zip(self._lists,
                                                             got[1]):
      if name in self._ints:
        out[name] = _lists(np.frombuffer(steps, "<i8"),
                           np.frombuffer(present, np.bool_),
                           np.frombuffer(lengths, "<i8"),
                           np.frombuffer(data, "<i8"))
    return out

  def _python(self, records: Sequence[bytes]) -> Dict[str, pa.Array]:
    """The int64 feature lists, a record at a time in pure Python (tfx-bsl
    read the records: they are SequenceExamples of the schema's kinds)."""
    found: Dict[str, Tuple[List[int], List[bool], List[int], List[int],
                           List[bool]]] = {
                               name: ([], [], [], [], [])
                               for name in self._ints}
    for record in records:
      lists = sequence_example(bytes(record))[1]
      for name, (steps, present, lengths, values, empty) in found.items():
        mine = lists.get(name)
        present.append(mine is not None)
        steps.append(len(mine or ()))
        for kind, step in mine or ():
          lengths.append(len(step))
          values.extend(step)
          empty.append(kind is None)  # a Feature without a list: null
    return {name: _lists(np.array(s, np.int64), np.array(p, np.bool_),
                         np.array(n, np.int64), np.array(v, np.int64),
                         np.array(e, np.bool_))
            for name, (s, p, n, v, e) in found.items()}


def _lists(steps: np.ndarray, present: np.ndarray, lengths: np.ndarray,
           values: np.ndarray, empty: "np.ndarray | None" = None
           ) -> pa.Array:
  """large_list<large_list<int64>>: steps per record (null where absent),
  values per step (null where a step's Feature holds no list, as
  tfx-bsl gives it)."""
  inner = pa.LargeListArray.from_arrays(
      pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int64()),
      pa.array(values, pa.int64()),
      mask=pa.array(empty) if empty is not None and empty.any() else None)
  return pa.LargeListArray.from_arrays(
      pa.array(np.concatenate([[0], np.cumsum(steps)]), pa.int64()), inner,
      mask=pa.array(~present))

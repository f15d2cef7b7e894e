"""The coder of a PCollection whose elements carry a batch's records.

Beam samples the size of elements for its counters by encoding them with
their PCollection's coder. A batch's records travel as an
`encoding.ragged.Ragged` (megabytes) inside a tuple or a NamedTuple
(`core.unit_cache.KeepParts`), which FastPrimitivesCoder pickles: a
sampled element cost a copy of every record, 0.26 CPU-seconds of a
1M-row build (32 elements, 294 MB pickled). `RecordsCoder` encodes a
value as FastPrimitivesCoder does (nested, with a length before it), and
estimates a Ragged, or a list of records, from their sizes without
encoding them.

    pcoll.element_type = Records    # (runners.gaps.par_do's main output)
"""

import functools
from typing import Any

import apache_beam as beam
from apache_beam.coders import coder_impl, coders

from beam_tfrecords.encoding.ragged import Ragged

__all__ = ["Records", "RecordsCoder", "estimate"]


class Records:
  """The type (a hint only) of elements that may carry a batch's records:
  any value, coded by RecordsCoder."""


def estimate(value: Any, fast: coder_impl.CoderImpl) -> int:
  """About the bytes `fast` (FastPrimitivesCoder's impl) would encode
  `value` to: a Ragged by its buffers, a tuple holding one by its items,
  anything else encoded by `fast`."""
  if isinstance(value, Ragged):
    # (a pickled Ragged adds about 300 bytes to its buffers)
    return value.buf.nbytes + value.offsets.nbytes + 300
  if isinstance(value, tuple) and any(isinstance(v, (Ragged, list))
                                      for v in value):
    return 2 + sum(estimate(v, fast) for v in value)
  if isinstance(value, list) and value and all(
      type(v) is bytes for v in value):  # records as a list (kept_records)
    # (pickle: an opcode, the length in 1 or 4 bytes, a memo opcode)
    return 5 + sum(len(v) + (3 if len(v) < 256 else 6) for v in value)
  return fast.estimate_size(value)


class RecordsCoder(coders.Coder):
  """FastPrimitivesCoder's bytes (a length before them where nested);
  `estimate` for the size of a value."""

  def _create_impl(self):
    fast = coders.FastPrimitivesCoder().get_impl()
    return coder_impl.CallbackCoderImpl(
        fast.encode, fast.decode, functools.partial(estimate, fast=fast))

  def encode(self, value: Any) -> bytes:
    return self.get_impl().encode(value)

  def decode(self, encoded: bytes) -> Any:
    return self.get_impl().decode(encoded)

  def is_deterministic(self) -> bool:
    return False

  def to_type_hint(self):
    return Records

  def __eq__(self, other) -> bool:
    return type(self) is type(other)

  def __hash__(self) -> int:
    return hash(type(self))


beam.coders.registry.register_coder(Records, RecordsCoder)

"""Rows / Arrow record batches -> serialized records. No Beam import here."""

from beam_tfrecords.encoding.example import (EncodedBatch, ExampleEncoder,
                                             RowError)
from beam_tfrecords.encoding.assembler import SequenceAssembler
from beam_tfrecords.encoding.grouped_sequences import GroupError, GroupResult
from beam_tfrecords.encoding.list_sequences import SequenceEncoder
from beam_tfrecords.encoding.steps import StepBatch, StepEncoder

__all__ = ["EncodedBatch", "ExampleEncoder", "GroupError", "GroupResult",
           "RowError", "SequenceAssembler", "SequenceEncoder", "StepBatch",
           "StepEncoder"]

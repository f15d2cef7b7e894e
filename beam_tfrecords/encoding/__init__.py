"""Rows / Arrow record batches -> serialized records. No Beam import here."""

from beam_tfrecords.encoding.example import EncodedBatch, ExampleEncoder, RowError
from beam_tfrecords.encoding.assembler import (GroupError, GroupResult,
                                               SequenceAssembler)
from beam_tfrecords.encoding.sequence import SequenceEncoder
from beam_tfrecords.encoding.steps import StepBatch, StepEncoder

__all__ = ["EncodedBatch", "ExampleEncoder", "GroupError", "GroupResult",
           "RowError", "SequenceAssembler", "SequenceEncoder", "StepBatch",
           "StepEncoder"]

"""Rows / Arrow record batches -> serialized records. No Beam import here."""

from beam_tfrecords.encoding.example import EncodedBatch, ExampleEncoder, RowError
from beam_tfrecords.encoding.sequence import (GroupError, GroupResult,
                                              SequenceAssembler,
                                              SequenceEncoder, StepBatch,
                                              StepEncoder)

__all__ = ["EncodedBatch", "ExampleEncoder", "GroupError", "GroupResult",
           "RowError", "SequenceAssembler", "SequenceEncoder", "StepBatch",
           "StepEncoder"]

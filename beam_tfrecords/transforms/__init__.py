"""Beam composites that wire sources, encoders and sinks."""

from beam_tfrecords.transforms.dead_letters import dead_letter_json
from beam_tfrecords.transforms.encode import (ERRORS, STAT_FIELDS, STATS,
                                              Encode, EncodeRows)
from beam_tfrecords.transforms.grouped import EncodeGroupedSequences
from beam_tfrecords.transforms.inputs import ReadInputs

__all__ = ["ERRORS", "STATS", "STAT_FIELDS", "Encode",
           "EncodeGroupedSequences", "EncodeRows", "ReadInputs",
           "dead_letter_json"]

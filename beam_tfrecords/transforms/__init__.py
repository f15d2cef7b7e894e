"""Beam composites that wire sources, encoders and sinks."""

from beam_tfrecords.transforms.encode import ERRORS, STATS, EncodeRows, dead_letter_json
from beam_tfrecords.transforms.read import ReadInputs

__all__ = ["ERRORS", "STATS", "EncodeRows", "ReadInputs", "dead_letter_json"]

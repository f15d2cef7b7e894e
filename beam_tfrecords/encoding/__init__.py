"""Rows / Arrow record batches -> serialized records. No Beam import here."""

from beam_tfrecords.encoding.example import EncodedBatch, ExampleEncoder, RowError

__all__ = ["EncodedBatch", "ExampleEncoder", "RowError"]

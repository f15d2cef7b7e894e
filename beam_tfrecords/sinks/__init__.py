"""Sinks: deterministic gzip TFRecord shards, dead-letter files,
statistics.pb and what TFDS and TFT read (committing them into dataset.json
and publishing them is beam_tfrecords.publish's)."""

from beam_tfrecords.sinks.metadata import WriteErrors
from beam_tfrecords.sinks.codec import JSON_LINES, SHARD_SUFFIX, TFRECORD_GZIP
from beam_tfrecords.sinks.shards import (Shuffle, WriteShards,
                                         WriteWithBeamSink, stable_hash)

__all__ = ["JSON_LINES", "SHARD_SUFFIX", "Shuffle", "TFRECORD_GZIP",
           "WriteErrors", "WriteShards", "WriteWithBeamSink", "stable_hash"]

"""Sinks: deterministic gzip TFRecord shards, dead-letter files,
dataset.json, statistics.pb and what TFDS and TFT read (publishing them is
beam_tfrecords.publish's)."""

from beam_tfrecords.sinks.metadata import (DATASET_JSON,
                                           DEFAULT_MAX_BAD_FRACTION, ERRORS_DIR,
                                           STAGING_PREFIX, SUCCESS, Commit,
                                           WriteErrors, check_thresholds,
                                           read_json, rejection_lines)
from beam_tfrecords.sinks.shards import (JSON_LINES, SHARD_SUFFIX,
                                         TFRECORD_GZIP, Shuffle, WriteShards,
                                         WriteWithBeamSink, stable_hash)

__all__ = ["Commit", "DATASET_JSON", 
           "DEFAULT_MAX_BAD_FRACTION",
           "ERRORS_DIR", "JSON_LINES",
           "SHARD_SUFFIX", "STAGING_PREFIX", "SUCCESS", "Shuffle",
           "TFRECORD_GZIP",
           "WriteErrors", "WriteShards", "WriteWithBeamSink",
           "check_thresholds", "rejection_lines",
           "read_json", "stable_hash"]

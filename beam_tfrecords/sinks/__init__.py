"""Sinks: gzip TFRecord shards, dead-letter files, dataset.json, _SUCCESS."""

from beam_tfrecords.sinks.metadata import (DATASET_JSON, ERRORS_DIR, SUCCESS,
                                           Commit, WriteErrors)
from beam_tfrecords.sinks.tfrecord import SHARD_SUFFIX, WriteSplit, shard_prefix

__all__ = ["Commit", "DATASET_JSON", "ERRORS_DIR", "SHARD_SUFFIX", "SUCCESS",
           "WriteErrors", "WriteSplit", "shard_prefix"]

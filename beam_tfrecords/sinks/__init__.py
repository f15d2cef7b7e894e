"""Sinks: deterministic gzip TFRecord shards, dead-letter files,
dataset.json, and publishing a finished dataset (_SUCCESS last)."""

from beam_tfrecords.sinks.metadata import (DATASET_JSON,
                                           DEFAULT_MAX_BAD_FRACTION,
                                           ERRORS_DIR, STAGING_PREFIX,
                                           SUCCESS, Commit, WriteErrors,
                                           check_thresholds, read_json,
                                           rejection_lines)
from beam_tfrecords.sinks.lock import LOCK_FILE, OutputLock
from beam_tfrecords.sinks.publishing import (check_output_files, publish,
                                          recover, remove_parts,
                                          remove_staging)
from beam_tfrecords.sinks.shards import (JSON_LINES, SHARD_SUFFIX,
                                         TFRECORD_GZIP, Shuffle, WriteShards,
                                         WriteWithBeamSink, stable_hash)

__all__ = ["Commit", "DATASET_JSON", "LOCK_FILE", "OutputLock",
           "check_output_files", "recover", "DEFAULT_MAX_BAD_FRACTION",
           "ERRORS_DIR", "JSON_LINES",
           "SHARD_SUFFIX", "STAGING_PREFIX", "SUCCESS", "Shuffle",
           "TFRECORD_GZIP",
           "WriteErrors", "WriteShards", "WriteWithBeamSink",
           "check_thresholds", "publish", "rejection_lines",
           "read_json", "remove_parts", "remove_staging", "stable_hash"]

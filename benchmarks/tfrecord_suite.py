"""The tfrecord suite: the 12-column CSV (--rows) built into a dataset, and
that dataset's shards built again with --format tfrecord (identical
records expected), against TensorFlow reading and re-writing the same
shards (no parsing), and reading and parsing them."""

import os
import shutil
import sys

from common import (SCHEMA, baseline_cmd, examples_input, same_records, table,
                    timed_cmd)


def tf_copy_loop(src_glob: str, dst: str) -> None:
  """TensorFlow's way of re-writing TFRecords: tf.data reads the gzip
  files, one TFRecordWriter(GZIP) writes every record (no parsing, no
  checks, no splits)."""
  import glob
  import tensorflow as tf
  files = sorted(glob.glob(src_glob))
  with tf.io.TFRecordWriter(dst, options="GZIP") as writer:
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
      writer.write(record.numpy())


def tf_parse_loop(src_glob: str, dst: str) -> None:
  """The same, parsing every record with tf.io.parse_example (the
  dataset's feature spec) in batches of 1,024: what reading it costs."""
  import glob
  import tensorflow as tf
  import beam_tfrecords as btr
  spec = btr.feature_spec(os.path.dirname(src_glob))
  files = sorted(glob.glob(src_glob))
  n = 0
  for batch in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(
      1024).map(lambda r: tf.io.parse_example(r, spec)):
    n += int(tf.shape(batch["label"])[0])
  with open(dst, "w") as f:
    f.write(str(n))


def tfrecord_suite(args) -> None:
  """The 12-column CSV built into a dataset, then that dataset's shards
  built again with --format tfrecord and a schema naming its stored
  features (the records must come out identical); against TensorFlow
  reading and re-writing the same shards."""
  rows = args.rows
  src, schema = examples_input(args.workdir, rows)
  first = os.path.join(args.workdir, "tfrecord-first")
  again = os.path.join(args.workdir, "tfrecord-again")
  shutil.rmtree(first, ignore_errors=True)
  shutil.rmtree(again, ignore_errors=True)
  results = []
  timed_cmd(results, "build from the CSV", [
      sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
      "--input", src, "--output", first])
  renamed = os.path.join(args.workdir, "schema-tfrecord.yaml")
  with open(renamed, "w") as f:  # the same features, read from themselves
    f.write(SCHEMA.replace(', separator: "|"', ""))
  shards = os.path.join(first, "train-*.tfrecord.gz")
  timed_cmd(results, "build from its shards (--format tfrecord)", [
      sys.executable, "-m", "beam_tfrecords", "build", "--schema", renamed,
      "--input", shards, "--output", again])
  timed_cmd(results, "TensorFlow: read + re-write the shards (no parsing)",
            baseline_cmd("tf-copy", shards,
                         os.path.join(args.workdir, "tf-copy.tfrecord.gz")))
  timed_cmd(results, "TensorFlow: read + parse_example the shards",
            baseline_cmd("tf-parse", shards,
                         os.path.join(args.workdir, "tf-parse.txt")))
  table("tfrecord", "tfrecord (a dataset's own shards as input; DirectRunner "
        "defaults; MB/s of the CSV)", rows, src, results,
        [("TensorFlow re-write", results[2].seconds)])
  print(f"\nrebuilt shards: {same_records(first, again)}")

"""A dataset's shards, and their records read and parsed by TensorFlow."""

import glob
import os


def shard_paths(output, split="train"):
  return sorted(glob.glob(os.path.join(output, f"{split}-*.tfrecord.gz")))


def tf_records(tf, output, split="train"):
  """Serialized records of a split, read by TensorFlow (GZIP)."""
  ds = tf.data.TFRecordDataset(shard_paths(output, split),
                               compression_type="GZIP")
  return [r.numpy() for r in ds]


def tf_parse(tf, records, spec):
  """Each record parsed by tf.io.parse_single_example -> dict of numpy."""
  out = []
  for r in records:
    parsed = tf.io.parse_single_example(r, spec)
    row = {}
    for k, v in parsed.items():
      if isinstance(v, tf.sparse.SparseTensor):
        v = tf.sparse.to_dense(v)
      row[k] = v.numpy()
    out.append(row)
  return out

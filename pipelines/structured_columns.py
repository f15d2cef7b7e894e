"""Structured int / bytes / float columns (JSON lines) -> Examples.

    python -m pipelines.structured_columns [--output out/structured]

Read back with TensorFlow alone:

    tf.data.experimental.make_batched_features_dataset(
        file_pattern="out/structured/train-*.tfrecord.gz", batch_size=64,
        features=btr.feature_spec("out/structured"),
        reader=lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"),
        label_key="label", num_epochs=1)
"""

from ._common import run_build


def run(argv=None):
  return run_build(__doc__.splitlines()[0], "structured_columns.yaml",
                   "structured.jsonl", "out/structured", argv)


if __name__ == "__main__":
  run()

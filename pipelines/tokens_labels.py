"""Token / label sequences (JSON lists) -> tf.train.SequenceExample.

    python -m pipelines.tokens_labels [--input data.jsonl]
        [--output out/tokens_labels] [any Beam pipeline option]

Then read it with TensorFlow's own parser:

    context = {"length": tf.io.FixedLenFeature([], tf.int64)}
    sequence = {"tokens": tf.io.FixedLenSequenceFeature([], tf.int64),
                "labels": tf.io.FixedLenSequenceFeature([], tf.int64)}
    tf.data.TFRecordDataset(files, compression_type="GZIP").map(
        lambda r: tf.io.parse_single_sequence_example(r, context, sequence))
"""

from ._common import run_build


def run(argv=None):
  return run_build(__doc__.splitlines()[0], "tokens_labels.yaml",
                   "tokens_labels.jsonl", "out/tokens_labels", argv)


if __name__ == "__main__":
  run()

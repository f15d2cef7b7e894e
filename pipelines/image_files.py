"""A table of image names and labels -> encoded image bytes +
label Examples; the missing file goes to errors/.

    python -m pipelines.image_files [--input TABLE] [--output out/image_files]

Read back with TensorFlow alone, make_batched_features_dataset over the
GZIP files, then decode the images:

    ds = tf.data.experimental.make_batched_features_dataset(
        "out/image_files/train-*.tfrecord.gz", batch_size=8,
        features=btr.feature_spec("out/image_files"),
        reader=lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"),
        label_key="label", num_epochs=1)
"""

from ._common import run_build


def run(argv=None):
  return run_build(__doc__.splitlines()[0], "image_files.yaml",
                   "image_labels.csv", "out/image_files", argv)


if __name__ == "__main__":
  run()

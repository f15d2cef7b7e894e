"""An image folder -> raw pixels + shape + label Examples.

    python -m pipelines.image_pixels [--input FOLDER] [--output out/image_pixels]

Read back with TensorFlow alone (decode_raw + reshape), or with btr.load(),
which does it for you:

    x = tf.io.parse_single_example(record, btr.feature_spec(out))
    image = tf.reshape(tf.io.decode_raw(x["image"], tf.uint8), tf.stack(
        [x["image_height"], x["image_width"], x["image_channels"]]))
"""

from ._common import run_build


def run(argv=None):
  return run_build(__doc__.splitlines()[0], "image_pixels.yaml", "shapes",
                   "out/image_pixels", argv, input_format="images")


if __name__ == "__main__":
  run()

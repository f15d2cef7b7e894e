"""Object-detection annotations (JSON lines: an image path and a list of
boxes with labels) -> Examples with aligned list features.

    python -m pipelines.detections [--output out/detections]

The box corners and labels of each image come out as lists of the same
length (dataset.json's "aligned_lists"); read back, they zip into the
objects again:

    spec = btr.feature_spec("out/detections")   # RaggedFeature for them
    batch = tf.io.parse_example(records, spec)
    boxes = tf.stack([batch["ymin"], batch["xmin"], batch["ymax"],
                      batch["xmax"]], axis=-1)  # [batch, (objects), 4]
"""

from ._common import run_build


def run(argv=None):
  return run_build(__doc__.splitlines()[0], "detections.yaml",
                   "detections.jsonl", "out/detections", argv)


if __name__ == "__main__":
  run()

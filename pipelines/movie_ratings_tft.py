"""TensorFlow Transform on ratings, with a preprocessing_fn written as a
TFX Transform module_file writes one: z-scored rating, title vocabulary,
bucketized timestamp, hashed title, analyzed on the train split.

    python -m pipelines.movie_ratings_tft [--output out/movie_ratings_tft]

The schema names the function (transform.preprocessing_fn:
pipelines.movie_ratings_tft:preprocessing_fn), as the CLI reads it from a
checkout of this repository; run() hands over the function itself, which
works wherever this module is installed (beam_tfrecords.pipelines in the
wheel). A TFX module's function moves over unchanged.

Train on the transformed records, serve with the same transform:

    ds = btr.load("out/movie_ratings_tft", "train", transformed=True)
    layer = btr.open("out/movie_ratings_tft").transform_output() \\
        .transform_features_layer()   # raw features -> transformed
"""

from ._common import run_build


def preprocessing_fn(inputs):
  """Raw features (a dense tensor each: every rating has them) ->
  transformed features."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_transform as tft  # pylint: disable=import-outside-toplevel
  return {
      "rating_z": tft.scale_to_z_score(inputs["rating"]),
      "title_id": tft.compute_and_apply_vocabulary(
          inputs["title"], num_oov_buckets=1, vocab_filename="title_id"),
      "time_bucket": tft.bucketize(inputs["timestamp"], num_buckets=8),
      "title_hash": tft.hash_strings(inputs["title"], hash_buckets=16),
      "user_id": tf.identity(inputs["user_id"]),
      "rating": tf.identity(inputs["rating"]),
  }


def run(argv=None):
  return run_build(__doc__.splitlines()[0], "movie_ratings_tft.yaml",
                   "ratings.csv", "out/movie_ratings_tft", argv,
                   preprocessing_fn=preprocessing_fn)


if __name__ == "__main__":
  run()

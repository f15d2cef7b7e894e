"""Movie ratings CSV (one user per row, lists of movies and ratings) ->
tf.train.Example TFRecords.

    python -m pipelines.movie_ratings [--input data.csv] [--output out/movies]
        [any Beam pipeline option]

Then read it with TensorFlow's own parser:

    spec = {"age": tf.io.FixedLenFeature([], tf.int64),
            "movies": tf.io.VarLenFeature(tf.string), ...}
    tf.data.TFRecordDataset(files, compression_type="GZIP").map(
        lambda r: tf.io.parse_single_example(r, spec))
"""

from ._common import run_build


def run(argv=None):
  return run_build(__doc__.splitlines()[0], "movie_ratings.yaml",
                   "movie_ratings.csv", "out/movie_ratings", argv)


if __name__ == "__main__":
  run()

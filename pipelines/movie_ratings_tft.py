"""TensorFlow Transform on ratings: z-scored rating, title vocabulary,
bucketized timestamp, analyzed on the train split.

    python -m pipelines.movie_ratings_tft [--output out/movie_ratings_tft]

Train on the transformed records, serve with the same transform:

    ds = btr.load("out/movie_ratings_tft", "train", transformed=True)
    layer = btr.transform_output("out/movie_ratings_tft") \\
        .transform_features_layer()   # raw features -> transformed
"""

from ._common import run_build


def run(argv=None):
  return run_build(__doc__.splitlines()[0], "movie_ratings_tft.yaml",
                   "ratings.csv", "out/movie_ratings_tft", argv)


if __name__ == "__main__":
  run()

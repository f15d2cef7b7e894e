"""The transform suite: --transform-rows of the 12-column CSV built plain
and with a `transform:` section (TensorFlow Transform: analyze +
transform; six features), keeping the raw records and not; each against
the plain build. (benchmarks/tft_suite.py measures TFT against the same
transform written by hand.)"""

import os

from common import cli, examples_input, table


TRANSFORM_SECTION = """transform:
  features:
    score_z: {scale_to_z_score: score}
    ratio_01: {scale_to_0_1: ratio}
    city_id: {compute_and_apply_vocabulary: city, num_oov_buckets: 1}
    age_bucket: {bucketize: age, num_buckets: 10}
    country_hash: {hash_strings: country, hash_buckets: 100}
    label: {pass: label}
"""


def transform_suite(args) -> None:
  """The 12-column CSV with and without a transform: section (scored,
  scaled, a vocabulary, buckets, a hash, a pass-through), analyzed on all
  of it (one split)."""
  rows = args.transform_rows
  src, schema = examples_input(args.workdir, rows)
  with open(schema) as f:
    text = f.read()
  # TFT's analyzers need a value in every record: make the inputs required.
  text = (text.replace("score: {type: float}", "score: {type: float, "
                       "required: true}")
          .replace("ratio: {type: float}", "ratio: {type: float, "
                   "required: true}")
          .replace("city: {type: string}", "city: {type: string, "
                   "required: true}")
          .replace("country: {type: string}", "country: {type: string, "
                   "required: true}"))
  plain = os.path.join(args.workdir, "transform-plain.yaml")
  with_tft = os.path.join(args.workdir, "transform-tft.yaml")
  with open(plain, "w") as f:
    f.write(text)
  with open(with_tft, "w") as f:
    f.write(text + TRANSFORM_SECTION)
  no_raw = os.path.join(args.workdir, "transform-tft-no-raw.yaml")
  with open(no_raw, "w") as f:
    f.write(text + TRANSFORM_SECTION.replace(
        "transform:\n", "transform:\n  keep_raw: false\n"))
  results = []
  cli(results, "build, no transform", args.workdir, plain, src)
  cli(results, "build + TensorFlow Transform (raw and transformed "
      "records)", args.workdir, with_tft, src)
  cli(results, "build + TensorFlow Transform, keep_raw: false",
      args.workdir, no_raw, src)
  table("transform", "transform (6 TFT features over the 12-column CSV; "
        "DirectRunner defaults)", rows, src, results,
        [("no transform", results[0].seconds)])

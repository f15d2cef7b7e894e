"""beam_tfrecords/tft/pipeline.py, on values: TensorFlow Transform in the
build's pipeline: analyze the training split, then transform every raw shard
file, read back from disk."""

import beam_tfrecords as btr

from tests.helpers.transform import SCHEMA


def test_the_analysis_decodes_only_what_its_analyzers_read(tf):
  # As TFX's Transform projects its analysis data: the analyzers read
  # rating, title and ts; user is hashed and rating passed through, no
  # analyzer needs them beyond rating. (The values of a whole build are
  # checked against numpy above.)
  from beam_tfrecords.tft.pipeline import analyzed_source
  config, decoded = analyzed_source(btr.load_schema(SCHEMA))
  assert list(config.arrow_schema.names) == ["rating", "title", "ts"]
  assert [f.name for f in decoded.feature] == ["rating", "title", "ts"]
  # TFT still traces the function on every feature.
  assert sorted(config.original_type_specs) == ["rating", "title", "ts",
                                                "user"]
  # A function whose analyzers read nothing (only tft.* transforms without
  # analysis) decodes every feature.
  hashed = dict(SCHEMA, transform={"features": {
      "user_hash": {"hash_strings": "user", "hash_buckets": 10}}})
  config, decoded = analyzed_source(btr.load_schema(hashed))
  assert list(config.arrow_schema.names) == ["rating", "title", "ts", "user"]
  assert [f.name for f in decoded.feature] == ["rating", "title", "ts",
                                               "user"]

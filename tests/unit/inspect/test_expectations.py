"""beam_tfrecords/inspect/expectations.py, on values: The schema's expectations
checked against a build's statistics (and a baseline dataset's) before
anything is published."""

import pytest

import beam_tfrecords as btr
from beam_tfrecords.transforms.overlap import _digests, overlap_of

from tests.helpers.expectations import DAY1, SCHEMA, _rows


def test_the_overlap_count_is_exact():
  batches = [("train", None, [b"a", b"b", b"c", b"a"]),
            ("eval", None, [b"c", b"a", b"x"]),
            ("test", None, [b"x", b"y"])]
  buckets = {}
  for batch in batches:
    for bucket, part in _digests(batch):
      buckets.setdefault(bucket, []).append(part)
  # a and c (train, eval), x (eval, test): each counted once.
  assert sum(overlap_of(parts) for parts in buckets.values()) == 3


def test_expectations_are_checked_in_the_schema():
  with pytest.raises(btr.SchemaError, match="features.carrier.expect.min: "
                     "min is for int64 and float features"):
    btr.load_schema(dict(SCHEMA, features={"carrier": {
        "type": "string", "expect": {"min": 1}}}))
  with pytest.raises(btr.SchemaError, match="expect.presence: presence is "
                     "a feature's check"):
    btr.load_schema(dict(SCHEMA, expect={"presence": 0.5}))
  with pytest.raises(btr.SchemaError, match="on_anomaly: 'wrn' is not "
                     "allowed; allowed: fail, warn"):
    btr.load_schema(dict(SCHEMA, on_anomaly="wrn"))
  schema = btr.load_schema(SCHEMA)
  assert btr.load_schema(schema.to_dict()) == schema


def test_infer_schema_proposes_expectations_from_input():
  from beam_tfrecords.inspect.infer import infer_schema_for
  text = infer_schema_for([DAY1], expect=True)
  schema = btr.load_schema(__import__("yaml").safe_load(text))
  origin = schema.feature("origin").expect
  assert origin.values == (b"EWR", b"JFK", b"LGA") and origin.presence == 1.0
  delay = schema.feature("dep_delay").expect
  rows = _rows(DAY1)
  delays = [r["dep_delay"] for r in rows if "dep_delay" in r]
  assert (delay.min, delay.max) == (min(delays), max(delays))
  assert delay.presence == int(100 * len(delays) / len(rows)) / 100
  # A time of day is no category: no values proposed.
  assert schema.feature("time_hour").expect.values is None


def test_disjoint_keys_needs_row_by_row_builds():
  with pytest.raises(btr.SchemaError, match="expect.disjoint_keys: works on "
                     "builds that encode row by row"):
    btr.load_schema({
        "name": "s", "record": "sequence_example", "group_by": "user",
        "context": {"user": "string"}, "sequence": {"item": "string"},
        "expect": {"disjoint_keys": ["user"]}})

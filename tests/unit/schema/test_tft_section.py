"""beam_tfrecords/schema/tft_section.py, on values: The checks of the
`transform:` section: TensorFlow Transform features computed from stored
features (see beam_tfrecords.tft)."""

import pytest

import beam_tfrecords as btr
from beam_tfrecords import SchemaError

from tests.helpers.transform import SCHEMA


@pytest.mark.parametrize("transform,key,message", [
    ({"x": {"compute_and_apply_vocabulary": "rating"}},
     "transform.features.x.compute_and_apply_vocabulary",
     "takes string or bytes or int64 features; 'rating' is float"),
    ({"x": {"scale_to_z_score": "title"}},
     "transform.features.x.scale_to_z_score", "'title' is string"),
    ({"x": {"bucketize": "ts"}}, "transform.features.x.num_buckets",
     "missing"),
    ({"x": {"scale_to_z_score": "note"}},
     "transform.features.x.scale_to_z_score", "'note' may be missing"),
    ({"x": {"scale_to_z_score": "ratings"}},
     "transform.features.x.scale_to_z_score",
     "'ratings' is not a stored feature"),
    ({"x": {"scale_to_z_score": "rating", "top_k": 3}},
     "transform.features.x.top_k", "unknown key"),
    ({"x": {"zscore": "rating"}}, "transform.features.x",
     "needs exactly one analyzer"),
])
def test_transform_schema_mistakes(transform, key, message):
  schema = dict(SCHEMA, transform={"features": transform})
  schema["features"] = dict(SCHEMA["features"], note="float")
  with pytest.raises(SchemaError) as e:
    btr.load_schema(schema)
  assert f"<dict>: {key}: " in str(e.value)
  assert message in str(e.value)

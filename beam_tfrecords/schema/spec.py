"""Reader-side specs: the `tf.io.parse_example` feature spec of a schema.

| schema shape       | present in every record?   | spec                                       |
|--------------------|----------------------------|--------------------------------------------|
| [] or [n, ...]     | yes (required or default)  | FixedLenFeature(shape, dtype)              |
| [] or [n, ...]     | no                         | VarLenFeature(dtype) (a SparseTensor)      |
| [-1]               | either                     | VarLenFeature(dtype) (a SparseTensor)      |

A fixed feature that may be missing cannot be a FixedLenFeature without a
default: TensorFlow would fail on the first record that lacks it.
"""

from beam_tfrecords.schema.model import Feature, FeatureType, Schema

__all__ = ["feature_spec", "spec_to_json", "dtype_name"]

_DTYPES = {FeatureType.INT64: "int64", FeatureType.FLOAT: "float32",
           FeatureType.BYTES: "string", FeatureType.STRING: "string"}


def dtype_name(feature: Feature) -> str:
  """The TensorFlow dtype name a feature parses to."""
  return _DTYPES[feature.type]


def feature_spec(schema: Schema) -> dict:
  """The dict of `tf.io.FixedLenFeature` / `tf.io.VarLenFeature` for a schema."""
  import tensorflow as tf  # Imported here: only readers need TensorFlow.
  spec = {}
  for f in schema.features:
    dtype = tf.as_dtype(dtype_name(f))
    if f.is_variable_length or not f.always_present:
      spec[f.name] = tf.io.VarLenFeature(dtype)
    else:
      spec[f.name] = tf.io.FixedLenFeature(list(f.shape), dtype)
  return spec


def spec_to_json(schema: Schema) -> dict:
  """The feature spec as plain data, as recorded in dataset.json."""
  out = {}
  for f in schema.features:
    if f.is_variable_length or not f.always_present:
      out[f.name] = {"kind": "VarLenFeature", "dtype": dtype_name(f)}
    else:
      out[f.name] = {"kind": "FixedLenFeature", "shape": list(f.shape),
                     "dtype": dtype_name(f)}
  return out

"""Reader-side specs: the parsing spec TensorFlow needs for a schema.

Example features and SequenceExample context features:

| schema shape       | present in every record?   | spec                                       |
|--------------------|----------------------------|--------------------------------------------|
| [] or [n, ...]     | yes (required, default or  | FixedLenFeature(shape, dtype)              |
|                    | derived)                   |                                            |
| [] or [n, ...]     | no                         | VarLenFeature(dtype) (a SparseTensor)      |
| [-1]               | either                     | VarLenFeature(dtype) (a SparseTensor)      |

SequenceExample sequence features (shape is the shape of one step):

| step shape         | every step has its values? | spec                                       |
|--------------------|----------------------------|--------------------------------------------|
| [] or [n, ...]     | yes (required or default)  | FixedLenSequenceFeature(shape, dtype,      |
|                    |                            |   allow_missing=True) -> [steps, *shape]   |
| [] or [n, ...]     | no                         | RaggedFeature(dtype) -> [steps, (values)]  |
| [-1]               | either                     | RaggedFeature(dtype) -> [steps, (values)]  |

Example list features read from the same list of objects (sources
`objects[].label`, `objects[].bbox.xmin`: aligned lists, see
`aligned_lists`) parse as RaggedFeature(dtype) instead: RaggedTensors
with the same row lengths, which zip back into the objects.

A fixed feature that may be missing cannot be a FixedLenFeature without a
default: TensorFlow would fail on the first record that lacks it. A
sequence whose feature list is absent (a missing list cell) parses as zero
steps (`allow_missing`).
"""

from typing import Any, Dict, List, NamedTuple

from beam_tfrecords.schema.field_paths import is_path, parse_path
from beam_tfrecords.schema.model import Feature, FeatureType, Schema

__all__ = ["feature_spec", "spec_to_json", "dtype_name", "SequenceSpec",
           "aligned_lists"]

_DTYPES = {FeatureType.INT64: "int64", FeatureType.FLOAT: "float32",
           FeatureType.BYTES: "string", FeatureType.STRING: "string"}


class SequenceSpec(NamedTuple):
  """The two specs of a SequenceExample dataset.

  Unpacks straight into TensorFlow's parsers:
  `tf.io.parse_sequence_example(x, *spec)` or `(x, **spec._asdict())`.
  """
  context_features: dict
  sequence_features: dict


def dtype_name(feature: Feature) -> str:
  """The TensorFlow dtype name a feature parses to."""
  return _DTYPES[feature.type]


def _fixed(feature: Feature) -> bool:
  return not feature.is_variable_length and feature.always_present


def aligned_lists(schema: Schema) -> Dict[str, List[str]]:
  """{list path: [feature, ...]} of the Example features that read one
  field of every element of the same list (`objects[]` of
  `objects[].label` and `objects[].bbox.xmin`): every record holds them
  with the same length. Only lists that two or more features read."""
  if schema.is_sequence:
    return {}
  groups: Dict[str, List[str]] = {}
  for f in schema.features:
    source = f.input_column
    if source is None or not f.is_variable_length or not is_path(source):
      continue
    try:
      prefix = parse_path(source).list_prefix
    except ValueError:
      continue
    if prefix is not None:
      groups.setdefault(prefix, []).append(f.name)
  return {k: v for k, v in sorted(groups.items()) if len(v) > 1}


def _json(feature: Feature, sequence: bool, aligned: bool = False) -> dict:
  dtype = dtype_name(feature)
  if aligned:
    return {"kind": "RaggedFeature", "dtype": dtype}
  if sequence:
    if _fixed(feature):
      return {"kind": "FixedLenSequenceFeature", "shape": list(feature.shape),
              "dtype": dtype, "allow_missing": True}
    return {"kind": "RaggedFeature", "dtype": dtype}
  if _fixed(feature):
    return {"kind": "FixedLenFeature", "shape": list(feature.shape),
            "dtype": dtype}
  return {"kind": "VarLenFeature", "dtype": dtype}


def spec_to_json(schema: Schema) -> dict:
  """The spec as plain data, as recorded in dataset.json.

  {name: spec} for Examples; {"context": {...}, "sequence": {...}} for
  SequenceExamples.
  """
  if schema.is_sequence:
    return {"context": {f.name: _json(f, False) for f in schema.context},
            "sequence": {f.name: _json(f, True) for f in schema.sequence}}
  aligned = {n for names in aligned_lists(schema).values() for n in names}
  return {f.name: _json(f, False, f.name in aligned)
          for f in schema.features}


def tf_spec(s: dict) -> Any:
  import tensorflow as tf  # Imported here: only readers need TensorFlow.
  dtype = tf.as_dtype(s["dtype"])
  if s["kind"] == "FixedLenFeature":
    return tf.io.FixedLenFeature(s["shape"], dtype)
  if s["kind"] == "VarLenFeature":
    return tf.io.VarLenFeature(dtype)
  if s["kind"] == "FixedLenSequenceFeature":
    return tf.io.FixedLenSequenceFeature(
        s["shape"], dtype, allow_missing=s.get("allow_missing", False))
  if s["kind"] == "RaggedFeature":
    return tf.io.RaggedFeature(dtype)
  raise ValueError(f"unknown spec kind {s['kind']!r}")


def feature_spec(schema: Schema) -> Any:
  """The TensorFlow parsing spec of a schema.

  Returns:
    For an Example schema, the dict for `tf.io.parse_example`; for a
    SequenceExample schema, a `SequenceSpec(context_features,
    sequence_features)`.
  """
  spec = spec_to_json(schema)
  if schema.is_sequence:
    return SequenceSpec(
        {k: tf_spec(v) for k, v in spec["context"].items()},
        {k: tf_spec(v) for k, v in spec["sequence"].items()})
  return {k: tf_spec(v) for k, v in spec.items()}

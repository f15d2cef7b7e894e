"""The declarative schema language: model, loader and reader specs."""

from beam_tfrecords.schema.loader import FEATURE_TYPES, load_schema, schema_from_dict
from beam_tfrecords.schema.model import Feature, FeatureType, RecordKind, Schema
from beam_tfrecords.schema.spec import feature_spec, spec_to_json

__all__ = ["FEATURE_TYPES", "Feature", "FeatureType", "RecordKind", "Schema",
           "feature_spec", "load_schema", "schema_from_dict", "spec_to_json"]

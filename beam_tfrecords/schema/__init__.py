"""The declarative schema language: model, loader and reader specs."""

from beam_tfrecords.schema.loader import (FEATURE_TYPES, load_schema,
                                          schema_from_dict)
from beam_tfrecords.schema.model import (Derive, Feature, FeatureType, OrderKey,
                                         Overflow, RecordKind, Schema)
from beam_tfrecords.schema.spec import SequenceSpec, feature_spec, spec_to_json

__all__ = ["FEATURE_TYPES", "Derive", "Feature", "FeatureType", "OrderKey",
           "Overflow", "RecordKind", "Schema", "SequenceSpec", "feature_spec",
           "load_schema", "schema_from_dict", "spec_to_json"]

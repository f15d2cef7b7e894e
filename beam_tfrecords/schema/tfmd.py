"""The schema as a TensorFlow Metadata Schema (`schema.pbtxt`).

TFDV, TFT and TFX components read a dataset's schema from this proto. Each
feature gets its type (INT, FLOAT, BYTES), its presence (min_fraction 1 when
every record has it: required, with a default, or derived) and its shape:
a fixed `shape` for fixed-size features that are always present, else a
`value_count` (min/max values per record, when the schema fixes them).
SequenceExamples follow tfx-bsl's convention: context features at the top,
the sequence features inside a STRUCT feature named "##SEQUENCE##", each
with the values of one step.
"""

from typing import Any, Iterable

from beam_tfrecords.core.layout import TFMD_FILE
from beam_tfrecords.schema.model import Derive, Feature, FeatureType, Schema

__all__ = ["to_tfmd", "tfmd_text", "SEQUENCE_FEATURE"]

SEQUENCE_FEATURE = "##SEQUENCE##"


def _add(container: Any, features: Iterable[Feature],
         in_sequence: bool) -> None:
  from tensorflow_metadata.proto.v0 import schema_pb2
  types = {FeatureType.INT64: schema_pb2.INT,
           FeatureType.FLOAT: schema_pb2.FLOAT,
           FeatureType.BYTES: schema_pb2.BYTES,
           FeatureType.STRING: schema_pb2.BYTES}
  for f in features:
    out = container.add()
    out.name = f.name
    ftype = FeatureType.INT64 if f.derive in (Derive.LENGTH, Derive.PART) \
        else f.type
    out.type = types[ftype]
    if f.description:
      out.annotation.comment.append(f.description)
    present = f.always_present
    if present:
      out.presence.min_fraction = 1.0
    out.presence.min_count = 1 if present else 0
    count = f.num_values  # derive: length / part have shape [] (1 value)
    if count is not None and present and not in_sequence:
      out.shape.SetInParent()  # a scalar's shape has no dims
      for dim in f.shape:
        out.shape.dim.add().size = dim
    elif count is not None:
      # An optional step value is written as an empty step: 0 values.
      out.value_count.min = count if present or not in_sequence else 0
      out.value_count.max = count


def to_tfmd(schema: Schema) -> Any:
  """A tensorflow_metadata.proto.v0.schema_pb2.Schema for `schema`."""
  from tensorflow_metadata.proto.v0 import schema_pb2
  out = schema_pb2.Schema()
  if not schema.is_sequence:
    _add(out.feature, schema.features, in_sequence=False)
    return out
  _add(out.feature, schema.context, in_sequence=False)
  seq = out.feature.add()
  seq.name = SEQUENCE_FEATURE
  seq.type = schema_pb2.STRUCT
  _add(seq.struct_domain.feature, schema.sequence, in_sequence=True)
  return out


def tfmd_text(schema: Schema) -> str:
  """`to_tfmd(schema)` in protobuf text format."""
  from google.protobuf import text_format
  return text_format.MessageToString(to_tfmd(schema))

"""Rows -> serialized tf.train.SequenceExample: what both ways share.

Two ways rows become sequences, as the schema says:

* **List columns** (no `group_by`): each row holds lists, one step per
  element, and becomes one sequence (or several, with `overflow: split`):
  `encoding.list_sequences.SequenceEncoder`, vectorized over a batch like
  Examples.
* **Grouped rows** (`group_by`): each row is one step of its key's
  sequence; the steps are encoded, brought together by key, ordered and
  assembled: `encoding.grouped_sequences` says how.

Both check the schema (`check_sequence`) and convert the columns they read
the same way (`convert_feature`). No Beam here.
"""

import os
from typing import Any, Mapping, Tuple, Union

import pyarrow as pa

from beam_tfrecords.encoding import columns as col
from beam_tfrecords.schema import Feature, Schema, load_schema

__all__ = ["SchemaSource", "check_sequence", "convert_feature"]

# What an encoder is built from: a Schema, its dict, or a schema file's path.
SchemaSource = Union[str, "os.PathLike[str]", Mapping[str, Any], Schema]


def check_sequence(schema: SchemaSource) -> Schema:
  """The loaded schema (Schema, dict or path); a ValueError unless it
  describes SequenceExamples."""
  schema = load_schema(schema)
  if not schema.is_sequence:
    raise ValueError(f"schema {schema.name!r} describes {schema.record.value} "
                     "records, not sequence_example")
  return schema


def convert_feature(feature: Feature, columns: Mapping[str, Any], n: int
                    ) -> Tuple[pa.LargeListArray, col.RowErrors]:
  """The converted column of one feature (defaults applied, a missing
  required value an error) and its row errors."""
  lists, errors = col.convert_input(feature, columns, n)
  return col.apply_missing(feature, lists, errors), errors

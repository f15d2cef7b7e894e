"""beam_tfrecords/tft/functions.py, on values: The preprocessing_fn TensorFlow
Transform runs: the schema's declared analyzers (`preprocessing_fn(spec)`),
the user's own function (`with_preprocessing_fn`), both merged on the stored
features (`combined_fn`), traced before anything runs (`check_traces`), and
what the build key sees of them (`fn_digest`). See beam_tfrecords.tft."""

import pytest
# (TensorFlow's first import starts a child process, which a unit test may
# not: imported with the module; TensorFlow Transform with the functions.)
import tensorflow  # noqa: F401  pylint: disable=unused-import

import beam_tfrecords as btr
from beam_tfrecords import InputError

from tests.helpers.preprocessing_fn import SCHEMA, penguins_fns
from tests.helpers.tft_sequences import SCHEMA as SEQUENCE_SCHEMA


def test_a_function_that_cannot_be_traced_fails_before_the_pipeline(
    tmp_path):
  src = tmp_path / "p.csv"
  src.write_text("row,species,island,bill_length_mm,flipper_length_mm,"
                 "body_mass_g,sex\n1,Adelie,Dream,39.1,181,3750,male\n")
  out = tmp_path / "out"
  with pytest.raises(InputError) as e:
    btr.build(SCHEMA, str(src), str(out),
              preprocessing_fn=penguins_fns().fails_to_trace)
  message = str(e.value)
  assert "tft_penguins:fails_to_trace" in message
  assert "no_such_feature" in message
  assert not out.exists() or not any(out.iterdir())


def test_a_sequence_transform_names_what_it_cannot_take(tmp_path):
  bad = dict(SEQUENCE_SCHEMA, sequence=dict(SEQUENCE_SCHEMA["sequence"], mass={
      "type": "float", "source": "body_mass_g"}))
  with pytest.raises(btr.SchemaError, match="'mass' may be missing"):
    btr.load_schema(bad)
  schema = btr.load_schema(SEQUENCE_SCHEMA)
  assert btr.load_schema(schema.to_dict()) == schema
  assert schema.to_dict()["transform"]["features"]["mass_z"] == {
      "scale_to_z_score": "mass"}

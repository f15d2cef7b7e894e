"""beam_tfrecords/schema/sequence.py, on values: The checks of a
SequenceExample schema (`record: sequence_example`)."""

import pytest

from beam_tfrecords import SchemaError
from beam_tfrecords.schema import schema_from_dict
from beam_tfrecords.schema.model import OnBadStep


# ---------------------------------------------------------------------------
# Schema.

SEQ = {"name": "s", "record": "sequence_example", "group_by": "u",
       "sequence": {"v": "int64"}}


def test_on_bad_step_default_and_round_trip():
  schema = schema_from_dict(SEQ)
  assert schema.on_bad_step is OnBadStep.REJECT_GROUP
  assert "on_bad_step" not in schema.to_dict()
  for policy in ("reject_group", "drop_step"):
    schema = schema_from_dict({**SEQ, "on_bad_step": policy})
    assert schema.on_bad_step is OnBadStep(policy)
    again = schema_from_dict(schema.to_dict())
    assert again == schema and again.on_bad_step is OnBadStep(policy)
  assert schema.to_dict()["on_bad_step"] == "drop_step"


@pytest.mark.parametrize("raw,message", [
    ({**SEQ, "on_bad_step": "bogus"},
     "'bogus' is not a policy; allowed: reject_group, drop_step."),
    ({**SEQ, "on_bad_step": "drop_steps"}, 'Did you mean "drop_step"?'),
    ({**SEQ, "on_bad_step": ["drop_step"]}, "is not a policy; allowed: "
     "reject_group, drop_step."),
    ({"name": "s", "record": "sequence_example", "on_bad_step": "drop_step",
      "sequence": {"v": "int64"}}, "it needs group_by"),
])
def test_bad_on_bad_step(raw, message):
  with pytest.raises(SchemaError) as info:
    schema_from_dict(raw)
  assert info.value.key == "on_bad_step"
  assert message in str(info.value)


def test_on_bad_step_in_an_example_schema():
  with pytest.raises(SchemaError, match="belongs to SequenceExample schemas"):
    schema_from_dict({"name": "m", "features": {"a": {"type": "int64"}},
                      "on_bad_step": "drop_step"})

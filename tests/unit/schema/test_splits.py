"""beam_tfrecords/schema/splits.py, on values: The checks of the `splits:`
section: which split each row goes to."""

import pytest

import beam_tfrecords as btr
from beam_tfrecords import SchemaError

from tests.helpers.splits import schema


@pytest.mark.parametrize("splits,key,message", [
    ({"hash": "user", "weights": {"train": "80%", "eval": "10%"}},
     "splits.weights", "percentages add up to 90%, not 100%"),
    ({"hash": "user", "weights": {"train": "80%", "eval": 2}},
     "splits.weights", "mixes percentages and bucket counts"),
    ({"hash": "user", "weights": {"errors": 1}}, "splits.weights.errors",
     "'errors' is not a valid split name"),
    ({"hash": "user", "weights": {"train": 0}}, "splits.weights.train",
     "must be a share above 0"),
    ({"hash": [], "weights": {"train": 1}}, "splits.hash",
     "must name the key column(s) to hash"),
    ({"column": "split"}, "splits", "a column rule needs `values:`"),
    ({"column": "day", "below": {"a": "2026", "b": 3}}, "splits.below",
     "mixes numbers and text"),
    ({"column": "day", "below": {"a": 5, "b": 3}}, "splits.below",
     "bounds must increase"),
    ({"column": "split", "values": {"a": "x", "b": "x"}}, "splits.values.b",
     "'x' already selects split 'a'"),
    ({"hash": "user", "weights": {"train": 1}, "rest": "x"}, "splits.rest",
     "belongs to a column rule"),
    ({"hsah": "user"}, "splits.hsah", 'Did you mean "hash"'),
    ({"hash": "user", "weights": [{"train": 1}, {"train": 2}]},
     "splits.weights", "names 'train' twice"),
    ({"column": "rating", "below": {"a": "3", "b": "4"}}, "splits.below",
     "the bounds are text but column 'rating' is read as float"),
    ({"column": "user", "below": {"a": "2026-11-01"}}, "splits.below",
     "column 'user' is read as int64"),
])
def test_split_schema_mistakes(splits, key, message):
  with pytest.raises(SchemaError) as e:
    btr.load_schema(schema(splits))
  assert f"<dict>: {key}: " in str(e.value)
  assert message in str(e.value)


def test_grouped_sequences_split_only_on_group_columns():
  seq = {"name": "s", "record": "sequence_example", "group_by": "user",
         "splits": {"hash": "item", "weights": {"train": 1, "test": 1}},
         "context": {"user": "int64"}, "sequence": {"item": "int64"}}
  with pytest.raises(SchemaError, match=r"splits: .*'item' is not a group_by "
                     "column; a split rule on it would put rows of one "
                     "sequence into different splits"):
    btr.load_schema(seq)

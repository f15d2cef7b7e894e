"""beam_tfrecords/sources/__init__.py, on values: Sources: input files -> read
units -> Arrow column batches."""

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.sources import plan_inputs

from tests.helpers.cli_builds import SCHEMA_YAML, _write_inputs


@pytest.mark.parametrize("splits,message", [
    ("splits:\n  hash: usr\n  weights: {train: 80%, eval: 20%}\n",
     "'usr' is the split rule's key (fix splits.hash:)"),
    ("splits:\n  column: prt\n  values: [train, eval]\n",
     "'prt' is the split rule's key (fix splits.column:)"),
], ids=["hash", "values"])
def test_a_misspelled_split_column_names_the_split_rule(tmp_path, capsys,
                                                        splits, message):
  schema, data = _write_inputs(tmp_path, [(1, 0.5)], SCHEMA_YAML + splits)
  assert cli.main(["build", "--schema", schema, "--input", data, "--output",
                   str(tmp_path / "out")]) == cli.EXIT_INPUT
  err = capsys.readouterr().err
  assert f"are not in the csv input ({data} has ['id', 'score']): " \
      f"{message}" in err
  assert "source" not in err


# --- A column absent from the input names where the schema uses it ---------

@pytest.fixture
def events_csv(tmp_path):
  path = tmp_path / "events.csv"
  path.write_text("user,step,part,score\n1,1,train,0.5\n")
  return str(path)


@pytest.mark.parametrize("needed,uses", [
    ({"usr": "the split rule's key (fix splits.hash:)"},
     "'usr' (did you mean 'user'?) is the split rule's key (fix "
     "splits.hash:)"),
    ({"prt": "the split rule's key (fix splits.column:)"},
     "'prt' (did you mean 'part'?) is the split rule's key (fix "
     "splits.column:)"),
    ({"session": "a group_by column (fix group_by:)"},
     "'session' is a group_by column (fix group_by:)"),
    ({"stp": "an order_by column (fix order_by:)"},
     "'stp' (did you mean 'step'?) is an order_by column (fix order_by:)"),
    ({"user": "the split rule's key (fix splits.hash:)",
      "scroe": "the source of feature 'score' (fix its source:, or give it "
               "a default:)"},
     "'scroe' (did you mean 'score'?) is the source of feature 'score' (fix "
     "its source:, or give it a default:)"),
    (["usr", "usr"], "'usr' (did you mean 'user'?) is read by the schema"),
], ids=["hash_key", "values_key", "group_by", "order_by", "feature_source",
        "plain_list"])
def test_a_missing_column_names_where_the_schema_uses_it(events_csv, needed,
                                                         uses):
  with pytest.raises(InputError) as e:
    plan_inputs([events_csv], [], needed)
  missing = sorted({c for c in needed if c != "user"})
  assert str(e.value) == (
      f"column(s) {missing} named by the schema are not in the csv input "
      f"({events_csv} has ['user', 'step', 'part', 'score']): {uses}")


def test_a_misspelled_split_key_is_named_by_a_build(events_csv, tmp_path):
  schema = {"name": "t", "features": {"user": {"type": "int64"}},
            "splits": {"hash": "usr", "weights": {"train": 1, "eval": 1}}}
  with pytest.raises(InputError) as e:
    btr.build(schema, events_csv, str(tmp_path / "out"))
  assert str(e.value).endswith(
      "['user', 'step', 'part', 'score']): 'usr' (did you mean 'user'?) is "
      "the split rule's key (fix splits.hash:)")
  assert "source" not in str(e.value)

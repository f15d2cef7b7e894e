"""`inspect` on TFRecord files made by anything, and `validate`."""

import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli

from tests.helpers.cli_builds import _build, _write_inputs
from tests.helpers.paths import ROOT


SCHEMA = {"name": "v", "features": {
    "id": {"type": "int64", "required": True},
    "pair": {"type": "float", "shape": [2], "separator": "|",
             "default": [0.0, 0.0]},
    "tags": {"type": "string", "shape": [-1], "separator": "|"}}}


def test_validate_passes_our_build_and_names_mismatches(tmp_path, capsys):
  src = tmp_path / "in.csv"
  src.write_text("id,pair,tags\n1,1|2,a\n2,,a|b\n3,5|6,\n")
  out = str(tmp_path / "out")
  btr.build(SCHEMA, str(src), out)
  import yaml
  good = tmp_path / "good.yaml"
  good.write_text(yaml.safe_dump(SCHEMA))
  assert cli.main(["validate", "--schema", str(good), out]) == 0
  assert "3 records in 1 file(s) checked against " in capsys.readouterr().out
  wrong = dict(SCHEMA, features={
      "id": {"type": "float", "required": True},
      "pair": {"type": "float", "shape": [3], "default": [0.0, 0.0, 0.0]},
      "extra": {"type": "int64", "required": True},
      "tags": {"type": "string", "shape": [-1]}})
  bad = tmp_path / "bad.yaml"
  bad.write_text(yaml.safe_dump(wrong))
  assert cli.main(["validate", "--schema", str(bad), out]) == 1
  text = capsys.readouterr().out
  assert ": 3 do not parse as it says" in text
  assert '  3 records: feature "extra" is missing (the spec reads it as a ' \
      "FixedLenFeature: required, or with a default)" in text
  assert '  3 records: feature "id" holds int64_list, the schema says ' \
      "float_list" in text
  assert '  3 records: feature "pair" has 2 value(s), the schema says 3 ' \
      "(shape [3])" in text
  assert "train-00000-of-00001.tfrecord.gz record 0: " in text


def test_infer_schema_gives_a_schema_that_builds(tmp_path, capsys):
  src = tmp_path / "Movie Ratings.csv"
  src.write_text("User Id,Age,Price,Title,Genres,Scores,Blank\n"
                 "1,29,9.99,Heat,Crime|Drama,1|2,\n"
                 "2,,0.5,Alien,Horror,3,\n"
                 "3,41,1e3,\"Up, again\",Kids|Fun|Comedy,4|5|6,\n")
  assert cli.main(["infer-schema", "--input", str(src)]) == 0
  text = capsys.readouterr().out
  assert 'name: "Movie_Ratings"\n' in text
  assert '  "user_id": {type: int64, source: "User Id", required: true}  # ' \
      "no missing value in the sample" in text
  assert "  \"age\": {type: int64, source: \"Age\"}  # 1 of 3 sampled values " \
      "missing: add `default:` or `required: true`" in text
  assert '  "genres": {type: string, source: "Genres", shape: [-1], ' \
      'separator: "|", required: true}' in text
  assert '  "scores": {type: int64, source: "Scores", shape: [-1], ' \
      'separator: "|", required: true}' in text
  schema_path = tmp_path / "s.yaml"
  schema_path.write_text(text)
  result = btr.build(str(schema_path), str(src), str(tmp_path / "out"))
  assert result.info.counts.rows_written == 3
  rows = list(btr.iter_records(result.output))
  assert rows[0]["genres"] == ["Crime", "Drama"] and rows[2]["scores"] == [
      4, 5, 6]
  assert rows[2]["price"] == 1000.0 and rows[2]["title"] == "Up, again"


def test_validate_passes_our_sequence_datasets(tmp_path, capsys):
  """Empty steps of optional step features, derive: first/last with list
  shapes and ragged lists parse with the spec; validate agrees."""
  root = ROOT
  schema = os.path.join(root, "schemas", "user_events.yaml")
  src = os.path.join(root, "pipelines", "data", "user_events.csv")
  out = str(tmp_path / "out")
  btr.build(schema, src, out)
  assert cli.main(["validate", "--schema", schema, out]) == 0
  assert ": 0 do not parse as it says" in capsys.readouterr().out
  seq = {"name": "s", "record": "sequence_example", "group_by": "u",
         "order_by": "t",
         "context": {"u": "int64",
                     "firstv": {"type": "float", "shape": [2], "source": "v",
                                "separator": "|", "derive": "first"}},
         "sequence": {"t": "int64", "w": "float",
                      "v": {"type": "float", "shape": [2], "separator": "|"}}}
  data = tmp_path / "e.csv"
  data.write_text("u,t,w,v\n1,1,,1|2\n1,2,0.5,3|4\n2,1,1.5,\n")
  import yaml
  spath = tmp_path / "seq.yaml"
  spath.write_text(yaml.safe_dump(seq))
  built = btr.build(str(spath), str(data), str(tmp_path / "seq"))
  assert built.info.counts.rows_written == 3
  assert cli.main(["validate", "--schema", str(spath),
                   str(tmp_path / "seq")]) == 0


def test_inspect_shows_floats_as_float32_prints_them(tmp_path, capsys):
  assert _build(tmp_path, rows=[(1, 0.24)]) == 0
  capsys.readouterr()
  assert cli.main(["inspect", str(tmp_path / "out")]) == 0
  assert 'record 0: {"id": 1, "score": 0.24}' in capsys.readouterr().out


def test_validate_with_a_schema_of_the_other_record_kind(tmp_path, capsys):
  (tmp_path / "seq.yaml").write_text(
      "name: q\nrecord: sequence_example\ngroup_by: id\ncontext:\n"
      "  id: {type: int64}\nsequence:\n  score: {type: float}\n")
  schema, data = _write_inputs(tmp_path, [(1, 0.5), (1, 0.25), (2, 0.75)])
  assert cli.main(["build", "--schema", str(tmp_path / "seq.yaml"),
                   "--input", data, "--output", str(tmp_path / "seq")]) == 0
  capsys.readouterr()
  assert cli.main(["validate", "--schema", schema,
                   str(tmp_path / "seq")]) == 1
  assert capsys.readouterr().out == (
      "this dataset holds SequenceExamples (dataset.json: record: "
      f"sequence_example), but the schema {schema} describes Examples "
      "(record: example); validate it with a schema of its kind\n")


# --- validate with a schema of the other record kind -----------------------

SEQUENCE_YAML = ("name: q\nrecord: sequence_example\ngroup_by: id\n"
                 "context:\n  id: {type: int64}\nsequence:\n"
                 "  score: {type: float}\n")
EXAMPLE_YAML = ("name: t\nfeatures:\n  id: {type: int64}\n"
                "  score: {type: float}\n")


@pytest.mark.parametrize("built,checked,message", [
    (SEQUENCE_YAML, EXAMPLE_YAML,
     "this dataset holds SequenceExamples (dataset.json: record: "
     "sequence_example), but the schema {schema} describes Examples "
     "(record: example); validate it with a schema of its kind\n"),
    (EXAMPLE_YAML, SEQUENCE_YAML,
     "this dataset holds Examples (dataset.json: record: example), but the "
     "schema {schema} describes SequenceExamples (record: "
     "sequence_example); validate it with a schema of its kind\n"),
], ids=["sequence_data_example_schema", "example_data_sequence_schema"])
def test_validate_with_the_other_record_kind_says_so_once(tmp_path, capsys,
                                                          built, checked,
                                                          message):
  (tmp_path / "built.yaml").write_text(built)
  (tmp_path / "checked.yaml").write_text(checked)
  (tmp_path / "in.csv").write_text("id,score\n" + "".join(
      f"{i % 5},{i / 8}\n" for i in range(40)))
  out = str(tmp_path / "data")
  assert cli.main(["build", "--schema", str(tmp_path / "built.yaml"),
                   "--input", str(tmp_path / "in.csv"), "--output", out]) == 0
  capsys.readouterr()
  schema = str(tmp_path / "checked.yaml")
  assert cli.main(["validate", "--schema", schema, out]) == 1
  assert capsys.readouterr().out == message.format(schema=schema)
  # The schema it was built with still validates it.
  assert cli.main(["validate", "--schema", str(tmp_path / "built.yaml"),
                   out]) == 0

"""beam_tfrecords/inspect/infer.py, on values: infer-schema: a schema file a
person can edit, from a sample of input."""

import beam_tfrecords as btr
from beam_tfrecords import cli


def test_infer_schema_reads_parquet_and_json_lists(tmp_path, capsys):
  import pyarrow as pa
  import pyarrow.parquet as pq
  pq.write_table(pa.table({
      "ids": pa.array([[1, 2], [3]], pa.list_(pa.int64())),
      "vec": pa.array([[0.5, 1.0], [2.0, 3.0]], pa.list_(pa.float32())),
      "blob": pa.array([b"\x00", None]),
      "m": pa.array([{"a": 1}, {"a": 2}])}), tmp_path / "t.parquet")
  assert cli.main(["infer-schema", "--input", str(tmp_path / "t.parquet")]) \
      == 0
  text = capsys.readouterr().out
  assert "  \"ids\": {type: int64, shape: [-1], required: true}" in text
  assert "  \"vec\": {type: float, shape: [2], required: true}" in text
  assert "  \"blob\": {type: bytes}  # 1 of 2 sampled values missing" in text
  # A struct's fields are paths (see tests/e2e/test_nested.py).
  assert '  "m_a": {type: int64, source: "m.a", required: true}' in text
  (tmp_path / "j.jsonl").write_text('{"a": [1, 2], "b": "x"}\n'
                                    '{"a": [], "b": null}\n')
  assert cli.main(["infer-schema", "--input", str(tmp_path / "j.jsonl")]) \
      == 0
  text = capsys.readouterr().out
  assert "  \"a\": {type: int64, shape: [-1], required: true}" in text
  assert "  \"b\": {type: string}  # 1 of 2 sampled values missing" in text


def test_infer_schema_edge_cases(tmp_path, capsys):
  # YAML words as column names, a JSON array file with mixed types, an
  # all-missing column, NA as text (the build reads it as text too).
  (tmp_path / "2024.json").write_text(
      '[{"on": 1, "null": "a", "m": 1}, {"on": 2, "null": null, "m": "x"},'
      ' {"on": 3, "null": "NA", "m": null, "gone": null}]')
  assert cli.main(["infer-schema", "--input",
                   str(tmp_path / "2024.json")]) == 0
  text = capsys.readouterr().out
  assert 'name: "2024"' in text
  assert '  "on": {type: int64, required: true}' in text
  assert '  "m": {type: string}' in text  # 1 and "x": text
  assert '  "gone": {type: string}  # 3 of 3 sampled values missing' in text
  schema_path = tmp_path / "s.yaml"
  schema_path.write_text(text)
  schema = btr.load_schema(str(schema_path))
  assert [f.name for f in schema.features] == ["gone", "m", "null", "on"]
  (tmp_path / "empty.csv").write_text("a,b\n")
  assert cli.main(["infer-schema", "--input", str(tmp_path / "empty.csv")]) \
      == 2
  assert "no rows to look at" in capsys.readouterr().err


def test_infer_schema_proposes_an_empty_card_to_fill_in(tmp_path, capsys):
  """The card's keys with comments, empty: the schema loads as it is (no
  card), says what --croissant required lacks, and takes the values
  written into it."""
  import yaml
  from beam_tfrecords.building.options import BuildOptions
  from beam_tfrecords.schema.card_section import RAI_FIELDS
  (tmp_path / "t.csv").write_text("x,y\n1,a\n2,b\n")
  assert cli.main(["infer-schema", "--input", str(tmp_path / "t.csv")]) == 0
  text = capsys.readouterr().out
  assert "\ndescription: \"\"  # what the data is, in a sentence or two\n" \
      in text
  assert "  license: \"\"  # an SPDX id (CC-BY-4.0, MIT) or its URL; " \
      "--croissant required needs it and the description\n" in text
  for key in RAI_FIELDS:
    assert f"\n    {key}: \"\"  # " in text
  path = tmp_path / "s.yaml"
  path.write_text(text)
  schema = btr.load_schema(str(path))
  assert schema.card is None and schema.description == ""
  assert "card" not in schema.to_dict()
  try:
    BuildOptions(croissant="required").resolved(schema)
    raise AssertionError("a schema without license or description passed")
  except btr.InputError as e:
    assert "description: the schema's top-level" in str(e)
    assert "license: `card: {license: ...}`" in str(e)
  raw = yaml.safe_load(text)
  raw["description"] = "Two rows."
  raw["card"]["license"] = "MIT"
  raw["card"]["rai"]["dataBiases"] = "Tiny."
  schema = btr.load_schema(raw)
  assert (schema.card.license, schema.card.rai) == ("MIT", (
      ("dataBiases", "Tiny."),))
  assert BuildOptions(croissant="required").resolved(
      schema).croissant == "required"

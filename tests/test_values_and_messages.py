"""Six fixes from the issue tracker: an int64 value means the same in every
format, and five messages say what is wrong and what to do."""

import csv
import decimal
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.tfrecord_files import iter_tfrecords
from beam_tfrecords.encoding import columns as col
from beam_tfrecords.schema.model import Feature, FeatureType
from beam_tfrecords.schema.values import convert_cell
from beam_tfrecords.sources import plan_inputs

from conftest import shard_paths

NOT_WHOLE = ("is not a whole number; int64 features take integers (use "
             "type: float for fractions)")
RANGE = "is outside the int64 range [-9223372036854775808, 9223372036854775807]"
SCALAR = Feature("n", FeatureType.INT64)
LIST = Feature("ns", FeatureType.INT64, shape=(-1,), separator="|")


# --- 1. One value, one meaning across formats ------------------------------

def _both_paths(feature, cells):
  """(lists, errors) from the vectorized path over a CSV-like column of
  bytes and over a JSON-like column of str: they must agree."""
  as_csv = col.convert_column(
      feature, pa.array([c.encode() for c in cells], pa.binary()), len(cells))
  as_json = col.convert_column(feature, pa.array(cells, pa.string()),
                               len(cells))
  assert (as_csv[0].to_pylist(), as_csv[1]) == (as_json[0].to_pylist(),
                                                as_json[1])
  return as_csv[0].to_pylist(), as_csv[1]


@pytest.mark.parametrize("text,value", [
    ("1.0", 1), ("2.000", 2), ("-3.0", -3), ("+4.00", 4), (" 7.0 ", 7),
    ("1.", 1), ("-0.0", 0), ("0e30", 0), ("1e3", 1000),
    ("9223372036854775807.0", 2**63 - 1),
    ("-9223372036854775808.000", -2**63),
], ids=["one", "zeros", "negative", "plus", "spaces", "trailing_dot",
        "minus_zero", "zero_exponent", "exponent", "max", "min"])
def test_whole_decimal_text_is_an_exact_int64(text, value):
  assert convert_cell(SCALAR, text) == [value]
  # Alone, and among integer text (the fast path's batches).
  assert _both_paths(SCALAR, [text]) == ([[value]], {})
  assert _both_paths(SCALAR, ["5", text]) == ([[5], [value]], {})
  assert _both_paths(LIST, [f"{text}|{text}"]) == ([[value, value]], {})


@pytest.mark.parametrize("text,reason", [
    ("1.5", f"1.5 {NOT_WHOLE}"),
    ("-2.50", f"-2.5 {NOT_WHOLE}"),
    (" 1.5e0", f"1.5 {NOT_WHOLE}"),
    # A float would round it to 1.0: the text is shown as it is.
    ("1.00000000000000001", f"1.00000000000000001 {NOT_WHOLE}"),
    ("9223372036854775808.0", f"9223372036854775808 {RANGE}"),
    ("-9223372036854775809.0", f"-9223372036854775809 {RANGE}"),
    ("1e30", f"'1e30' {RANGE}"),
], ids=["fraction", "negative_fraction", "exponent_fraction", "tiny_fraction",
        "max_plus_one", "min_minus_one", "huge_exponent"])
def test_other_decimal_text_is_refused_with_its_reason(text, reason):
  with pytest.raises(ValueError) as e:
    convert_cell(SCALAR, text)
  assert str(e.value) == reason
  assert _both_paths(SCALAR, ["5", text]) == ([[5], None], {1: reason})


@pytest.mark.parametrize("cell,result", [
    ("[1.0, 2.000, -3.0]", [1, 2, -3]),
    ("[9223372036854775807.0]", [2**63 - 1]),
    ("[9223372036854775808.0]", f"at position 0: 9223372036854775808 {RANGE}"),
    ("[1.00000000000000001]", f"at position 0: 1.00000000000000001 "
     f"{NOT_WHOLE}"),
    ("[2, 1.5]", f"at position 1: 1.5 {NOT_WHOLE}"),
], ids=["whole", "max", "max_plus_one", "tiny_fraction", "fraction"])
def test_a_json_list_in_a_text_cell_is_read_exactly(cell, result):
  feature = Feature("ns", FeatureType.INT64, shape=(-1,))
  if isinstance(result, list):
    assert convert_cell(feature, cell) == result
  else:
    with pytest.raises(ValueError) as e:
      convert_cell(feature, cell)
    assert str(e.value) == result


@pytest.mark.parametrize("value,result", [
    (decimal.Decimal("3.000"), [3]),
    (decimal.Decimal("1.5"), f"1.5 {NOT_WHOLE}"),
    (decimal.Decimal("1E+30"), f"'1E+30' {RANGE}"),
], ids=["whole", "fraction", "huge"])
def test_a_parquet_decimal_reads_as_its_number(value, result):
  if isinstance(result, list):
    assert convert_cell(SCALAR, value) == result
  else:
    with pytest.raises(ValueError) as e:
      convert_cell(SCALAR, value)
    assert str(e.value) == result


ONE_VALUE_SCHEMA = {"name": "one", "features": {
    "id": {"type": "int64", "required": True},
    "n": {"type": "int64"},
    "ns": {"type": "int64", "shape": [-1], "separator": "|"}}}
# (id, n, ns): None is a missing value (pandas then writes the column as
# floats: "1.0"); 1.5 and 2.5 are rejected.
ONE_VALUE_ROWS = [(1, 1, [1, 2]), (2, None, [5]), (3, -3, [0, 2**53 - 1]),
                  (4, 0, [7]), (5, 1.5, [1]), (6, 2, [3, 2.5]),
                  (7, 2**53 - 1, [-4])]


def _write_formats(tmp_path, rows):
  """The same rows as CSV text, JSON lines numbers, JSON lines strings and
  a Parquet float64 column with nulls."""

  def text(v):
    return repr(float(v))  # "1.0", "-3.0", "1.5", "9007199254740991.0"

  paths = {}
  paths["csv"] = tmp_path / "in.csv"
  paths["csv"].write_text("id,n,ns\n" + "".join(
      f"{i},{'' if n is None else text(n)},{'|'.join(map(text, ns))}\n"
      for i, n, ns in rows))
  paths["json_numbers"] = tmp_path / "numbers.jsonl"
  paths["json_numbers"].write_text("".join(json.dumps(
      {"id": i, "n": None if n is None else float(n),
       "ns": [float(v) for v in ns]}) + "\n" for i, n, ns in rows))
  paths["json_strings"] = tmp_path / "strings.jsonl"
  paths["json_strings"].write_text("".join(json.dumps(
      {"id": i, "n": None if n is None else text(n),
       "ns": [text(v) for v in ns]}) + "\n" for i, n, ns in rows))
  paths["parquet"] = tmp_path / "in.parquet"
  pq.write_table(pa.table({
      "id": pa.array([i for i, _, _ in rows], pa.int64()),
      "n": pa.array([None if n is None else float(n) for _, n, _ in rows],
                    pa.float64()),
      "ns": pa.array([[float(v) for v in ns] for _, _, ns in rows],
                     pa.list_(pa.float64()))}), str(paths["parquet"]))
  return {k: str(v) for k, v in paths.items()}


def test_the_same_values_build_the_same_records_in_every_format(tmp_path, tf):
  records, reasons = {}, {}
  for fmt, src in _write_formats(tmp_path, ONE_VALUE_ROWS).items():
    out = str(tmp_path / f"out-{fmt}")
    btr.build(ONE_VALUE_SCHEMA, src, out, max_bad_fraction=1.0)
    records[fmt] = sorted(r for p in shard_paths(out)
                          for r in iter_tfrecords(p))
    reasons[fmt] = sorted((e["row"], e["reason"])
                          for e in btr.open(out).errors())
  assert len(records["csv"]) == 5
  for fmt in ("json_numbers", "json_strings", "parquet"):
    assert records[fmt] == records["csv"], fmt  # byte for byte
    assert reasons[fmt] == reasons["csv"], fmt
  assert reasons["csv"] == [
      (5, f'In feature "n": 1.5 {NOT_WHOLE}'),
      (6, f'In feature "ns": at position 1: 2.5 {NOT_WHOLE}')]
  spec = {"id": tf.io.FixedLenFeature([], tf.int64),
          "n": tf.io.VarLenFeature(tf.int64),
          "ns": tf.io.VarLenFeature(tf.int64)}
  got = sorted((int(p["id"]), p["n"].values.numpy().tolist(),
                p["ns"].values.numpy().tolist())
               for p in (tf.io.parse_single_example(r, spec)
                         for r in records["csv"]))
  assert got == [(1, [1], [1, 2]), (2, [], [5]), (3, [-3], [0, 2**53 - 1]),
                 (4, [0], [7]), (7, [2**53 - 1], [-4])]


# --- 2. Unknown schema keys get a "did you mean" ---------------------------

FEATURE_KEYS = ("type, shape, source, separator, default, required, "
                "description, expect, vocabulary")


@pytest.mark.parametrize("feature,message", [
    ({"type": "string", "vocabluary": ["a", "b"]},
     f"features.x.vocabluary: unknown key 'vocabluary'; allowed keys: "
     f'{FEATURE_KEYS}. Did you mean "vocabulary"?'),
    ({"type": "string", "vocabulary": ["a"], "requird": True},
     f"features.x.requird: unknown key 'requird'; allowed keys: "
     f'{FEATURE_KEYS}. Did you mean "required"?'),
    ({"type": "string", "resize": [2, 2]},
     f"features.x.resize: unknown key 'resize'; allowed keys: "
     f"{FEATURE_KEYS}. 'resize' goes with type: image."),
    ({"type": "string", "base_dr": "imgs/"},
     f"features.x.base_dr: unknown key 'base_dr'; allowed keys: "
     f'{FEATURE_KEYS}. Did you mean "base_dir" (it goes with type: image or '
     "type: tensor)?"),
    ({"type": "tensr", "dtype": "uint8"},
     "features.x.type: unknown type 'tensr'; supported: int64, float, "
     "bytes, string. Image and array features: image, tensor. Did you mean "
     '"tensor"?'),
    ({"type": "imgae", "resize": [2, 2]},
     "features.x.type: unknown type 'imgae'; supported: int64, float, "
     "bytes, string. Image and array features: image, tensor. Did you mean "
     '"image"?'),
    ({"type": "image", "reszie": [2, 2]},
     "features.x.reszie: unknown key 'reszie'; allowed keys: type, source, "
     "required, description, base_dir, resize, method, convert, encode, "
     'quality, verify. Did you mean "resize"?'),
], ids=["vocabulary", "vocabulary_feature", "image_key_on_string",
        "media_key_typo", "type_typo_tensor", "type_typo_image",
        "image_key_typo"])
def test_an_unknown_feature_key_gets_a_suggestion(feature, message):
  with pytest.raises(btr.SchemaError) as e:
    btr.load_schema({"name": "t", "features": {"x": feature}})
  assert str(e.value) == f"<dict>: {message}"


def test_a_sequence_feature_keeps_its_own_keys():
  # Image keys belong to an example schema's features: none hinted here.
  with pytest.raises(btr.SchemaError) as e:
    btr.load_schema({"name": "t", "record": "sequence_example",
                     "group_by": "id", "context": {"id": "int64"},
                     "sequence": {"x": {"type": "int64", "resize": 2}}})
  assert str(e.value) == (
      "<dict>: sequence.x.resize: unknown key 'resize'; allowed keys: type, "
      "shape, source, separator, default, required, description, expect.")


# --- 3. A CSV header cell over the csv module's limit ----------------------

@pytest.fixture
def raised_csv_limit():
  """The csv module's field limit as the CSV reader leaves it after it met
  a malformed row (it is process-wide)."""
  saved = csv.field_size_limit()
  csv.field_size_limit(1 << 30)
  yield
  csv.field_size_limit(saved)


def _build_cli(tmp_path, data, *extra):
  (tmp_path / "s.yaml").write_text("name: t\nfeatures:\n  id: {type: int64}\n")
  (tmp_path / "in.csv").write_text(data)
  return cli.main(["build", "--schema", str(tmp_path / "s.yaml"), "--input",
                   str(tmp_path / "in.csv"), "--output",
                   str(tmp_path / "out"), *extra])


@pytest.mark.parametrize("header,line,cell", [
    ("id," + "x" * 140_000, "140,003", "140,000"),
    ('id,"a' + ",b" * 70_000, "140,005", "140,001"),
], ids=["long_name", "unbalanced_quote"])
@pytest.mark.parametrize("limit", [None, "raised"], ids=["fresh", "raised"])
def test_a_huge_csv_header_cell_is_a_clean_error(tmp_path, capsys, request,
                                                 header, line, cell, limit):
  if limit:  # the outcome must not depend on what ran before
    request.getfixturevalue("raised_csv_limit")
  assert _build_cli(tmp_path, header + "\n1,2\n") == cli.EXIT_INPUT
  assert capsys.readouterr().err == (
      f"error: {tmp_path / 'in.csv'}: the header (first line, {line} "
      f"characters) holds a column name of {cell} characters, more than "
      "131,072; is it a CSV file with a header line? Check --csv-delimiter "
      "/ --csv-quote-char, or give --csv-no-header --csv-column-names "
      "a,b,c\n")


@pytest.mark.parametrize("extra,message", [
    (["--csv-delimiter", "||"], "error: the CSV delimiter must be one "
     "character, such as ; or a tab ($'\\t' in bash); got '||'\n"),
    (["--csv-delimiter", "\\t"], "error: the CSV delimiter must be one "
     "character, such as ; or a tab ($'\\t' in bash); got '\\\\t'\n"),
    (["--csv-quote-char", "''"], "error: the CSV quote character must be "
     "one character (or empty: values are never quoted); got \"''\"\n"),
], ids=["two_char_delimiter", "backslash_t", "two_char_quote"])
def test_csv_options_the_header_cannot_be_read_with(tmp_path, capsys, extra,
                                                    message):
  assert _build_cli(tmp_path, "id\n1\n", *extra) == cli.EXIT_INPUT
  assert capsys.readouterr().err == message


def test_an_empty_quote_char_reads_the_header_unquoted(tmp_path):
  assert _build_cli(tmp_path, 'id,"x\n1,2\n', "--csv-quote-char", "") == 0
  assert list(btr.iter_records(str(tmp_path / "out"))) == [{"id": 1}]


# --- 4. --preprocess specs that name no module -----------------------------

@pytest.mark.parametrize("spec,message", [
    ("../../etc/passwd:x",
     "--preprocess ../../etc/passwd:x: '../../etc/passwd' is not a Python "
     "module name; give MODULE:FUNCTION with dotted names, as you would "
     "import them (e.g. mypackage.features:clean), not a file path"),
    ("my_pkg/features.py:clean",
     "--preprocess my_pkg/features.py:clean: 'my_pkg/features.py' is not a "
     "Python module name; give MODULE:FUNCTION with dotted names, as you "
     "would import them (e.g. mypackage.features:clean), not a file path; "
     "for the file my_pkg/features.py give my_pkg.features:clean (modules "
     "under the folder the command runs in import)"),
    ("nocolon", "--preprocess takes MODULE:FUNCTION (e.g. "
     "mypackage.features:clean), got 'nocolon': no colon"),
    (":fn", "--preprocess takes MODULE:FUNCTION (e.g. "
     "mypackage.features:clean), got ':fn': the module before the colon is "
     "missing"),
    ("mod:", "--preprocess takes MODULE:FUNCTION (e.g. "
     "mypackage.features:clean), got 'mod:': the function after the colon "
     "is missing"),
    ("mod:not-an-identifier",
     "--preprocess mod:not-an-identifier: 'not-an-identifier' is not a "
     "Python function name; give MODULE:FUNCTION with dotted names, as you "
     "would import them (e.g. mypackage.features:clean), not a file path"),
    ("features.py:clean",
     "--preprocess features.py:clean: cannot import 'features.py' (No module "
     "named 'features'); run from the folder that holds it, or install it; "
     "features.py looks like a file name: give the module, features:clean"),
], ids=["path", "file_path", "no_colon", "no_module", "no_function",
        "bad_function", "py_suffix"])
def test_a_malformed_preprocess_spec_is_a_clean_error(tmp_path, capsys,
                                                      monkeypatch, spec,
                                                      message):
  monkeypatch.chdir(tmp_path)  # no module named features here
  assert _build_cli(tmp_path, "id\n1\n", "--preprocess", spec) == \
      cli.EXIT_INPUT
  assert capsys.readouterr().err == f"error: {message}\n"


def test_a_preprocess_spec_error_is_an_input_error():
  from beam_tfrecords.sources.preprocess import resolve_preprocess
  with pytest.raises(InputError, match="is not a Python module name"):
    resolve_preprocess("../../etc/passwd:x")


# --- 5. validate with a schema of the other record kind --------------------

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


# --- 6. A column absent from the input names where the schema uses it ------

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

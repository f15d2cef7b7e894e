"""Schema loading: valid files, and every mistake named with its fix."""

import pickle

import pytest

import beam_tfrecords as btr
from beam_tfrecords import SchemaError, load_schema
from beam_tfrecords.schema import FeatureType, schema_from_dict

from tests.helpers.bad_input import _write
from tests.helpers.labels import SCHEMA
from tests.helpers.paths import ROOT

OK = {"name": "m", "features": {"a": {"type": "int64"}}}


def _with(feature):
  return {"name": "m", "features": {"a": feature}}


BAD_DICTS = [
    ("not_mapping", ["a"], "", "the top level must be a mapping"),
    ("unknown_top_key", {**OK, "featurs": {}}, "featurs",
     "unknown key 'featurs'"),
    ("missing_name", {"features": OK["features"]}, "name", "missing"),
    ("bad_name", {**OK, "name": "my data!"}, "name", "not a valid dataset name"),
    ("bad_record", {**OK, "record": "examples"}, "record",
     'Did you mean "example"?'),
    ("missing_features", {"name": "m"}, "features", "missing"),
    ("empty_features", {"name": "m", "features": {}}, "features",
     "non-empty mapping"),
    ("feature_not_mapping", _with(5), "features.a", "must be a mapping"),
    ("missing_type", _with({"shape": []}), "features.a.type", "missing"),
    ("unknown_type", _with({"type": "int"}), "features.a.type",
     "unknown type 'int'; supported: int64, float, bytes, string."),
    ("feature_key_typo", _with({"type": "int64", "requird": True}),
     "features.a.requird", 'Did you mean "required"?'),
    ("shape_not_list", _with({"type": "int64", "shape": 3}),
     "features.a.shape", "must be a list of integers"),
    ("shape_zero", _with({"type": "int64", "shape": [0]}), "features.a.shape",
     "dimensions must be positive"),
    ("shape_minus_one_inner", _with({"type": "int64", "shape": [2, -1]}),
     "features.a.shape", "only allowed as the whole shape [-1]"),
    ("separator_on_scalar", _with({"type": "string", "separator": "|"}),
     "features.a.separator", "only list features take a separator"),
    ("empty_separator", _with({"type": "string", "shape": [-1],
                               "separator": ""}),
     "features.a.separator", "must be non-empty text"),
    ("required_not_bool", _with({"type": "int64", "required": "yes"}),
     "features.a.required", "must be true or false"),
    ("required_and_default", _with({"type": "int64", "required": True,
                                    "default": 0}),
     "features.a.default", "cannot have a default"),
    ("default_wrong_type", _with({"type": "int64", "default": "abc"}),
     "features.a.default", "could not parse 'abc' as int64"),
    ("default_int_overflow", _with({"type": "int64", "default": 2**63}),
     "features.a.default", "outside the int64 range"),
    ("default_wrong_length", _with({"type": "float", "shape": [3],
                                    "default": [1.0, 2.0]}),
     "features.a.default", "expected 3 values (shape [3]), got 2"),
    ("default_list_for_scalar", _with({"type": "float", "default": [1.0]}),
     "features.a.default", "is a list but the feature is a scalar"),
    ("default_null", _with({"type": "float", "default": None}),
     "features.a.default", "cannot be null"),
    ("source_not_text", _with({"type": "float", "source": 3}),
     "features.a.source", "must be a column name"),
    ("group_by_in_example", {**OK, "group_by": "user"}, "group_by",
     "belongs to SequenceExample schemas; add record: sequence_example"),
] + [(name, {"name": "s", "record": "sequence_example", **raw}, key, message)
     for name, raw, key, message in [
    ("seq_features_key", {"features": {"a": "int64"}}, "features",
     "declares `context:`"),
    ("seq_missing_sequence", {"context": {"a": "int64"}}, "sequence",
     "missing"),
    ("seq_name_clash", {"context": {"a": "int64"}, "sequence": {"a": "int64"}},
     "context.a", "context and sequence keys must differ"),
    ("seq_unknown_derive", {"context": {"n": {"derive": "lenght"}},
                            "sequence": {"a": "int64"}},
     "context.n.derive", 'Did you mean "length"?'),
    ("seq_length_not_int", {"context": {"n": {"derive": "length",
                                              "type": "float"}},
                            "sequence": {"a": "int64"}},
     "context.n.type", "its type is int64"),
    ("seq_length_with_source", {"context": {"n": {"derive": "length",
                                                  "source": "x"}},
                                "sequence": {"a": "int64"}},
     "context.n.source", "takes no 'source'"),
    ("seq_length_of_unknown", {"context": {"n": {"derive": "length",
                                                 "of": "b"}},
                               "sequence": {"a": "int64"}},
     "context.n.of", "'b' is not a sequence feature"),
    ("seq_first_needs_group", {"context": {"t": {"type": "int64",
                                                 "derive": "first"}},
                               "sequence": {"a": "int64"}},
     "context.t.derive", "needs group_by"),
    ("seq_derive_in_sequence", {"sequence": {"a": {"type": "int64",
                                                   "derive": "length"}}},
     "sequence.a.derive", "unknown key 'derive'"),
    ("seq_order_needs_group", {"order_by": "a", "sequence": {"a": "int64"}},
     "order_by", "needs group_by"),
    ("seq_order_untyped", {"group_by": "u", "order_by": "ts",
                           "sequence": {"a": "int64"}},
     "order_by[0]", "its type is unknown"),
    ("seq_order_direction", {"group_by": "u", "order_by": [{"a": "down"}],
                             "sequence": {"a": "int64"}},
     "order_by[0]", "must be asc or desc"),
    ("seq_order_twice", {"group_by": "u", "order_by": ["a", "a"],
                         "sequence": {"a": "int64"}},
     "order_by[1]", "appears twice"),
    ("seq_group_twice", {"group_by": ["u", "u"], "sequence": {"a": "int64"}},
     "group_by[1]", "appears twice"),
    ("seq_max_length", {"max_length": 0, "sequence": {"a": "int64"}},
     "max_length", "positive number of steps"),
    ("seq_overflow_alone", {"overflow": "split", "sequence": {"a": "int64"}},
     "overflow", "set max_length too"),
    ("seq_overflow_unknown", {"max_length": 5, "overflow": "splt",
                              "sequence": {"a": "int64"}},
     "overflow", 'Did you mean "split"?'),
    ("seq_ragged_grouped", {"group_by": "u", "ragged": True,
                            "sequence": {"a": "int64"}},
     "ragged", "applies to list columns"),
    ("seq_record_bytes", {"max_record_bytes": "3GB",
                          "sequence": {"a": "int64"}},
     "max_record_bytes", "between 1KiB and 1536MiB"),
    ("seq_list_separator_multi", {"sequence": {"a": {
        "type": "int64", "shape": [-1], "separator": " "}}},
     "sequence.a.separator", "JSON lists of lists"),
]]


@pytest.mark.parametrize("raw,key,message", [c[1:] for c in BAD_DICTS],
                         ids=[c[0] for c in BAD_DICTS])
def test_bad_schema_dict(raw, key, message):
  with pytest.raises(SchemaError) as e:
    schema_from_dict(raw, "s.yaml")
  assert e.value.key == key
  assert e.value.path == "s.yaml"
  assert message in str(e.value)
  assert str(e.value).startswith(f"s.yaml: {key}: " if key else "s.yaml: ")


BAD_FILES = [
    ("invalid_yaml", "name: m\nfeatures: {a: {type: int64}\n",
     "not valid YAML: line 3"),
    ("duplicate_feature", "name: m\nfeatures:\n  a: int64\n  a: float\n",
     "key 'a' appears twice (first on line 3)"),
    ("python_object_tag", "name: !!python/object/apply:os.system ['true']\n"
     "features: {a: int64}\n", "not valid YAML"),
    ("not_utf8", b"name: m\xff\n", "not UTF-8"),
]


@pytest.mark.parametrize("text,message", [c[1:] for c in BAD_FILES],
                         ids=[c[0] for c in BAD_FILES])
def test_bad_schema_file(tmp_path, text, message):
  path = tmp_path / "s.yaml"
  if isinstance(text, bytes):
    path.write_bytes(text)
  else:
    path.write_text(text)
  with pytest.raises(SchemaError) as e:
    load_schema(str(path))
  assert message in str(e.value)
  assert str(path) in str(e.value)


def test_missing_file(tmp_path):
  with pytest.raises(SchemaError, match="schema file not found"):
    load_schema(str(tmp_path / "nope.yaml"))


def test_valid_schema_loads_and_round_trips(tmp_path):
  path = tmp_path / "s.yaml"
  path.write_text(
      "name: movies\n"
      "features:\n"
      "  age: {type: int64, source: Age}\n"
      "  movies: {type: string, shape: [-1], source: Movie, separator: '|'}\n"
      "  price: {type: float, source: 'Purchase Price', default: 0}\n"
      "  label: {type: int64, required: true}\n"
      "  blob: bytes\n"
      "  vec: {type: float, shape: [2, 2], default: [[1, 2], [3, 4]]}\n")
  s = load_schema(str(path))
  assert [f.name for f in s.features] == ["age", "blob", "label", "movies",
                                          "price", "vec"]
  assert s.feature("age").column == "Age"
  assert s.feature("blob").type is FeatureType.BYTES
  assert s.feature("price").default == (0.0,)
  assert s.feature("vec").default == (1.0, 2.0, 3.0, 4.0)
  assert s.feature("label").column == "label"
  again = schema_from_dict(s.to_dict())
  assert again == s
  assert pickle.loads(pickle.dumps(s)) == s


def test_every_bundled_schema_loads():
  import glob
  import os
  here = ROOT
  paths = sorted(glob.glob(os.path.join(here, "schemas", "*.yaml")))
  assert paths
  for p in paths:
    assert load_schema(p).name


def test_schema_that_is_not_yaml(tmp_path):
  path = tmp_path / "s.yaml"
  path.write_text("name: bad\nfeatures: {id: {type: int64}\n")
  src = _write(tmp_path, "a.csv", "id\n1\n")
  with pytest.raises(SchemaError, match=r"s.yaml: not valid YAML: line 3, "
                     "column 1"):
    btr.build(str(path), src, str(tmp_path / "out"))


def test_yaml_cannot_construct_objects(tmp_path):
  path = tmp_path / "s.yaml"
  path.write_text("name: !!python/object/apply:os.system ['echo hacked']\n"
                  "features: {id: int64}\n")
  with pytest.raises(SchemaError, match="not valid YAML"):
    btr.load_schema(str(path))


def test_a_label_must_name_a_feature(tmp_path):
  with pytest.raises(btr.SchemaError) as e:
    btr.load_schema(dict(SCHEMA, label="cost"))
  assert str(e.value) == ("<dict>: label: 'cost' is not a feature of this "
                          "schema; its features: price, rooms, size.")


@pytest.mark.parametrize("where", ["default", "vocabulary", "shape"])
def test_yaml_aliases_are_refused_before_any_value_is_formatted(tmp_path,
                                                                where):
  # "Billion laughs": nine levels of nine aliases would be 9**9 strings.
  lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
  for i in range(1, 9):
    lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
  text = "\n".join(lines) + f"\nname: t\nfeatures:\n  a: {{type: string, " \
      f"{where}: *l8}}\n"
  (tmp_path / "s.yaml").write_text(text)
  with pytest.raises(btr.SchemaError) as e:
    btr.load_schema(str(tmp_path / "s.yaml"))
  assert str(e.value) == (f"{tmp_path / 's.yaml'}: not valid YAML: line 2, "
                          "column 10: aliases (*l0) are not allowed in a "
                          "schema; write the value out")


def test_schema_errors_show_a_bounded_preview_of_a_value(tmp_path):
  big = list(range(100_000))
  with pytest.raises(btr.SchemaError) as e:
    btr.load_schema({"name": "t", "features": {
        "a": {"type": "int64", "shape": [2], "default": big}}})
  message = str(e.value)
  assert len(message) < 400, len(message)
  assert "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, " \
      in message
  assert "… (688,890 characters)" in message


# --- More messages ------------------------------------------------------------

def test_a_misspelled_schema_key_gets_a_suggestion(tmp_path):
  (tmp_path / "s.yaml").write_text(
      "name: t\nfeatures:\n  label: {type: string, vocabluary: [a, b]}\n")
  with pytest.raises(btr.SchemaError) as e:
    btr.load_schema(str(tmp_path / "s.yaml"))
  assert str(e.value) == (
      f"{tmp_path / 's.yaml'}: features.label.vocabluary: unknown key "
      "'vocabluary'; allowed keys: type, shape, source, separator, default, "
      'required, description, expect, vocabulary. Did you mean '
      '"vocabulary"?')


# --- Unknown schema keys get a "did you mean" ------------------------------

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

"""Loads and validates schema files.

All validation happens here, before any data is read: a bad schema raises
`SchemaError` naming the file, the key path, the bad value, what is allowed
and how to fix it.
"""

import difflib
import os
import re
from typing import Any, Mapping, Optional, Union

import yaml

from beam_tfrecords.errors import SchemaError
from beam_tfrecords.schema import values as value_rules
from beam_tfrecords.schema.model import Feature, FeatureType, RecordKind, Schema

__all__ = ["load_schema", "schema_from_dict", "FEATURE_TYPES"]

# The feature type registry: the spelling in a schema file -> FeatureType.
FEATURE_TYPES = {t.value: t for t in FeatureType}
_TOP_KEYS = ("name", "record", "description", "features")
_FEATURE_KEYS = ("type", "shape", "source", "separator", "default",
                 "required", "description")
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")


class _UniqueKeySafeLoader(yaml.SafeLoader):
  """yaml.SafeLoader (no object construction) that rejects repeated keys.

  Plain YAML keeps the last of two equal keys, so a feature declared twice
  would silently lose its first definition.
  """


def _construct_mapping(loader, node, deep=False):
  seen = {}
  for key_node, _ in node.value:
    key = loader.construct_object(key_node, deep=deep)
    if key in seen:
      raise yaml.constructor.ConstructorError(
          None, None, f"key {key!r} appears twice (first on line "
          f"{seen[key] + 1}); each key may be given once",
          key_node.start_mark)
    seen[key] = key_node.start_mark.line
  return yaml.SafeLoader.construct_mapping(loader, node, deep)


_UniqueKeySafeLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _suggest(word: str, allowed) -> str:
  close = difflib.get_close_matches(str(word), list(allowed), n=1)
  return f' Did you mean "{close[0]}"?' if close else ""


def _allowed(allowed) -> str:
  return ", ".join(allowed)


class _Checker:
  """Validates one schema dict; every error carries the file and key path."""

  def __init__(self, path: str):
    self.path = path

  def fail(self, key: str, message: str):
    raise SchemaError(message, path=self.path, key=key)

  def check_keys(self, key: str, mapping: Mapping, allowed) -> None:
    for k in mapping:
      if k not in allowed:
        where = f"{key}.{k}" if key else str(k)
        self.fail(where, f"unknown key {k!r}; allowed keys: "
                  f"{_allowed(allowed)}.{_suggest(k, allowed)}")

  def schema(self, raw: Any) -> Schema:
    if not isinstance(raw, dict):
      self.fail("", f"the top level must be a mapping with keys "
                f"{_allowed(_TOP_KEYS)}; got {type(raw).__name__}")
    self.check_keys("", raw, _TOP_KEYS)
    name = raw.get("name")
    if name is None:
      self.fail("name", "missing; every schema names its dataset, e.g. "
                "name: movie_ratings")
    if not isinstance(name, str) or not _NAME_RE.match(name):
      self.fail("name", f"{name!r} is not a valid dataset name; use letters, "
                "digits, '_', '-', '.'")
    record = raw.get("record", "example")
    kinds = [k.value for k in RecordKind]
    if record not in kinds:
      self.fail("record", f"{record!r} is not a record kind; allowed: "
                f"{_allowed(kinds)}.{_suggest(record, kinds)}")
    if record == RecordKind.SEQUENCE_EXAMPLE.value:
      self.fail("record", "sequence_example is not supported by this "
                "version yet; use record: example")
    description = raw.get("description", "")
    if not isinstance(description, str):
      self.fail("description", "must be text")
    features = raw.get("features")
    if features is None:
      self.fail("features", "missing; an example schema declares its "
                "features, e.g. features: {age: {type: int64}}")
    if not isinstance(features, dict) or not features:
      self.fail("features", "must be a non-empty mapping of feature name -> "
                f"definition; got {features!r}")
    parsed = [self.feature(str(k), k, v) for k, v in features.items()]
    return Schema(name=name, record=RecordKind(record),
                  features=tuple(sorted(parsed, key=lambda f: f.name)),
                  description=description, path=self.path)

  def feature(self, name: str, raw_name: Any, raw: Any) -> Feature:
    key = f"features.{name}"
    if not isinstance(raw_name, str) or not raw_name:
      self.fail(key, f"feature names must be non-empty text; got "
                f"{raw_name!r}")
    if isinstance(raw, str):  # shorthand: `age: int64`
      raw = {"type": raw}
    if not isinstance(raw, dict):
      self.fail(key, f"must be a mapping such as {{type: int64}} or a type "
                f"name; got {raw!r}")
    self.check_keys(key, raw, _FEATURE_KEYS)
    if "type" not in raw:
      self.fail(f"{key}.type", "missing; allowed types: "
                f"{_allowed(FEATURE_TYPES)}")
    type_name = raw["type"]
    if type_name not in FEATURE_TYPES:
      self.fail(f"{key}.type", f"unknown type {type_name!r}; supported: "
                f"{_allowed(FEATURE_TYPES)}.{_suggest(type_name, FEATURE_TYPES)}")
    ftype = FEATURE_TYPES[type_name]
    shape = self.shape(f"{key}.shape", raw.get("shape", []))
    source = raw.get("source")
    if source is not None and (not isinstance(source, str) or not source):
      self.fail(f"{key}.source", f"must be a column name (text); got "
                f"{source!r}")
    separator = raw.get("separator")
    if separator is not None:
      if not isinstance(separator, str) or not separator:
        self.fail(f"{key}.separator", f"must be non-empty text such as "
                  f"\"|\"; got {separator!r}")
      if not shape:
        self.fail(f"{key}.separator", "only list features take a separator; "
                  "add shape: [-1] (or a fixed length such as [3])")
    required = raw.get("required", False)
    if not isinstance(required, bool):
      self.fail(f"{key}.required", f"must be true or false; got {required!r}")
    description = raw.get("description", "")
    if not isinstance(description, str):
      self.fail(f"{key}.description", "must be text")
    feature = Feature(name=name, type=ftype, shape=shape, source=source,
                      separator=separator, required=required,
                      description=description)
    if "default" in raw:
      if required:
        self.fail(f"{key}.default", "a required feature cannot have a "
                  "default; drop one of them")
      feature = self.default(f"{key}.default", feature, raw["default"])
    return feature

  def shape(self, key: str, raw: Any):
    if not isinstance(raw, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in raw):
      self.fail(key, f"must be a list of integers: [] scalar, [n] fixed "
                f"length, [-1] variable length; got {raw!r}")
    if -1 in raw and raw != [-1]:
      self.fail(key, f"{raw!r}: -1 (variable length) is only allowed as "
                "the whole shape [-1]")
    if any(d == 0 or d < -1 for d in raw):
      self.fail(key, f"{raw!r}: dimensions must be positive (or the "
                "single -1)")
    return tuple(raw)

  def default(self, key: str, feature: Feature, raw: Any) -> Feature:
    if raw is None:
      self.fail(key, "a default cannot be null; remove it to leave missing "
                "values empty")
    if feature.is_scalar and isinstance(raw, list):
      self.fail(key, f"{raw!r} is a list but the feature is a scalar "
                "(shape [])")
    try:
      values = value_rules.convert_cell(feature, raw)
    except ValueError as e:
      self.fail(key, f"{raw!r} is not a valid {feature.type.value} default: "
                f"{e}")
    return Feature(**{**feature.__dict__, "default": tuple(values)})


def schema_from_dict(raw: Any, path: str = "<dict>") -> Schema:
  """Validates a schema given as a plain dict (as a YAML file holds)."""
  return _Checker(path).schema(raw)


def load_schema(source: Union[str, os.PathLike, Mapping, Schema],
                path: Optional[str] = None) -> Schema:
  """Loads a schema from a YAML file path, a dict, or returns a Schema as is.

  Paths are opened with Beam's FileSystems, so gs:// and s3:// work.

  Raises:
    SchemaError: the file is missing, not YAML, or not a valid schema.
  """
  if isinstance(source, Schema):
    return source
  if isinstance(source, Mapping):
    return schema_from_dict(dict(source), path or "<dict>")
  path = os.fspath(source)
  text = _read_text(path)
  try:
    raw = yaml.load(text, Loader=_UniqueKeySafeLoader)
  except yaml.YAMLError as e:
    mark = getattr(e, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    problem = getattr(e, "problem", None) or str(e)
    raise SchemaError(f"not valid YAML: {where}{problem}", path=path) from None
  return schema_from_dict(raw, path)


def _read_text(path: str) -> str:
  from apache_beam.io.filesystems import FileSystems
  try:
    if not FileSystems.exists(path):
      raise SchemaError("schema file not found", path=path)
    with FileSystems.open(path, compression_type="uncompressed") as f:
      data = f.read()
  except SchemaError:
    raise
  except Exception as e:  # FileSystems raises many kinds of I/O errors.
    raise SchemaError(f"cannot read the schema file: {e}", path=path) from None
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise SchemaError(f"not UTF-8 text (byte {e.start})", path=path) from None

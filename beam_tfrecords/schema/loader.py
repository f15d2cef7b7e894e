"""Loads and validates schema files.

All validation happens here, before any data is read: a bad schema raises
`SchemaError` naming the file, the key path, the bad value, what is allowed
and how to fix it. This module reads the file and the keys every schema
shares (name, record, description, limits, splits, label); each section
has its own checker module:

  features    plain features: types, shapes, defaults, sources, derive
  media       image, tensor and vocabulary declarations
  splits      the `splits:` rule
  sequence    `record: sequence_example` schemas
  transform   the `transform:` section
  checking    the error helper they share
"""

import dataclasses
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import yaml

from beam_tfrecords.core.errors import SchemaError, preview
from beam_tfrecords.schema.checking import Checker, listed, suggest
from beam_tfrecords.schema.expect import (check_disjoint_keys, parse_baseline,
                                          parse_dataset_expect,
                                          parse_on_anomaly)
from beam_tfrecords.schema.features import FEATURE_TYPES, NAME_RE, parse_feature
from beam_tfrecords.schema.media_features import media_kind, parse_media
from beam_tfrecords.schema.card_section import parse_card
from beam_tfrecords.schema.model import Feature, Media, RecordKind, Schema
from beam_tfrecords.schema.sequence import (SEQUENCE_TOP_KEYS,
                                            check_split_columns,
                                            sequence_schema)
from beam_tfrecords.schema.sizes import parse_size
from beam_tfrecords.schema.splits import check_split_types, parse_splits
from beam_tfrecords.schema.tft_section import parse_transform

# parse_size lives in schema.sizes; it stays importable from here.
__all__ = ["load_schema", "schema_from_dict", "FEATURE_TYPES", "parse_size"]

_TOP_KEYS = ("name", "record", "description", "features", "label",
             "max_bad_rows", "max_bad_fraction", "splits", "transform",
             "expect", "baseline", "on_anomaly", "card")


class _UniqueKeySafeLoader(yaml.SafeLoader):
  """yaml.SafeLoader (no object construction) that rejects repeated keys
  and aliases.

  Plain YAML keeps the last of two equal keys, so a feature declared twice
  would silently lose its first definition. An alias (`*name`) shares one
  node under many keys: a chain of them ("billion laughs") expands a
  550-byte file into gigabytes when a value is formatted for a message, so
  none is accepted (a schema has no need to repeat a value by reference).
  """

  def compose_node(self, parent: Any, index: Any) -> Any:
    if self.check_event(yaml.AliasEvent):
      event = self.peek_event()
      raise yaml.composer.ComposerError(
          None, None, f"aliases (*{event.anchor}) are not allowed in a "
          "schema; write the value out", event.start_mark)
    return super().compose_node(parent, index)


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode,
                       deep: bool = False) -> dict:
  seen: Dict[Any, int] = {}
  for key_node, _ in node.value:
    key = loader.construct_object(key_node, deep=deep)
    if key in seen:
      raise yaml.constructor.ConstructorError(
          None, None, f"key {preview(key)} appears twice (first on line "
          f"{seen[key] + 1}); each key may be given once",
          key_node.start_mark)
    seen[key] = key_node.start_mark.line
  return yaml.SafeLoader.construct_mapping(loader, node, deep)


_UniqueKeySafeLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def schema_from_dict(raw: Any, path: str = "<dict>") -> Schema:
  """Validates a schema given as a plain dict (as a YAML file holds)."""
  check = Checker(path)
  schema = _schema(check, raw)
  if raw.get("label") is None:
    return schema
  return dataclasses.replace(schema,
                             label=_label(check, raw["label"], schema))


def _schema(check: Checker, raw: Any) -> Schema:
  """The keys every schema has, then its record kind's own sections."""
  if not isinstance(raw, dict):
    check.fail("", f"the top level must be a mapping with keys "
               f"{listed(_TOP_KEYS)}; got {type(raw).__name__}")
  name = raw.get("name")
  if name is None:
    check.fail("name", "missing; every schema names its dataset, e.g. "
               "name: movie_ratings")
  if not isinstance(name, str) or not NAME_RE.match(name):
    check.fail("name",
               f"{preview(name)} is not a valid dataset name; use letters, "
               "digits, '_', '-', '.'")
  record = raw.get("record", "example")
  kinds = [k.value for k in RecordKind]
  if record not in kinds:
    check.fail("record", f"{preview(record)} is not a record kind; allowed: "
               f"{listed(kinds)}.{suggest(record, kinds)}")
  description = raw.get("description", "")
  if not isinstance(description, str):
    check.fail("description", "must be text")
  limits = _limits(check, raw)
  if record == RecordKind.SEQUENCE_EXAMPLE.value:
    schema = dataclasses.replace(
        sequence_schema(check, raw, name, description), **limits)
    if schema.expect is not None and schema.expect.disjoint_keys:
      check_disjoint_keys(check, bool(schema.group_by))
    check_split_columns(check, schema)
    return _with_transform(check, raw, check_split_types(check, schema))
  for k in raw:
    if k not in _TOP_KEYS and k in SEQUENCE_TOP_KEYS:
      check.fail(str(k),
                 f"{preview(k)} belongs to SequenceExample schemas; add "
                 "record: sequence_example")
  check.check_keys("", raw, _TOP_KEYS)
  parsed, media = _example_features(check, raw.get("features"))
  schema = check_split_types(check, Schema(
      name=name, record=RecordKind(record),
      features=tuple(sorted(parsed, key=lambda f: f.name)),
      description=description, path=check.path, media=tuple(media),
      **limits))
  return _with_transform(check, raw, schema)


def _with_transform(check: Checker, raw: dict, schema: Schema) -> Schema:
  if raw.get("transform") is None:
    return schema
  return dataclasses.replace(
      schema, transform=parse_transform(check, raw["transform"], schema))


def _example_features(check: Checker,
                      features: Any) -> Tuple[List[Feature], List[Media]]:
  """An example schema's `features:`: the stored features (those of the
  image / tensor / vocabulary declarations included), and the
  declarations."""
  if features is None:
    check.fail("features", "missing; an example schema declares its "
               "features, e.g. features: {age: {type: int64}}")
  if not isinstance(features, dict) or not features:
    check.fail("features", "must be a non-empty mapping of feature name -> "
               f"definition; got {preview(features)}")
  parsed: List[Feature] = []
  media: List[Media] = []
  for k, v in features.items():
    kind = media_kind(v)
    if kind is None:
      parsed.append(parse_feature(check, str(k), k, v))
      continue
    declared, stored = parse_media(check, str(k), k, v, kind)
    media.append(declared)
    parsed.extend(stored)
  names = [f.name for f in parsed]
  for m in media:
    for n in m.stored:
      if names.count(n) > 1:
        check.fail(f"features.{m.name}",
                   f"makes the feature {preview(n)}, which "
                   "is also declared; rename one of them")
  return parsed, media


def _label(check: Checker, raw: Any, schema: Schema) -> Tuple[str, ...]:
  """`label: price` or `label: [a, b]`: the features a supervised reader
  takes apart (context features of a SequenceExample)."""
  names = [raw] if isinstance(raw, str) else raw
  if not isinstance(names, list) or not names or not all(
      isinstance(n, str) for n in names):
    check.fail("label", "must name a feature, or a list of features; got "
               f"{preview(raw)}")
  stored = [f.name for f in (schema.context if schema.is_sequence
                             else schema.features)]
  for n in names:
    if n not in stored:
      where = "context feature" if schema.is_sequence else "feature"
      check.fail("label", f"{preview(n)} is not a {where} of this schema; "
                 f"its {where}s: {listed(stored)}."
                 f"{suggest(n, stored)}")
  if len(set(names)) != len(names):
    check.fail("label", "names a feature twice")
  return tuple(names)


def _limits(check: Checker, raw: dict) -> Dict[str, Any]:
  """max_bad_rows / max_bad_fraction (when a build fails instead) and the
  `splits:` rule: the Schema fields both record kinds share."""
  out: Dict[str, Any] = {}
  rows = raw.get("max_bad_rows")
  if rows is not None:
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
      check.fail("max_bad_rows", f"must be a whole number >= 0; got "
                 f"{preview(rows)}")
    out["max_bad_rows"] = rows
  fraction = raw.get("max_bad_fraction")
  if fraction is not None:
    if isinstance(fraction, bool) or not isinstance(
        fraction, (int, float)) or not 0 <= fraction <= 1:
      check.fail("max_bad_fraction", f"must be a number from 0 to 1 (0.01 "
                 f"= 1% of the rows read); got {preview(fraction)}")
    out["max_bad_fraction"] = float(fraction)
  if raw.get("splits") is not None:
    out["splits"] = parse_splits(check, raw["splits"])
  if raw.get("expect") is not None:
    out["expect"] = parse_dataset_expect(check, raw["expect"])
  if raw.get("baseline") is not None:
    out["baseline"] = parse_baseline(check, raw["baseline"])
  if raw.get("on_anomaly") is not None:
    out["on_anomaly"] = parse_on_anomaly(check, raw["on_anomaly"])
  if raw.get("card") is not None:
    out["card"] = parse_card(check, raw["card"])
  return out


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
  from beam_tfrecords.core import fs  # pylint: disable=import-outside-toplevel
  try:
    if not fs.exists(path):
      raise SchemaError("schema file not found", path=path)
    with fs.open_read(path, fs.UNCOMPRESSED) as f:
      data = f.read()
  except SchemaError:
    raise
  except Exception as e:  # FileSystems raises many kinds of I/O errors.
    raise SchemaError(f"cannot read the schema file: {e}", path=path) from None
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise SchemaError(f"not UTF-8 text (byte {e.start})", path=path) from None

"""Loads and validates schema files.

All validation happens here, before any data is read: a bad schema raises
`SchemaError` naming the file, the key path, the bad value, what is allowed
and how to fix it.
"""

import dataclasses
import difflib
import os
import re
from typing import Any, Mapping, Optional, Tuple, Union

import yaml

from beam_tfrecords.errors import SchemaError, preview
from beam_tfrecords.schema import values as value_rules
from beam_tfrecords.schema.model import (Derive, Feature, FeatureType,
                                        Media, MediaKind, OnBadStep, OrderKey,
                                        Overflow, RecordKind, Schema, SplitKind,
                                        SplitRule, TRANSFORMS, Transform,
                                        TransformSpec, made_column,
                                        DEFAULT_SPLIT, IMAGE_CONVERTS,
                                        IMAGE_ENCODES, IMAGE_METHODS)

__all__ = ["load_schema", "schema_from_dict", "FEATURE_TYPES", "parse_size"]

# The feature type registry: the spelling in a schema file -> FeatureType.
FEATURE_TYPES = {t.value: t for t in FeatureType}
_TOP_KEYS = ("name", "record", "description", "features", "label",
             "max_bad_rows", "max_bad_fraction", "splits", "transform")
_SEQUENCE_TOP_KEYS = ("name", "record", "description", "context", "sequence",
                      "group_by", "order_by", "max_length", "overflow",
                      "on_bad_step", "ragged", "max_record_bytes",
                      "max_bad_rows", "max_bad_fraction", "splits", "label")
_FEATURE_KEYS = ("type", "shape", "source", "separator", "default",
                 "required", "description")
_CONTEXT_KEYS = _FEATURE_KEYS + ("derive", "of")
_ORDER_KEYS = ("column", "type", "descending")
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B|B)?\s*$",
                      re.I)
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(raw: Any) -> Optional[int]:
  """Bytes from an int or text such as 256MB, 1.5GiB, 64KiB, 1000 (None if
  it is neither)."""
  if isinstance(raw, int) and not isinstance(raw, bool):
    return raw
  if isinstance(raw, str):
    m = _SIZE_RE.match(raw)
    if m:
      return int(float(m.group(1)) * _SIZE_UNITS[(m.group(2) or "b").lower()])
  return None


# Protobuf's hard limit is 2 GiB; leave room for framing and parsing.
_MAX_RECORD_BYTES_LIMIT = 1536 * 2**20

# Roles a feature plays; they decide which keys it may use.
_EXAMPLE, _CONTEXT, _STEPS, _LISTS = "example", "context", "steps", "lists"
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")
# Feature names the transform step uses for its own passthrough columns.
RESERVED_PREFIX = "__btr_"
_MEDIA_KEYS = ("type", "source", "required", "description", "base_dir")
_IMAGE_KEYS = _MEDIA_KEYS + ("resize", "method", "convert", "encode",
                             "quality", "verify")
_TENSOR_KEYS = _MEDIA_KEYS + ("dtype", "shape", "storage", "from",
                              "separator")
# Keys of image / tensor declarations that a plain feature does not take,
# with the type that does (for the message when a plain feature has one).
_MEDIA_ONLY_KEYS = {
    k: " or ".join(f"type: {t}" for t, keys in (("image", _IMAGE_KEYS),
                                                 ("tensor", _TENSOR_KEYS))
                   if k in keys)
    for k in _IMAGE_KEYS + _TENSOR_KEYS if k not in _FEATURE_KEYS}
_MEDIA_TYPES = (MediaKind.IMAGE.value, MediaKind.TENSOR.value)
TENSOR_DTYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32",
                 "int64", "float16", "float32", "float64")
# Split names become file name prefixes.
_SPLIT_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SPLIT_KEYS = ("hash", "weights", "column", "values", "below", "rest")
_WEIGHT_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$")


class _UniqueKeySafeLoader(yaml.SafeLoader):
  """yaml.SafeLoader (no object construction) that rejects repeated keys
  and aliases.

  Plain YAML keeps the last of two equal keys, so a feature declared twice
  would silently lose its first definition. An alias (`*name`) shares one
  node under many keys: a chain of them ("billion laughs") expands a
  550-byte file into gigabytes when a value is formatted for a message, so
  none is accepted (a schema has no need to repeat a value by reference).
  """

  def compose_node(self, parent, index):
    if self.check_event(yaml.AliasEvent):
      event = self.peek_event()
      raise yaml.composer.ComposerError(
          None, None, f"aliases (*{event.anchor}) are not allowed in a "
          "schema; write the value out", event.start_mark)
    return super().compose_node(parent, index)


def _construct_mapping(loader, node, deep=False):
  seen = {}
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


def _closest(word: str, allowed) -> Optional[str]:
  close = difflib.get_close_matches(str(word), list(allowed), n=1)
  return close[0] if close else None


def _suggest(word: str, allowed) -> str:
  close = _closest(word, allowed)
  return f' Did you mean "{close}"?' if close else ""


def _allowed(allowed) -> str:
  return ", ".join(allowed)


class _Checker:
  """Validates one schema dict; every error carries the file and key path."""

  def __init__(self, path: str):
    self.path = path

  def fail(self, key: str, message: str):
    raise SchemaError(message, path=self.path, key=key)

  def check_keys(self, key: str, mapping: Mapping, allowed,
                 elsewhere: Optional[Mapping[str, str]] = None) -> None:
    """Fails on a key not in `allowed`; `elsewhere` maps keys taken here
    only by another type of feature to that type (said when one is used,
    or is the closest match)."""
    elsewhere = elsewhere or {}
    for k in mapping:
      if k not in allowed:
        where = f"{key}.{k}" if key else str(k)
        close = _closest(k, list(allowed) + list(elsewhere))
        if k in elsewhere:
          hint = f" {preview(k)} goes with {elsewhere[k]}."
        elif close in elsewhere:
          hint = f' Did you mean "{close}" (it goes with {elsewhere[close]})?'
        else:
          hint = _suggest(k, allowed)
        self.fail(where, f"unknown key {preview(k)}; allowed keys: "
                  f"{_allowed(allowed)}.{hint}")

  def schema(self, raw: Any) -> Schema:
    schema = self._schema(raw)
    if raw.get("label") is None:
      return schema
    return dataclasses.replace(schema, label=self.label(raw["label"], schema))

  def label(self, raw: Any, schema: Schema) -> Tuple[str, ...]:
    """`label: price` or `label: [a, b]`: the features a supervised reader
    takes apart (context features of a SequenceExample)."""
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not names or not all(
        isinstance(n, str) for n in names):
      self.fail("label", "must name a feature, or a list of features; got "
                f"{preview(raw)}")
    stored = [f.name for f in (schema.context if schema.is_sequence
                               else schema.features)]
    for n in names:
      if n not in stored:
        where = "context feature" if schema.is_sequence else "feature"
        self.fail("label", f"{preview(n)} is not a {where} of this schema; "
                  f"its {where}s: {_allowed(stored)}."
                  f"{_suggest(n, stored)}")
    if len(set(names)) != len(names):
      self.fail("label", "names a feature twice")
    return tuple(names)

  def _schema(self, raw: Any) -> Schema:
    if not isinstance(raw, dict):
      self.fail("", f"the top level must be a mapping with keys "
                f"{_allowed(_TOP_KEYS)}; got {type(raw).__name__}")
    name = raw.get("name")
    if name is None:
      self.fail("name", "missing; every schema names its dataset, e.g. "
                "name: movie_ratings")
    if not isinstance(name, str) or not _NAME_RE.match(name):
      self.fail("name",
                f"{preview(name)} is not a valid dataset name; use letters, "
                "digits, '_', '-', '.'")
    record = raw.get("record", "example")
    kinds = [k.value for k in RecordKind]
    if record not in kinds:
      self.fail("record", f"{preview(record)} is not a record kind; allowed: "
                f"{_allowed(kinds)}.{_suggest(record, kinds)}")
    description = raw.get("description", "")
    if not isinstance(description, str):
      self.fail("description", "must be text")
    limits = self.limits(raw)
    if record == RecordKind.SEQUENCE_EXAMPLE.value:
      schema = dataclasses.replace(
          self.sequence_schema(raw, name, description), **limits)
      keys = [c for c, _ in schema.group_by]
      for column in schema.splits.columns:
        if keys and column not in keys:
          self.fail("splits",
                    f"{preview(column)} is not a group_by column; a split "
                    "rule on it would put rows of one sequence into "
                    f"different splits (group_by: {keys})")
      return self.check_split_types(schema)
    for k in raw:
      if k not in _TOP_KEYS and k in _SEQUENCE_TOP_KEYS:
        self.fail(str(k),
                  f"{preview(k)} belongs to SequenceExample schemas; add "
                  "record: sequence_example")
    self.check_keys("", raw, _TOP_KEYS)
    features = raw.get("features")
    if features is None:
      self.fail("features", "missing; an example schema declares its "
                "features, e.g. features: {age: {type: int64}}")
    if not isinstance(features, dict) or not features:
      self.fail("features", "must be a non-empty mapping of feature name -> "
                f"definition; got {preview(features)}")
    parsed, media = [], []
    for k, v in features.items():
      kind = self.media_kind(str(k), v)
      if kind is None:
        parsed.append(self.feature(str(k), k, v))
        continue
      declared, stored = self.media(str(k), k, v, kind)
      media.append(declared)
      parsed.extend(stored)
    names = [f.name for f in parsed]
    for m in media:
      for n in m.stored:
        if names.count(n) > 1:
          self.fail(f"features.{m.name}",
                    f"makes the feature {preview(n)}, which "
                    "is also declared; rename one of them")
    schema = self.check_split_types(Schema(
        name=name, record=RecordKind(record),
        features=tuple(sorted(parsed, key=lambda f: f.name)),
        description=description, path=self.path, media=tuple(media),
        **limits))
    if raw.get("transform") is not None:
      schema = dataclasses.replace(
          schema, transform=self.transform(raw["transform"], schema))
    return schema

  def transform(self, raw: Any, schema: Schema) -> TransformSpec:
    """The `transform:` section (see beam_tfrecords.tft)."""
    if not isinstance(raw, dict):
      self.fail("transform", "must be a mapping: {features: {rating_z: "
                "{scale_to_z_score: rating}, ...}, keep_raw: true}")
    self.check_keys("transform", raw, ("features", "keep_raw",
                                       "analyze_split"))
    keep_raw = raw.get("keep_raw", True)
    if not isinstance(keep_raw, bool):
      self.fail("transform.keep_raw", "must be true or false")
    split = raw.get("analyze_split", DEFAULT_SPLIT)
    if split not in schema.splits.names:
      self.fail("transform.analyze_split",
                f"{preview(split)} is not a split of "
                f"this schema; its splits: {list(schema.splits.names)}")
    features = raw.get("features")
    if not isinstance(features, dict) or not features:
      self.fail("transform.features", "must map output feature names to "
                "{analyzer: input feature, parameters...}, e.g. rating_z: "
                "{scale_to_z_score: rating}")
    stored = {f.name: f for f in schema.features}
    for n in stored:
      if n.startswith(RESERVED_PREFIX):
        self.fail(f"features.{n}", f"names starting with "
                  f"{RESERVED_PREFIX!r} are reserved for the build's own "
                  "columns (with transform:)")
    out = []
    for name, spec in features.items():
      key = f"transform.features.{name}"
      if not isinstance(name, str) or not _NAME_RE.match(name):
        self.fail(key, f"{preview(name)} is not a valid feature name")
      if name.startswith(RESERVED_PREFIX):
        self.fail(key, f"names starting with {preview(RESERVED_PREFIX)} are "
                  "reserved for the build's own columns")
      if not isinstance(spec, dict):
        self.fail(key, f"must be a mapping such as {{scale_to_z_score: "
                  f"rating}}; got {preview(spec)}")
      ops = [k for k in spec if k in TRANSFORMS]
      if len(ops) != 1:
        self.fail(key, f"needs exactly one analyzer of "
                  f"{_allowed(TRANSFORMS)}; got {sorted(spec)}"
                  f"{_suggest(next(iter(spec), ''), TRANSFORMS)}")
      op = ops[0]
      types, params = TRANSFORMS[op]
      self.check_keys(key, spec, (op,) + params)
      source = spec[op]
      if not isinstance(source, str) or source not in stored:
        self.fail(f"{key}.{op}", f"{preview(source)} is not a stored feature; "
                  f"allowed: {_allowed(sorted(stored))}."
                  f"{_suggest(source, stored)}")
      feature = stored[source]
      if feature.type.value not in types:
        self.fail(f"{key}.{op}", f"{op} takes {' or '.join(types)} "
                  f"features; {preview(source)} is {feature.type.value}")
      if op != "pass" and not (feature.always_present
                               and not feature.is_variable_length):
        self.fail(f"{key}.{op}", f"{preview(source)} may be missing or vary in "
                  "length; TensorFlow Transform's analyzers need a value "
                  "in every record: give it required: true or a default")
      values = []
      for p in params:
        if p in spec:
          v = spec[p]
          low = 2 if p == "num_buckets" else (0 if p in (
              "frequency_threshold", "num_oov_buckets") else 1)
          if isinstance(v, bool) or not isinstance(v, int) or v < low:
            self.fail(f"{key}.{p}", f"must be a whole number of at least "
                      f"{low}; got {preview(v)}")
          values.append((p, v))
      if op == "bucketize" and "num_buckets" not in spec:
        self.fail(f"{key}.num_buckets", "missing; how many buckets?")
      if op == "hash_strings" and "hash_buckets" not in spec:
        self.fail(f"{key}.hash_buckets", "missing; how many buckets?")
      out.append(Transform(name=name, op=op, source=source,
                           params=tuple(values)))
    return TransformSpec(features=tuple(out), keep_raw=keep_raw,
                         analyze_split=split)

  def media_kind(self, name: str, raw: Any) -> Optional[MediaKind]:
    if isinstance(raw, str):
      raw = {"type": raw}
    if not isinstance(raw, dict):
      return None
    if raw.get("type") in (MediaKind.IMAGE.value, MediaKind.TENSOR.value):
      return MediaKind(raw["type"])
    if "vocabulary" in raw:
      return MediaKind.VOCABULARY
    return None

  def media(self, name: str, raw_name: Any, raw: Any, kind: MediaKind):
    """An image / tensor / vocabulary declaration: (Media, stored
    features)."""
    key = f"features.{name}"
    if not _NAME_RE.match(name):
      self.fail(key, f"{preview(name)} is not a valid feature name")
    if isinstance(raw, str):
      raw = {"type": raw}
    allowed = {MediaKind.IMAGE: _IMAGE_KEYS, MediaKind.TENSOR: _TENSOR_KEYS,
               MediaKind.VOCABULARY: _FEATURE_KEYS + ("vocabulary",)}[kind]
    self.check_keys(key, raw, allowed)
    required, description = self.required_and_description(key, raw)
    declared = dict(raw)
    if kind is MediaKind.VOCABULARY:
      plain = {k: v for k, v in raw.items() if k != "vocabulary"}
      feature = self.feature(name, raw_name, plain)
      if feature.type is not FeatureType.STRING or not feature.is_scalar:
        self.fail(f"{key}.vocabulary", "goes with a scalar string feature "
                  "(type: string), whose values it numbers")
      if feature.default is not None:
        self.fail(f"{key}.default", "a feature with a vocabulary takes no "
                  "default (its index would have to be made up)")
      vocab = raw["vocabulary"]
      if vocab != "auto":
        if not isinstance(vocab, list) or not vocab or not all(
            isinstance(v, str) for v in vocab):
          self.fail(f"{key}.vocabulary", "must be auto (the sorted values "
                    "found: class folder names for images) or a list of "
                    f"the values in index order; got {preview(vocab)}")
        if len(set(vocab)) != len(vocab):
          self.fail(f"{key}.vocabulary", "lists a value twice")
      index = Feature(name=f"{name}_index", type=FeatureType.INT64,
                      source=made_column(name, "index"), required=required,
                      description=f"index of {name} in its vocabulary")
      return Media(name=name, kind=kind, sources=(feature.column,),
                   stored=(name, index.name),
                   options={"values": None if vocab == "auto" else
                            list(vocab)},
                   declared=declared), [feature, index]
    source = raw.get("source", name)
    base_dir = raw.get("base_dir")
    if base_dir is not None and (not isinstance(base_dir, str)
                                 or not base_dir):
      self.fail(f"{key}.base_dir", "must be a directory (local, gs://, "
                f"s3://, ...); got {preview(base_dir)}")
    def made(part, ftype, shape=(), text=""):
      return Feature(name=name if part in ("bytes", "values") else
                     f"{name}_{part}", type=ftype, shape=shape,
                     source=made_column(name, part), required=required,
                     description=text)
    if kind is MediaKind.IMAGE:
      if not isinstance(source, str) or not source:
        self.fail(f"{key}.source", "must be the column holding the image "
                  f"paths; got {preview(source)}")
      options = self.image_options(key, raw)
      stored = [made("bytes", FeatureType.BYTES, text=description
                     or "the encoded image"),
                made("height", FeatureType.INT64), made("width",
                                                        FeatureType.INT64),
                made("channels", FeatureType.INT64),
                made("format", FeatureType.STRING)]
      options["base_dir"] = base_dir
      return Media(name=name, kind=kind, sources=(source,),
                   stored=tuple(f.name for f in stored), options=options,
                   declared=declared), stored
    dtype = raw.get("dtype")
    if dtype not in TENSOR_DTYPES:
      self.fail(f"{key}.dtype", f"must be one of {_allowed(TENSOR_DTYPES)}; "
                f"got {preview(dtype)}.{_suggest(dtype, TENSOR_DTYPES)}")
    storage = raw.get("storage", "bytes")
    if storage not in ("bytes", "list"):
      self.fail(f"{key}.storage", "must be bytes (raw little-endian bytes + "
                f"a shape feature) or list (a flat int64/float list); got "
                f"{preview(storage)}")
    shape = raw.get("shape")
    if not isinstance(shape, list) or not shape or not all(
        isinstance(d, int) and not isinstance(d, bool) and (d > 0 or d == -1)
        for d in shape):
      self.fail(f"{key}.shape", "must list the dimensions, e.g. [8, 8] or "
                f"[28, 28, 1] (-1: any size, storage: bytes only); got "
                f"{preview(shape)}")
    if -1 in shape and storage == "list":
      self.fail(f"{key}.shape", "a list tensor needs every dimension fixed; "
                "use storage: bytes for shapes that vary")
    loader = raw.get("from")
    if loader not in (None, "npy"):
      self.fail(f"{key}.from", f"must be npy (the column holds .npy file "
                f"paths) or absent (the values are in the row); got "
                f"{preview(loader)}")
    columns = source if isinstance(source, list) else [source]
    if not columns or not all(isinstance(c, str) and c for c in columns):
      self.fail(f"{key}.source", f"must be a column or a list of columns; "
                f"got {preview(source)}")
    if len(set(columns)) != len(columns):
      self.fail(f"{key}.source", "names a column twice")
    size = 1
    for d in shape:
      size *= d
    if len(columns) > 1:
      if loader is not None:
        self.fail(f"{key}.from", "reads one path column")
      if -1 in shape or size != len(columns):
        self.fail(f"{key}.source", f"{len(columns)} columns cannot fill "
                  f"shape {shape} ({size if size > 0 else 'any number of'} "
                  "values)")
    if -1 in shape and loader is None:
      self.fail(f"{key}.shape", "-1 dimensions need from: npy (arrays "
                "whose shape varies); values in a row fill a fixed shape")
    separator = raw.get("separator")
    if separator is not None and (not isinstance(separator, str)
                                  or not separator or len(columns) > 1
                                  or loader is not None):
      self.fail(f"{key}.separator", "splits a text cell of one column into "
                f"values; got {preview(separator)}")
    if storage == "bytes":
      stored = [made("bytes", FeatureType.BYTES, text=description or
                     f"{dtype} array, raw little-endian bytes"),
                made("shape", FeatureType.INT64, shape=(len(shape),))]
    else:
      stored = [made("values", FeatureType.FLOAT if dtype.startswith("float")
                     else FeatureType.INT64, shape=tuple(shape),
                     text=description or f"{dtype} array, flat")]
    options = {"dtype": dtype, "shape": list(shape), "storage": storage,
               "columns": columns, "from": loader, "separator": separator,
               "base_dir": base_dir}
    return Media(name=name, kind=kind, sources=tuple(columns),
                 stored=tuple(f.name for f in stored), options=options,
                 declared=declared), stored

  def image_options(self, key: str, raw: dict) -> dict:
    out = {}
    resize = raw.get("resize")
    if resize is not None:
      if isinstance(resize, dict):
        self.check_keys(f"{key}.resize", resize, ("height", "width"))
        resize = [resize.get("height"), resize.get("width")]
      if not isinstance(resize, list) or len(resize) != 2 or not all(
          isinstance(d, int) and not isinstance(d, bool) and d > 0
          for d in resize):
        self.fail(f"{key}.resize", "must be [height, width] or {height: h, "
                  f"width: w}} in pixels; got {preview(raw.get('resize'))}")
      out["resize"] = list(resize)
    for opt, allowed in (("method", IMAGE_METHODS),
                         ("convert", IMAGE_CONVERTS),
                         ("encode", IMAGE_ENCODES)):
      if opt in raw:
        if raw[opt] not in allowed:
          self.fail(f"{key}.{opt}", f"must be one of {_allowed(allowed)}; "
                    f"got {preview(raw[opt])}.{_suggest(raw[opt], allowed)}")
        out[opt] = raw[opt]
    if "method" in raw and resize is None:
      self.fail(f"{key}.method", "is the resize method; add resize: [h, w]")
    if "quality" in raw:
      q = raw["quality"]
      if isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= 100:
        self.fail(f"{key}.quality", f"must be a JPEG quality 1-100; got "
                  f"{preview(q)}")
      if out.get("encode") != "jpeg":
        self.fail(f"{key}.quality", "is the JPEG quality; add encode: jpeg")
      out["quality"] = q
    if "verify" in raw:
      if not isinstance(raw["verify"], bool):
        self.fail(f"{key}.verify", "must be true or false")
      out["verify"] = raw["verify"]
    return out

  def check_split_types(self, schema: Schema) -> Schema:
    """Text bounds on a column read as numbers would compare as text
    ("10" < "9"): refused."""
    rule = schema.splits
    if rule.kind is SplitKind.BELOW and isinstance(rule.bounds[0], str):
      column = rule.columns[0]
      types = [t for c, t in schema.group_by if c == column] + [
          f.type for f in schema.all_features
          if f.column == column and f.is_scalar and f.derive is None]
      if types and types[0] in (FeatureType.INT64, FeatureType.FLOAT):
        self.fail("splits.below", f"the bounds are text but column "
                  f"{preview(column)} is read as {types[0].value} "
                  "(text compares "
                  f'"10" < "9"); give numbers as bounds, e.g. 20261101')
    return schema

  def limits(self, raw: dict) -> dict:
    """max_bad_rows / max_bad_fraction: when a build fails instead."""
    out = {}
    rows = raw.get("max_bad_rows")
    if rows is not None:
      if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
        self.fail("max_bad_rows", f"must be a whole number >= 0; got "
                  f"{preview(rows)}")
      out["max_bad_rows"] = rows
    fraction = raw.get("max_bad_fraction")
    if fraction is not None:
      if isinstance(fraction, bool) or not isinstance(
          fraction, (int, float)) or not 0 <= fraction <= 1:
        self.fail("max_bad_fraction", f"must be a number from 0 to 1 (0.01 "
                  f"= 1% of the rows read); got {preview(fraction)}")
      out["max_bad_fraction"] = float(fraction)
    if raw.get("splits") is not None:
      out["splits"] = self.splits(raw["splits"])
    return out

  def split_name(self, key: str, name: Any) -> str:
    if not isinstance(name, str) or not _SPLIT_NAME_RE.match(name) or \
        name == "errors":
      self.fail(key,
                f"{preview(name)} is not a valid split name; use a letter then "
                "letters, digits or '_' (it starts the file names), not "
                "'errors'")
    return name

  def pairs(self, key: str, raw: Any) -> list:
    """(name, value) pairs in order from a mapping or from a list of
    one-key mappings (dataset.json keeps the order that way)."""
    if isinstance(raw, dict):
      return list(raw.items())
    if isinstance(raw, list) and all(isinstance(i, dict) and len(i) == 1
                                     for i in raw):
      out = [next(iter(i.items())) for i in raw]
      names = [n for n, _ in out]
      for n in names:
        if names.count(n) > 1:
          self.fail(key, f"names {preview(n)} twice")
      return out
    return None

  def splits(self, raw: Any) -> SplitRule:
    """The `splits:` section (see beam_tfrecords.splits)."""
    if not isinstance(raw, dict):
      self.fail("splits", "must be a mapping: {hash: [key columns], weights: "
                "{train: 80%, eval: 20%}}, {column: c, values: {...}} or "
                "{column: c, below: {...}, rest: split}")
    self.check_keys("splits", raw, _SPLIT_KEYS)
    if "hash" in raw:
      for k in ("column", "values", "below", "rest"):
        if k in raw:
          self.fail(f"splits.{k}", "belongs to a column rule; a hash rule "
                    "has `hash:` and `weights:` only")
      columns = raw["hash"] if isinstance(raw["hash"], list) else [raw["hash"]]
      if not columns or not all(isinstance(c, str) and c for c in columns):
        self.fail("splits.hash", f"must name the key column(s) to hash, e.g. "
                  "hash: user_id or hash: [user_id, day]; got "
                  f"{preview(raw['hash'])}")
      if len(set(columns)) != len(columns):
        self.fail("splits.hash", "a column appears twice")
      weights = self.pairs("splits.weights", raw.get("weights"))
      if not weights:
        self.fail("splits.weights", "must map split names to shares, e.g. "
                  "{train: 80%, eval: 10%, test: 10%} or bucket counts "
                  "{train: 8, eval: 1, test: 1}")
      names, values, percents = [], [], 0
      for name, w in weights:
        key = f"splits.weights.{name}"
        names.append(self.split_name(key, name))
        m = _WEIGHT_RE.match(w) if isinstance(w, str) else None
        if m:
          percents += 1
          w = float(m.group(1))
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w <= 0:
          self.fail(key, f"must be a share above 0 (80% or a bucket count "
                    f"such as 8); got {preview(w)}")
        values.append(float(w))
      if percents and percents != len(values):
        self.fail("splits.weights", "mixes percentages and bucket counts; "
                  "use one kind")
      if percents and abs(sum(values) - 100.0) > 1e-6:
        self.fail("splits.weights", f"percentages add up to "
                  f"{sum(values):g}%, not 100%")
      return SplitRule(kind=SplitKind.HASH, names=tuple(names),
                       columns=tuple(columns), weights=tuple(values))
    column = raw.get("column")
    if not isinstance(column, str) or not column:
      self.fail("splits", "give `hash: [key columns]` with `weights:`, or "
                "`column:` with `values:` or `below:`")
    if ("values" in raw) == ("below" in raw):
      self.fail("splits", "a column rule has either `values:` (the value "
                "names the split) or `below:` (bounds, e.g. dates), not "
                "both" if "values" in raw else "a column rule needs `values:` "
                "(the value names the split) or `below:` (ordered bounds)")
    if "weights" in raw:
      self.fail("splits.weights", "belongs to a hash rule (hash: [key "
                "columns])")
    if "values" in raw:
      if "rest" in raw:
        self.fail("splits.rest", "belongs to a `below:` rule")
      spec = self.pairs("splits.values", raw["values"])
      if spec is None and isinstance(raw["values"], list):
        spec = [(name, [name]) for name in raw["values"]]  # value = name
      if not spec:
        self.fail("splits.values", "must list the split names ([train, "
                  "eval]) or map each to the column values that select it "
                  "({train: [train, training], eval: [validation]})")
      names, pairs, seen = [], [], {}
      for name, accepted in spec:
        key = f"splits.values.{name}"
        names.append(self.split_name(key, name))
        accepted = accepted if isinstance(accepted, list) else [accepted]
        if not accepted:
          self.fail(key, "lists no value")
        for v in accepted:
          if isinstance(v, bool) or not isinstance(v, (str, int)):
            self.fail(key,
                      f"values are text or whole numbers; got {preview(v)}")
          text = str(v)
          if text in seen:
            self.fail(key,
                      f"{preview(text)} already selects split "
                      f"{preview(seen[text])}")
          seen[text] = name
          pairs.append((text.encode("utf-8"), name))
      return SplitRule(kind=SplitKind.VALUES, names=tuple(names),
                       columns=(column,), values=tuple(pairs))
    spec = self.pairs("splits.below", raw["below"])
    if not spec:
      self.fail("splits.below", "must map split names to bounds in order, "
                "e.g. {train: \"2026-11-01\", eval: \"2026-11-15\"}")
    names, bounds = [], []
    for name, bound in spec:
      key = f"splits.below.{name}"
      names.append(self.split_name(key, name))
      if isinstance(bound, bool) or not isinstance(bound, (str, int, float)):
        self.fail(key, f"a bound is a number or text (e.g. an ISO date); got "
                  f"{preview(bound)}")
      bounds.append(bound)
    kinds = {isinstance(b, str) for b in bounds}
    if len(kinds) > 1:
      self.fail("splits.below", "mixes numbers and text; bounds are compared "
                "with the column's values, all as numbers or all as text")
    if any(b >= c for b, c in zip(bounds, bounds[1:])):
      self.fail("splits.below", f"bounds must increase in the order given; "
                f"got {preview(bounds)}")
    rest = raw.get("rest")
    if rest is not None:
      rest = self.split_name("splits.rest", rest)
      if rest in names:
        self.fail("splits.rest", f"{preview(rest)} already has a bound")
      names.append(rest)
    return SplitRule(kind=SplitKind.BELOW, names=tuple(names),
                     columns=(column,), bounds=tuple(bounds), rest=rest)

  def sequence_schema(self, raw: dict, name: str, description: str) -> Schema:
    if "features" in raw:
      self.fail("features", "a sequence_example schema declares `context:` "
                "(one value set per sequence) and `sequence:` (one value per "
                "step) instead of `features:`")
    self.check_keys("", raw, _SEQUENCE_TOP_KEYS)
    group_by = self.group_by(raw.get("group_by"))
    mode = _STEPS if group_by else _LISTS
    context = self.feature_map("context", raw.get("context", {}), _CONTEXT,
                               allow_empty=True)
    sequence = self.feature_map("sequence", raw.get("sequence"), mode)
    seq_names = {f.name for f in sequence}
    for f in context:
      key = f"context.{f.name}"
      if f.name in seq_names:
        self.fail(key,
                  f"{preview(f.name)} is also a sequence feature; context and "
                  "sequence keys must differ (TensorFlow parses both into "
                  "one namespace)")
      if f.derive in (Derive.FIRST, Derive.LAST) and not group_by:
        self.fail(f"{key}.derive", f"derive: {f.derive.value} picks a value "
                  "from the rows of a group; it needs group_by (without it "
                  "each row is one sequence and its context is constant)")
      if f.of is not None and f.of not in seq_names:
        self.fail(f"{key}.of", f"{preview(f.of)} is not a sequence feature; "
                  f"allowed: {_allowed(sorted(seq_names))}."
                  f"{_suggest(f.of, seq_names)}")
    typed = {}
    for f in context + sequence:
      if f.column is not None and f.is_scalar:
        typed.setdefault(f.column, f.type)
    # Keys are compared as stored values, so "7" in a CSV and 7 in JSON
    # are one key when a feature (or the declared type) says int64.
    group_keys = tuple((c, t or typed.get(c, FeatureType.STRING))
                       for c, t in group_by)
    order_by = self.order_by(raw.get("order_by"), typed)
    # group_by / order_by columns are never missing in a written record
    # (rows without them are rejected), so context features that read one
    # are always present: required.
    key_columns = {c for c, _ in group_by} | {k.column for k in order_by}
    context = tuple(
        dataclasses.replace(f, required=True)
        if f.column in key_columns and f.default is None else f
        for f in context)
    if order_by and not group_by:
      self.fail("order_by", "order_by orders the rows of a group; it needs "
                "group_by (without it each row is one sequence whose list "
                "cells are already in order)")
    max_length = raw.get("max_length")
    if max_length is not None and (not isinstance(max_length, int) or
                                   isinstance(max_length, bool) or
                                   max_length < 1):
      self.fail("max_length", f"must be a positive number of steps; got "
                f"{preview(max_length)}")
    overflows = [o.value for o in Overflow]
    overflow = raw.get("overflow")
    if overflow is not None:
      if max_length is None:
        self.fail("overflow", "overflow says what happens to sequences "
                  "longer than max_length; set max_length too")
      if overflow not in overflows:
        self.fail("overflow", f"{preview(overflow)} is not a policy; allowed: "
                  f"{_allowed(overflows)}.{_suggest(overflow, overflows)}")
    policies = [p.value for p in OnBadStep]
    on_bad_step = raw.get("on_bad_step")
    if on_bad_step is not None:
      if on_bad_step not in policies:
        self.fail("on_bad_step",
                  f"{preview(on_bad_step)} is not a policy; allowed: "
                  f"{_allowed(policies)}."
                  f"{_suggest(on_bad_step, policies)}")
      if not group_by:
        self.fail("on_bad_step", "on_bad_step says what happens to a group "
                  "when one of its rows is rejected; it needs group_by "
                  "(without it each row is one sequence, rejected alone)")
    ragged = raw.get("ragged", False)
    if not isinstance(ragged, bool):
      self.fail("ragged", f"must be true or false; got {preview(ragged)}")
    if ragged and group_by:
      self.fail("ragged", "with group_by every step has a value for every "
                "sequence feature, so feature lists always align; ragged "
                "applies to list columns (no group_by)")
    max_bytes = self.size("max_record_bytes", raw.get("max_record_bytes"))
    extra = {} if max_bytes is None else {"max_record_bytes": max_bytes}
    return Schema(name=name, record=RecordKind.SEQUENCE_EXAMPLE,
                  description=description, path=self.path,
                  context=context, sequence=sequence, group_by=group_keys,
                  order_by=order_by, max_length=max_length,
                  overflow=Overflow(overflow or "reject"),
                  on_bad_step=OnBadStep(on_bad_step or "reject_group"),
                  ragged=ragged, **extra)

  def feature_map(self, key: str, raw: Any, role: str,
                  allow_empty: bool = False):
    if raw is None:
      self.fail(key, "missing; a sequence_example schema declares its "
                "sequence features, e.g. sequence: {tokens: {type: int64}}")
    if not isinstance(raw, dict) or (not raw and not allow_empty):
      self.fail(key, "must be a non-empty mapping of feature name -> "
                f"definition; got {preview(raw)}")
    parsed = [self.feature(str(k), k, v, role, key) for k, v in raw.items()]
    return tuple(sorted(parsed, key=lambda f: f.name))

  def group_by(self, raw: Any):
    """`user`, [user, session] or [{column: user, type: int64}] ->
    [(column, FeatureType or None)]."""
    if raw is None:
      return ()
    items = raw if isinstance(raw, list) else [raw]
    if not items:
      self.fail("group_by", "must name at least one column")
    out = []
    for i, item in enumerate(items):
      key = f"group_by[{i}]"
      ftype = None
      if isinstance(item, dict):
        self.check_keys(key, item, ("column", "type"))
        if "type" in item:
          ftype = self.type_name(f"{key}.type", item["type"])
        item = item.get("column")
      if not isinstance(item, str) or not item:
        self.fail(key, f"must be a column name or {{column: name, type: "
                  f"int64}}; got {preview(item)}")
      if any(c == item for c, _ in out):
        self.fail(key, f"column {preview(item)} appears twice in group_by")
      out.append((item, ftype))
    return tuple(out)

  def order_by(self, raw: Any, typed: dict):
    """`ts`, [ts, {score: desc}, {column: c, type: float, descending: true}]."""
    if raw is None:
      return ()
    items = raw if isinstance(raw, list) else [raw]
    keys = []
    for i, item in enumerate(items):
      key = f"order_by[{i}]"
      descending, ftype = False, None
      if isinstance(item, dict) and "column" not in item and len(item) == 1:
        (column, direction), = item.items()
        if direction not in ("asc", "desc"):
          self.fail(key, f"{preview(item)}: the direction must be asc or desc")
        item = {"column": column, "descending": direction == "desc"}
      if isinstance(item, dict):
        self.check_keys(key, item, _ORDER_KEYS)
        column = item.get("column")
        descending = item.get("descending", False)
        if not isinstance(descending, bool):
          self.fail(f"{key}.descending", f"must be true or false; got "
                    f"{preview(descending)}")
        if "type" in item:
          ftype = self.type_name(f"{key}.type", item["type"])
      else:
        column = item
      if not isinstance(column, str) or not column:
        self.fail(key, f"must be a column name, {{column: name, type: int64, "
                  f"descending: true}} or {{name: desc}}; got {preview(item)}")
      if ftype is None:
        ftype = typed.get(column)
      if ftype is None:
        self.fail(key,
                  f"no scalar feature reads column {preview(column)}, so its "
                  "type is unknown (text and numbers sort differently: "
                  '"10" < "9"); say it: {column: ' + column +
                  ", type: int64}")
      if any(k.column == column for k in keys):
        self.fail(key, f"column {preview(column)} appears twice in order_by")
      keys.append(OrderKey(column=column, type=ftype, descending=descending))
    return tuple(keys)

  def size(self, key: str, raw: Any) -> Optional[int]:
    if raw is None:
      return None
    value = parse_size(raw)
    if value is None or not 1024 <= value <= _MAX_RECORD_BYTES_LIMIT:
      self.fail(key, f"must be a size between 1KiB and 1536MiB, as bytes or "
                f"text such as 64MiB; got {preview(raw)}")
    return value

  def type_name(self, key: str, type_name: Any,
                media: bool = False) -> Optional[FeatureType]:
    """The FeatureType of a type name; `media`: where image and tensor
    are types too (an example schema's features)."""
    if type_name in _MEDIA_TYPES and not media:
      self.fail(key, f"{type_name} features go in the `features:` of an "
                "example schema (not in SequenceExamples yet)")
    if type_name not in FEATURE_TYPES and type_name not in _MEDIA_TYPES:
      known, more = list(FEATURE_TYPES), ""
      if media:
        known += _MEDIA_TYPES
        more = f" Image and array features: {_allowed(_MEDIA_TYPES)}."
      self.fail(key, f"unknown type {preview(type_name)}; supported: "
                f"{_allowed(FEATURE_TYPES)}.{more}"
                f"{_suggest(type_name, known)}")
    return FEATURE_TYPES.get(type_name)  # None: image, tensor (media)

  def derived(self, key: str, name: str, raw: dict) -> Optional[Feature]:
    """A context feature with `derive:`; None if it has none."""
    derives = [d.value for d in Derive]
    derive = raw["derive"]
    if derive not in derives:
      self.fail(f"{key}.derive",
                f"{preview(derive)} cannot be derived; allowed: "
                f"{_allowed(derives)}.{_suggest(derive, derives)}")
    derive = Derive(derive)
    if derive in (Derive.FIRST, Derive.LAST):
      if "of" in raw:
        self.fail(f"{key}.of", "`of` belongs to derive: length; first/last "
                  "read the feature's `source` column")
      return None  # an ordinary feature plus the rule, checked by feature()
    allowed = ("type", "derive", "description") + (
        ("of",) if derive is Derive.LENGTH else ())
    for k in raw:
      if k not in allowed:
        self.fail(f"{key}.{k}", f"a derive: {derive.value} feature is "
                  f"computed, so it takes no {preview(k)}; allowed keys: "
                  f"{_allowed(allowed)}")
    if raw.get("type", "int64") != "int64":
      self.fail(f"{key}.type", f"derive: {derive.value} is a count; its "
                "type is int64")
    of = raw.get("of")
    if of is not None and not isinstance(of, str):
      self.fail(f"{key}.of", f"must name a sequence feature; got {preview(of)}")
    description = raw.get("description", "")
    if not isinstance(description, str):
      self.fail(f"{key}.description", "must be text")
    return Feature(name=name, type=FeatureType.INT64, derive=derive, of=of,
                   description=description)

  def feature(self, name: str, raw_name: Any, raw: Any, role: str = _EXAMPLE,
              section: str = "features") -> Feature:
    key = f"{section}.{name}"
    if not isinstance(raw_name, str) or not raw_name:
      self.fail(key, f"feature names must be non-empty text; got "
                f"{preview(raw_name)}")
    if isinstance(raw, str):  # shorthand: `age: int64`
      raw = {"type": raw}
    if not isinstance(raw, dict):
      self.fail(key, f"must be a mapping such as {{type: int64}} or a type "
                f"name; got {preview(raw)}")
    if "type" in raw and "derive" not in raw:
      # The keys a feature takes depend on its type: a misspelled type
      # ("imgae") is the mistake to name, not the image keys it brings.
      self.type_name(f"{key}.type", raw["type"], media=role == _EXAMPLE)
    # (An Example feature with a vocabulary is a media declaration, checked
    # before this; the key is listed so that a misspelling finds it.)
    self.check_keys(key, raw, _CONTEXT_KEYS if role == _CONTEXT
                    else _FEATURE_KEYS + ("vocabulary",) if role == _EXAMPLE
                    else _FEATURE_KEYS,
                    elsewhere=_MEDIA_ONLY_KEYS if role == _EXAMPLE else None)
    derive = None
    if "derive" in raw:
      derived = self.derived(key, name, raw)
      if derived is not None:
        return derived
      derive = Derive(raw["derive"])
    elif "of" in raw:
      self.fail(f"{key}.of", "`of` goes with derive: length")
    if "type" not in raw:
      self.fail(f"{key}.type", "missing; allowed types: "
                f"{_allowed(FEATURE_TYPES)}")
    type_name = raw["type"]
    ftype = self.type_name(f"{key}.type", type_name)
    shape = self.shape(f"{key}.shape", raw.get("shape", []))
    source = raw.get("source")
    if source is not None and (not isinstance(source, str) or not source):
      self.fail(f"{key}.source", f"must be a column name (text); got "
                f"{preview(source)}")
    separator = raw.get("separator")
    if separator is not None:
      if not isinstance(separator, str) or not separator:
        self.fail(f"{key}.separator", f"must be non-empty text such as "
                  f"\"|\"; got {preview(separator)}")
      if role == _LISTS:
        if shape:
          self.fail(f"{key}.separator", "in a sequence without group_by the "
                    "separator splits a cell into steps of one value each; "
                    "steps of several values need JSON lists of lists such "
                    "as [[5, 6], [7, 8, 9]]")
      elif not shape:
        self.fail(f"{key}.separator", "only list features take a separator; "
                  "add shape: [-1] (or a fixed length such as [3])")
    required, description = self.required_and_description(key, raw)
    feature = Feature(name=name, type=ftype, shape=shape, source=source,
                      separator=separator, required=required,
                      description=description, derive=derive)
    if "default" in raw:
      if required:
        self.fail(f"{key}.default", "a required feature cannot have a "
                  "default; drop one of them")
      feature = self.default(f"{key}.default", feature, raw["default"])
    return feature

  def required_and_description(self, key: str, raw: dict):
    required = raw.get("required", False)
    if not isinstance(required, bool):
      self.fail(f"{key}.required",
                f"must be true or false; got {preview(required)}")
    description = raw.get("description", "")
    if not isinstance(description, str):
      self.fail(f"{key}.description", "must be text")
    return required, description

  def shape(self, key: str, raw: Any):
    if not isinstance(raw, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in raw):
      self.fail(key, f"must be a list of integers: [] scalar, [n] fixed "
                f"length, [-1] variable length; got {preview(raw)}")
    if -1 in raw and raw != [-1]:
      self.fail(key, f"{preview(raw)}: -1 (variable length) is only allowed as "
                "the whole shape [-1]")
    if any(d == 0 or d < -1 for d in raw):
      self.fail(key, f"{preview(raw)}: dimensions must be positive (or the "
                "single -1)")
    return tuple(raw)

  def default(self, key: str, feature: Feature, raw: Any) -> Feature:
    if raw is None:
      self.fail(key, "a default cannot be null; remove it to leave missing "
                "values empty")
    if feature.is_scalar and isinstance(raw, list):
      self.fail(key, f"{preview(raw)} is a list but the feature is a scalar "
                "(shape [])")
    try:
      values = value_rules.convert_cell(feature, raw)
    except ValueError as e:
      self.fail(key,
                f"{preview(raw)} is not a valid {feature.type.value} default: "
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
  from beam_tfrecords import fs  # pylint: disable=import-outside-toplevel
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

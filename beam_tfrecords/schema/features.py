"""The checks of one feature declaration: type, shape, source, separator,
default, required and (SequenceExample context) derive.

Which keys a declaration may use depends on its type and on the role the
feature plays; the image / tensor declarations that share the `features:`
section are checked in `beam_tfrecords.schema.media_features`, with the key lists
kept here so that a plain feature's message can point to them.
"""

import dataclasses
import re
from typing import Any, Dict, Optional, Tuple

from beam_tfrecords.core.errors import preview
from beam_tfrecords.schema import values as value_rules
from beam_tfrecords.schema.checking import Checker, listed, suggest
from beam_tfrecords.schema.expect import parse_feature_expect
from beam_tfrecords.schema.model import Derive, Feature, FeatureType, MediaKind

__all__ = ["FEATURE_TYPES", "NAME_RE", "EXAMPLE", "CONTEXT", "STEPS", "LISTS",
           "FEATURE_KEYS", "CONTEXT_KEYS", "IMAGE_KEYS", "TENSOR_KEYS",
           "MEDIA_ONLY_KEYS", "MEDIA_TYPES", "check_type_name", "parse_type",
           "parse_feature", "parse_derived", "required_and_description",
           "parse_shape", "with_default"]

# The feature type registry: the spelling in a schema file -> FeatureType.
FEATURE_TYPES = {t.value: t for t in FeatureType}
# Feature (and dataset) names.
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")

# Roles a feature plays; they decide which keys it may use.
EXAMPLE, CONTEXT, STEPS, LISTS = "example", "context", "steps", "lists"
FEATURE_KEYS = ("type", "shape", "source", "separator", "default",
                "required", "description", "expect")
CONTEXT_KEYS = FEATURE_KEYS + ("derive", "of")
_MEDIA_KEYS = ("type", "source", "required", "description", "base_dir")
IMAGE_KEYS = _MEDIA_KEYS + ("resize", "method", "convert", "encode",
                            "quality", "verify")
TENSOR_KEYS = _MEDIA_KEYS + ("dtype", "shape", "storage", "from",
                             "separator")
# Keys of image / tensor declarations that a plain feature does not take,
# with the type that does (for the message when a plain feature has one).
MEDIA_ONLY_KEYS: Dict[str, str] = {
    k: " or ".join(f"type: {t}" for t, keys in (("image", IMAGE_KEYS),
                                                ("tensor", TENSOR_KEYS))
                   if k in keys)
    for k in IMAGE_KEYS + TENSOR_KEYS if k not in FEATURE_KEYS}
MEDIA_TYPES = (MediaKind.IMAGE.value, MediaKind.TENSOR.value)


def check_type_name(check: Checker, key: str, type_name: Any,
                    media: bool = False) -> None:
  """Fails unless `type_name` names a type; `media`: where image and tensor
  are types too (an example schema's features)."""
  if type_name in MEDIA_TYPES and not media:
    check.fail(key, f"{type_name} features go in the `features:` of an "
               "example schema (not in SequenceExamples yet)")
  if type_name not in FEATURE_TYPES and type_name not in MEDIA_TYPES:
    known, more = list(FEATURE_TYPES), ""
    if media:
      known += MEDIA_TYPES
      more = f" Image and array features: {listed(MEDIA_TYPES)}."
    check.fail(key, f"unknown type {preview(type_name)}; supported: "
               f"{listed(FEATURE_TYPES)}.{more}"
               f"{suggest(type_name, known)}")


def parse_type(check: Checker, key: str, type_name: Any) -> FeatureType:
  """The FeatureType of a stored feature's type name (image and tensor are
  declarations, not stored types)."""
  check_type_name(check, key, type_name)
  return FEATURE_TYPES[type_name]


def parse_derived(check: Checker, key: str, name: str,
                  raw: dict) -> Optional[Feature]:
  """A context feature with `derive:`; None if it has none."""
  derives = [d.value for d in Derive]
  derive = raw["derive"]
  if derive not in derives:
    check.fail(f"{key}.derive",
               f"{preview(derive)} cannot be derived; allowed: "
               f"{listed(derives)}.{suggest(derive, derives)}")
  derive = Derive(derive)
  if derive in (Derive.FIRST, Derive.LAST):
    if "of" in raw:
      check.fail(f"{key}.of", "`of` belongs to derive: length; first/last "
                 "read the feature's `source` column")
    return None  # an ordinary feature plus the rule: parse_feature()
  allowed = ("type", "derive", "description") + (
      ("of",) if derive is Derive.LENGTH else ())
  for k in raw:
    if k not in allowed:
      check.fail(f"{key}.{k}", f"a derive: {derive.value} feature is "
                 f"computed, so it takes no {preview(k)}; allowed keys: "
                 f"{listed(allowed)}")
  if raw.get("type", "int64") != "int64":
    check.fail(f"{key}.type", f"derive: {derive.value} is a count; its "
               "type is int64")
  of = raw.get("of")
  if of is not None and not isinstance(of, str):
    check.fail(f"{key}.of", f"must name a sequence feature; got {preview(of)}")
  description = raw.get("description", "")
  if not isinstance(description, str):
    check.fail(f"{key}.description", "must be text")
  return Feature(name=name, type=FeatureType.INT64, derive=derive, of=of,
                 description=description)


def parse_feature(check: Checker, name: str, raw_name: Any, raw: Any,
                  role: str = EXAMPLE, section: str = "features") -> Feature:
  """One feature declaration (`role` says where it stands); `raw_name` is
  its key as written."""
  feature = _feature(check, name, raw_name, raw, role, section)
  if isinstance(raw, dict) and raw.get("expect") is not None:
    feature = dataclasses.replace(feature, expect=parse_feature_expect(
        check, f"{section}.{name}.expect", raw["expect"], feature))
  return feature


def _feature(check: Checker, name: str, raw_name: Any, raw: Any,
             role: str, section: str) -> Feature:
  key = f"{section}.{name}"
  if not isinstance(raw_name, str) or not raw_name:
    check.fail(key, f"feature names must be non-empty text; got "
               f"{preview(raw_name)}")
  if isinstance(raw, str):  # shorthand: `age: int64`
    raw = {"type": raw}
  if not isinstance(raw, dict):
    check.fail(key, f"must be a mapping such as {{type: int64}} or a type "
               f"name; got {preview(raw)}")
  if "type" in raw and "derive" not in raw:
    # The keys a feature takes depend on its type: a misspelled type
    # ("imgae") is the mistake to name, not the image keys it brings.
    check_type_name(check, f"{key}.type", raw["type"],
                    media=role == EXAMPLE)
  # (An Example feature with a vocabulary is a media declaration, checked
  # before this; the key is listed so that a misspelling finds it.)
  check.check_keys(key, raw, CONTEXT_KEYS if role == CONTEXT
                   else FEATURE_KEYS + ("vocabulary",) if role == EXAMPLE
                   else FEATURE_KEYS,
                   elsewhere=MEDIA_ONLY_KEYS if role == EXAMPLE else None)
  derive = None
  if "derive" in raw:
    derived = parse_derived(check, key, name, raw)
    if derived is not None:
      return derived
    derive = Derive(raw["derive"])
  elif "of" in raw:
    check.fail(f"{key}.of", "`of` goes with derive: length")
  if "type" not in raw:
    check.fail(f"{key}.type", "missing; allowed types: "
               f"{listed(FEATURE_TYPES)}")
  type_name = raw["type"]
  ftype = parse_type(check, f"{key}.type", type_name)
  shape = parse_shape(check, f"{key}.shape", raw.get("shape", []))
  source = raw.get("source")
  if source is not None and (not isinstance(source, str) or not source):
    check.fail(f"{key}.source", f"must be a column name (text); got "
               f"{preview(source)}")
  separator = raw.get("separator")
  if separator is not None:
    if not isinstance(separator, str) or not separator:
      check.fail(f"{key}.separator", f"must be non-empty text such as "
                 f"\"|\"; got {preview(separator)}")
    if role == LISTS:
      if shape:
        check.fail(f"{key}.separator", "in a sequence without group_by the "
                   "separator splits a cell into steps of one value each; "
                   "steps of several values need JSON lists of lists such "
                   "as [[5, 6], [7, 8, 9]]")
    elif not shape:
      check.fail(f"{key}.separator", "only list features take a separator; "
                 "add shape: [-1] (or a fixed length such as [3])")
  required, description = required_and_description(check, key, raw)
  feature = Feature(name=name, type=ftype, shape=shape, source=source,
                    separator=separator, required=required,
                    description=description, derive=derive)
  if "default" in raw:
    if required:
      check.fail(f"{key}.default", "a required feature cannot have a "
                 "default; drop one of them")
    feature = with_default(check, f"{key}.default", feature, raw["default"])
  return feature


def required_and_description(check: Checker, key: str,
                             raw: dict) -> Tuple[bool, str]:
  """The `required:` and `description:` keys every declaration takes."""
  required = raw.get("required", False)
  if not isinstance(required, bool):
    check.fail(f"{key}.required",
               f"must be true or false; got {preview(required)}")
  description = raw.get("description", "")
  if not isinstance(description, str):
    check.fail(f"{key}.description", "must be text")
  return required, description


def parse_shape(check: Checker, key: str, raw: Any) -> Tuple[int, ...]:
  """`shape: []`, `[n, ...]` or `[-1]`."""
  if not isinstance(raw, list) or not all(
      isinstance(d, int) and not isinstance(d, bool) for d in raw):
    check.fail(key, f"must be a list of integers: [] scalar, [n] fixed "
               f"length, [-1] variable length; got {preview(raw)}")
  if -1 in raw and raw != [-1]:
    check.fail(key, f"{preview(raw)}: -1 (variable length) is only allowed as "
               "the whole shape [-1]")
  if any(d == 0 or d < -1 for d in raw):
    check.fail(key, f"{preview(raw)}: dimensions must be positive (or the "
               "single -1)")
  return tuple(raw)


def with_default(check: Checker, key: str, feature: Feature,
                 raw: Any) -> Feature:
  """`feature` with its `default:` value, converted as an input cell is."""
  if raw is None:
    check.fail(key, "a default cannot be null; remove it to leave missing "
               "values empty")
  if feature.is_scalar and isinstance(raw, list):
    check.fail(key, f"{preview(raw)} is a list but the feature is a scalar "
               "(shape [])")
  try:
    values = value_rules.convert_cell(feature, raw)
  except ValueError as e:
    check.fail(key,
               f"{preview(raw)} is not a valid {feature.type.value} default: "
               f"{e}")
  # Not None: convert_cell returns None only for a missing (None) cell.
  assert values is not None
  return Feature(**{**feature.__dict__, "default": tuple(values)})

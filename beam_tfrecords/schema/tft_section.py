"""The checks of the `transform:` section: TensorFlow Transform features
computed from stored features (see beam_tfrecords.tft)."""

from typing import Any, List, Tuple

from beam_tfrecords.core.errors import preview
from beam_tfrecords.schema.checking import Checker, listed, suggest
from beam_tfrecords.schema.features import NAME_RE
from beam_tfrecords.schema.model import (DEFAULT_SPLIT, Schema, TRANSFORMS,
                                         Transform, TransformSection)

__all__ = ["RESERVED_PREFIX", "parse_transform"]

# Feature names the transform step uses for its own passthrough columns.
RESERVED_PREFIX = "__btr_"


def parse_transform(check: Checker, raw: Any,
                    schema: Schema) -> TransformSection:
  """The `transform:` section (see beam_tfrecords.tft)."""
  if not isinstance(raw, dict):
    check.fail("transform", "must be a mapping: {features: {rating_z: "
               "{scale_to_z_score: rating}, ...}, keep_raw: true}")
  check.check_keys("transform", raw, ("features", "preprocessing_fn",
                                      "keep_raw", "analyze_split"))
  fn = raw.get("preprocessing_fn")
  if fn is not None and not (isinstance(fn, str) and _is_module_function(
      fn)):
    check.fail("transform.preprocessing_fn", f"must be MODULE:FUNCTION "
               f"(e.g. my_package.transform:preprocessing_fn), the way TFX's "
               f"Transform names a module_file's function; got {preview(fn)}")
  keep_raw = raw.get("keep_raw", True)
  if not isinstance(keep_raw, bool):
    check.fail("transform.keep_raw", "must be true or false")
  split = raw.get("analyze_split", DEFAULT_SPLIT)
  if split not in schema.splits.names:
    check.fail("transform.analyze_split",
               f"{preview(split)} is not a split of "
               f"this schema; its splits: {list(schema.splits.names)}")
  features = raw.get("features")
  if fn is not None and not features:
    features = {}
  elif not isinstance(features, dict) or not features:
    check.fail("transform.features", "must map output feature names to "
               "{analyzer: input feature, parameters...}, e.g. rating_z: "
               "{scale_to_z_score: rating} (or give preprocessing_fn: "
               "MODULE:FUNCTION)")
  # A SequenceExample's context and per-step features alike (a per-step
  # feature is given to TFT as a RaggedTensor (batch, steps)).
  stored = {f.name: f for f in schema.all_features}
  for n in stored:
    if n.startswith(RESERVED_PREFIX):
      check.fail(f"features.{n}", f"names starting with "
                 f"{RESERVED_PREFIX!r} are reserved for the build's own "
                 "columns (with transform:)")
  out = [_transform(check, name, entry, stored)
         for name, entry in features.items()]
  return TransformSection(features=tuple(out), keep_raw=keep_raw,
                          analyze_split=split, preprocessing_fn=fn)


def _transform(check: Checker, name: Any, entry: Any,
               stored: dict) -> Transform:
  """One declared transformed feature."""
  key = f"transform.features.{name}"
  if not isinstance(name, str) or not NAME_RE.match(name):
    check.fail(key, f"{preview(name)} is not a valid feature name")
  if name.startswith(RESERVED_PREFIX):
    check.fail(key, f"names starting with {preview(RESERVED_PREFIX)} are "
               "reserved for the build's own columns")
  if not isinstance(entry, dict):
    check.fail(key, f"must be a mapping such as {{scale_to_z_score: "
               f"rating}}; got {preview(entry)}")
  ops = [k for k in entry if k in TRANSFORMS]
  if len(ops) != 1:
    check.fail(key, f"needs exactly one analyzer of "
               f"{listed(TRANSFORMS)}; got {sorted(entry)}"
               f"{suggest(next(iter(entry), ''), TRANSFORMS)}")
  op = ops[0]
  types, params = TRANSFORMS[op]
  check.check_keys(key, entry, (op,) + params)
  source = entry[op]
  if not isinstance(source, str) or source not in stored:
    check.fail(f"{key}.{op}", f"{preview(source)} is not a stored feature; "
               f"allowed: {listed(sorted(stored))}."
               f"{suggest(source, stored)}")
  feature = stored[source]
  if feature.type.value not in types:
    check.fail(f"{key}.{op}", f"{op} takes {' or '.join(types)} "
               f"features; {preview(source)} is {feature.type.value}")
  if op != "pass" and not (feature.always_present
                           and not feature.is_variable_length):
    check.fail(f"{key}.{op}", f"{preview(source)} may be missing or vary in "
               "length; TensorFlow Transform's analyzers need a value "
               "in every record: give it required: true or a default")
  values: List[Tuple[str, int]] = []
  for p in params:
    if p in entry:
      v = entry[p]
      low = 2 if p == "num_buckets" else (0 if p in (
          "frequency_threshold", "num_oov_buckets") else 1)
      if isinstance(v, bool) or not isinstance(v, int) or v < low:
        check.fail(f"{key}.{p}", f"must be a whole number of at least "
                   f"{low}; got {preview(v)}")
      values.append((p, v))
  if op == "bucketize" and "num_buckets" not in entry:
    check.fail(f"{key}.num_buckets", "missing; how many buckets?")
  if op == "hash_strings" and "hash_buckets" not in entry:
    check.fail(f"{key}.hash_buckets", "missing; how many buckets?")
  return Transform(name=name, op=op, source=source, params=tuple(values))


def _is_module_function(name: str) -> bool:
  """MODULE:FUNCTION: a dotted module name, and a name in it (a
  function given as an object may be named "mod:make.<locals>.fn": only
  a name to import is checked further, when it is imported)."""
  module, sep, attr = name.partition(":")
  return bool(sep) and bool(attr) and not any(
      c.isspace() or c in ":/\\" for c in attr) and all(
          word.isidentifier() for word in module.split("."))

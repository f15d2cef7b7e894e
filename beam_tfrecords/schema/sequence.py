"""The checks of a SequenceExample schema (`record: sequence_example`).

Its `context:` features hold one value set per sequence and its
`sequence:` features one value per step. With `group_by` the rows sharing a
key become one sequence, steps in `order_by` order (`max_length`,
`overflow` and `on_bad_step` say what happens to long groups and rejected
rows); without it each row is one sequence whose cells hold lists of steps.
"""

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from beam_tfrecords.core.errors import preview
from beam_tfrecords.schema.checking import Checker, listed, suggest
from beam_tfrecords.schema.features import (CONTEXT, LISTS, STEPS,
                                            parse_feature, parse_type)
from beam_tfrecords.schema.model import (DEFAULT_MAX_RECORD_BYTES, Derive,
                                         Feature, FeatureType, OnBadStep,
                                         OrderKey, Overflow, RecordKind, Schema)
from beam_tfrecords.schema.sizes import record_bytes

__all__ = ["SEQUENCE_TOP_KEYS", "sequence_schema", "check_split_columns"]

SEQUENCE_TOP_KEYS = ("name", "record", "description", "context", "sequence",
                     "group_by", "order_by", "max_length", "overflow",
                     "on_bad_step", "ragged", "max_record_bytes",
                     "max_bad_rows", "max_bad_fraction", "splits", "label",
                     "expect", "baseline", "on_anomaly", "transform",
                     "card")
_ORDER_KEYS = ("column", "type", "descending")


def sequence_schema(check: Checker, raw: dict, name: str,
                    description: str) -> Schema:
  """A sequence_example schema (without the keys every schema shares:
  limits, splits, label)."""
  if "features" in raw:
    check.fail("features", "a sequence_example schema declares `context:` "
               "(one value set per sequence) and `sequence:` (one value per "
               "step) instead of `features:`")
  check.check_keys("", raw, SEQUENCE_TOP_KEYS)
  group_by = parse_group_by(check, raw.get("group_by"))
  mode = STEPS if group_by else LISTS
  context = feature_map(check, "context", raw.get("context", {}), CONTEXT,
                        allow_empty=True)
  sequence = feature_map(check, "sequence", raw.get("sequence"), mode)
  _check_context(check, context, {f.name for f in sequence},
                 bool(group_by))
  typed: Dict[str, FeatureType] = {}
  for f in context + sequence:
    if f.column is not None and f.is_scalar:
      typed.setdefault(f.column, f.type)
  # Keys are compared as stored values, so "7" in a CSV and 7 in JSON
  # are one key when a feature (or the declared type) says int64.
  group_keys = tuple((c, t or typed.get(c, FeatureType.STRING))
                     for c, t in group_by)
  order_by = parse_order_by(check, raw.get("order_by"), typed)
  # group_by / order_by columns are never missing in a written record
  # (rows without them are rejected), so context features that read one
  # are always present: required.
  key_columns = {c for c, _ in group_by} | {k.column for k in order_by}
  context = tuple(
      dataclasses.replace(f, required=True)
      if f.column in key_columns and f.default is None else f
      for f in context)
  if order_by and not group_by:
    check.fail("order_by", "order_by orders the rows of a group; it needs "
               "group_by (without it each row is one sequence whose list "
               "cells are already in order)")
  max_length, overflow = _length_policy(check, raw)
  policies = [p.value for p in OnBadStep]
  on_bad_step = raw.get("on_bad_step")
  if on_bad_step is not None:
    if on_bad_step not in policies:
      check.fail("on_bad_step",
                 f"{preview(on_bad_step)} is not a policy; allowed: "
                 f"{listed(policies)}."
                 f"{suggest(on_bad_step, policies)}")
    if not group_by:
      check.fail("on_bad_step", "on_bad_step says what happens to a group "
                 "when one of its rows is rejected; it needs group_by "
                 "(without it each row is one sequence, rejected alone)")
  ragged = raw.get("ragged", False)
  if not isinstance(ragged, bool):
    check.fail("ragged", f"must be true or false; got {preview(ragged)}")
  if ragged and group_by:
    check.fail("ragged", "with group_by every step has a value for every "
               "sequence feature, so feature lists always align; ragged "
               "applies to list columns (no group_by)")
  max_bytes = record_bytes(check, "max_record_bytes",
                           raw.get("max_record_bytes"))
  return Schema(name=name, record=RecordKind.SEQUENCE_EXAMPLE,
                description=description, path=check.path,
                context=context, sequence=sequence, group_by=group_keys,
                order_by=order_by, max_length=max_length,
                overflow=Overflow(overflow or "reject"),
                on_bad_step=OnBadStep(on_bad_step or "reject_group"),
                ragged=ragged,
                max_record_bytes=DEFAULT_MAX_RECORD_BYTES if max_bytes is None
                else max_bytes)


def _check_context(check: Checker, context: Tuple[Feature, ...],
                   seq_names: Set[str], grouped: bool) -> None:
  """Context features: names apart from the sequence's, derive: first /
  last only with group_by, `of:` a sequence feature."""
  for f in context:
    key = f"context.{f.name}"
    if f.name in seq_names:
      check.fail(key,
                 f"{preview(f.name)} is also a sequence feature; context and "
                 "sequence keys must differ (TensorFlow parses both into "
                 "one namespace)")
    if f.derive in (Derive.FIRST, Derive.LAST) and not grouped:
      check.fail(f"{key}.derive", f"derive: {f.derive.value} picks a value "
                 "from the rows of a group; it needs group_by (without it "
                 "each row is one sequence and its context is constant)")
    if f.of is not None and f.of not in seq_names:
      check.fail(f"{key}.of", f"{preview(f.of)} is not a sequence feature; "
                 f"allowed: {listed(sorted(seq_names))}."
                 f"{suggest(f.of, seq_names)}")


def _length_policy(check: Checker, raw: dict) -> Tuple[Optional[int], Any]:
  """`max_length` (a positive number of steps, or None) and `overflow`
  (what happens past it), checked."""
  max_length = raw.get("max_length")
  if max_length is not None and (not isinstance(max_length, int) or
                                 isinstance(max_length, bool) or
                                 max_length < 1):
    check.fail("max_length", f"must be a positive number of steps; got "
               f"{preview(max_length)}")
  overflows = [o.value for o in Overflow]
  overflow = raw.get("overflow")
  if overflow is not None:
    if max_length is None:
      check.fail("overflow", "overflow says what happens to sequences "
                 "longer than max_length; set max_length too")
    if overflow not in overflows:
      check.fail("overflow", f"{preview(overflow)} is not a policy; allowed: "
                 f"{listed(overflows)}.{suggest(overflow, overflows)}")
  return max_length, overflow


def feature_map(check: Checker, key: str, raw: Any, role: str,
                allow_empty: bool = False) -> Tuple[Feature, ...]:
  """The `context:` or `sequence:` features, sorted by name."""
  if raw is None:
    check.fail(key, "missing; a sequence_example schema declares its "
               "sequence features, e.g. sequence: {tokens: {type: int64}}")
  if not isinstance(raw, dict) or (not raw and not allow_empty):
    check.fail(key, "must be a non-empty mapping of feature name -> "
               f"definition; got {preview(raw)}")
  parsed = [parse_feature(check, str(k), k, v, role, key)
            for k, v in raw.items()]
  return tuple(sorted(parsed, key=lambda f: f.name))


def parse_group_by(check: Checker,
                   raw: Any) -> Tuple[Tuple[str, Optional[FeatureType]], ...]:
  """`user`, [user, session] or [{column: user, type: int64}] ->
  [(column, FeatureType or None)]."""
  if raw is None:
    return ()
  items = raw if isinstance(raw, list) else [raw]
  if not items:
    check.fail("group_by", "must name at least one column")
  out: List[Tuple[str, Optional[FeatureType]]] = []
  for i, item in enumerate(items):
    key = f"group_by[{i}]"
    ftype = None
    if isinstance(item, dict):
      check.check_keys(key, item, ("column", "type"))
      if "type" in item:
        ftype = parse_type(check, f"{key}.type", item["type"])
      item = item.get("column")
    if not isinstance(item, str) or not item:
      check.fail(key, f"must be a column name or {{column: name, type: "
                 f"int64}}; got {preview(item)}")
    if any(c == item for c, _ in out):
      check.fail(key, f"column {preview(item)} appears twice in group_by")
    out.append((item, ftype))
  return tuple(out)


def parse_order_by(check: Checker, raw: Any,
                   typed: Mapping[str, FeatureType]) -> Tuple[OrderKey, ...]:
  """`ts`, [ts, {score: desc}, {column: c, type: float, descending: true}]."""
  if raw is None:
    return ()
  items = raw if isinstance(raw, list) else [raw]
  keys: List[OrderKey] = []
  for i, item in enumerate(items):
    key = f"order_by[{i}]"
    descending, ftype = False, None
    if isinstance(item, dict) and "column" not in item and len(item) == 1:
      (column, direction), = item.items()
      if direction not in ("asc", "desc"):
        check.fail(key, f"{preview(item)}: the direction must be asc or desc")
      item = {"column": column, "descending": direction == "desc"}
    if isinstance(item, dict):
      check.check_keys(key, item, _ORDER_KEYS)
      column = item.get("column")
      descending = item.get("descending", False)
      if not isinstance(descending, bool):
        check.fail(f"{key}.descending", f"must be true or false; got "
                   f"{preview(descending)}")
      if "type" in item:
        ftype = parse_type(check, f"{key}.type", item["type"])
    else:
      column = item
    if not isinstance(column, str) or not column:
      check.fail(key, f"must be a column name, {{column: name, type: int64, "
                 f"descending: true}} or {{name: desc}}; got {preview(item)}")
    if ftype is None:
      ftype = typed.get(column)
    if ftype is None:
      check.fail(key,
                 f"no scalar feature reads column {preview(column)}, so its "
                 "type is unknown (text and numbers sort differently: "
                 '"10" < "9"); say it: {column: ' + column +
                 ", type: int64}")
    if any(k.column == column for k in keys):
      check.fail(key, f"column {preview(column)} appears twice in order_by")
    keys.append(OrderKey(column=column, type=ftype, descending=descending))
  return tuple(keys)


def check_split_columns(check: Checker, schema: Schema) -> None:
  """A split rule of a grouped schema reads group_by columns only."""
  keys = [c for c, _ in schema.group_by]
  for column in schema.splits.columns:
    if keys and column not in keys:
      check.fail("splits",
                 f"{preview(column)} is not a group_by column; a split "
                 "rule on it would put rows of one sequence into "
                 f"different splits (group_by: {keys})")

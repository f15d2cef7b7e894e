"""The checks of the `splits:` section: which split each row goes to.

A hash rule (`hash:` key columns with `weights:`), or a column rule whose
value names the split (`values:`) or is compared with ordered bounds
(`below:`, with `rest:`). See beam_tfrecords.encoding.splitting for how rows are
assigned.
"""

import re
from typing import Any, Dict, List, Optional, Tuple

from beam_tfrecords.core.errors import preview
from beam_tfrecords.core.layout import ERRORS_DIR
from beam_tfrecords.schema.checking import Checker
from beam_tfrecords.schema.model import (FeatureType, Schema, SplitKind,
                                         SplitRule)

__all__ = ["parse_splits", "check_split_types"]

# Split names become file name prefixes.
_SPLIT_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SPLIT_KEYS = ("hash", "weights", "column", "values", "below", "rest")
_WEIGHT_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$")


def parse_splits(check: Checker, raw: Any) -> SplitRule:
  """The `splits:` section (see beam_tfrecords.encoding.splitting)."""
  if not isinstance(raw, dict):
    check.fail("splits", "must be a mapping: {hash: [key columns], weights: "
               "{train: 80%, eval: 20%}}, {column: c, values: {...}} or "
               "{column: c, below: {...}, rest: split}")
  check.check_keys("splits", raw, _SPLIT_KEYS)
  if "hash" in raw:
    return _hash_rule(check, raw)
  column = raw.get("column")
  if not isinstance(column, str) or not column:
    check.fail("splits", "give `hash: [key columns]` with `weights:`, or "
               "`column:` with `values:` or `below:`")
  if ("values" in raw) == ("below" in raw):
    check.fail("splits", "a column rule has either `values:` (the value "
               "names the split) or `below:` (bounds, e.g. dates), not "
               "both" if "values" in raw else "a column rule needs `values:` "
               "(the value names the split) or `below:` (ordered bounds)")
  if "weights" in raw:
    check.fail("splits.weights", "belongs to a hash rule (hash: [key "
               "columns])")
  if "values" in raw:
    return _values_rule(check, raw, column)
  return _below_rule(check, raw, column)


def _hash_rule(check: Checker, raw: dict) -> SplitRule:
  """`hash: [key columns]` with `weights: {train: 80%, ...}`."""
  for k in ("column", "values", "below", "rest"):
    if k in raw:
      check.fail(f"splits.{k}", "belongs to a column rule; a hash rule "
                 "has `hash:` and `weights:` only")
  columns = raw["hash"] if isinstance(raw["hash"], list) else [raw["hash"]]
  if not columns or not all(isinstance(c, str) and c for c in columns):
    check.fail("splits.hash", f"must name the key column(s) to hash, e.g. "
               "hash: user_id or hash: [user_id, day]; got "
               f"{preview(raw['hash'])}")
  if len(set(columns)) != len(columns):
    check.fail("splits.hash", "a column appears twice")
  weights = _ordered_pairs(check, "splits.weights", raw.get("weights"))
  if not weights:
    check.fail("splits.weights", "must map split names to shares, e.g. "
               "{train: 80%, eval: 10%, test: 10%} or bucket counts "
               "{train: 8, eval: 1, test: 1}")
  names: List[str] = []
  values: List[float] = []
  percents = 0
  for name, w in weights:
    key = f"splits.weights.{name}"
    names.append(_split_name(check, key, name))
    m = _WEIGHT_RE.match(w) if isinstance(w, str) else None
    if m:
      percents += 1
      w = float(m.group(1))
    if isinstance(w, bool) or not isinstance(w, (int, float)) or w <= 0:
      check.fail(key, f"must be a share above 0 (80% or a bucket count "
                 f"such as 8); got {preview(w)}")
    values.append(float(w))
  if percents and percents != len(values):
    check.fail("splits.weights", "mixes percentages and bucket counts; "
               "use one kind")
  if percents and abs(sum(values) - 100.0) > 1e-6:
    check.fail("splits.weights", f"percentages add up to "
               f"{sum(values):g}%, not 100%")
  return SplitRule(kind=SplitKind.HASH, names=tuple(names),
                   columns=tuple(columns), weights=tuple(values))


def _values_rule(check: Checker, raw: dict, column: str) -> SplitRule:
  """`column: c` with `values:`: the column's value names the split."""
  if "rest" in raw:
    check.fail("splits.rest", "belongs to a `below:` rule")
  given = _ordered_pairs(check, "splits.values", raw["values"])
  if given is None and isinstance(raw["values"], list):
    given = [(name, [name]) for name in raw["values"]]  # value = name
  if not given:
    check.fail("splits.values", "must list the split names ([train, "
               "eval]) or map each to the column values that select it "
               "({train: [train, training], eval: [validation]})")
  names: List[str] = []
  pairs: List[Tuple[bytes, str]] = []
  seen: Dict[str, str] = {}
  for name, accepted in given:
    key = f"splits.values.{name}"
    names.append(_split_name(check, key, name))
    accepted = accepted if isinstance(accepted, list) else [accepted]
    if not accepted:
      check.fail(key, "lists no value")
    for v in accepted:
      if isinstance(v, bool) or not isinstance(v, (str, int)):
        check.fail(key,
                   f"values are text or whole numbers; got {preview(v)}")
      text = str(v)
      if text in seen:
        check.fail(key,
                   f"{preview(text)} already selects split "
                   f"{preview(seen[text])}")
      seen[text] = name
      pairs.append((text.encode("utf-8"), name))
  return SplitRule(kind=SplitKind.VALUES, names=tuple(names),
                   columns=(column,), values=tuple(pairs))


def _below_rule(check: Checker, raw: dict, column: str) -> SplitRule:
  """`column: c` with `below:` bounds in order, and `rest:`."""
  given = _ordered_pairs(check, "splits.below", raw["below"])
  if not given:
    check.fail("splits.below", "must map split names to bounds in order, "
               "e.g. {train: \"2026-11-01\", eval: \"2026-11-15\"}")
  names: List[str] = []
  bounds: List[Any] = []
  for name, bound in given:
    key = f"splits.below.{name}"
    names.append(_split_name(check, key, name))
    if isinstance(bound, bool) or not isinstance(bound, (str, int, float)):
      check.fail(key, f"a bound is a number or text (e.g. an ISO date); got "
                 f"{preview(bound)}")
    bounds.append(bound)
  kinds = {isinstance(b, str) for b in bounds}
  if len(kinds) > 1:
    check.fail("splits.below", "mixes numbers and text; bounds are compared "
               "with the column's values, all as numbers or all as text")
  if any(b >= c for b, c in zip(bounds, bounds[1:])):
    check.fail("splits.below", f"bounds must increase in the order given; "
               f"got {preview(bounds)}")
  rest = raw.get("rest")
  if rest is not None:
    rest = _split_name(check, "splits.rest", rest)
    if rest in names:
      check.fail("splits.rest", f"{preview(rest)} already has a bound")
    names.append(rest)
  return SplitRule(kind=SplitKind.BELOW, names=tuple(names),
                   columns=(column,), bounds=tuple(bounds), rest=rest)


def _split_name(check: Checker, key: str, name: Any) -> str:
  """A split name: it starts the names of the split's files (so not the
  dead-letter files' own, errors-NNNNN-of-NNNNN.jsonl)."""
  if not isinstance(name, str) or not _SPLIT_NAME_RE.match(name) or \
      name == ERRORS_DIR:
    check.fail(key,
               f"{preview(name)} is not a valid split name; use a letter then "
               "letters, digits or '_' (it starts the file names), not "
               f"{ERRORS_DIR!r}")
  return name


def _ordered_pairs(check: Checker, key: str,
                   raw: Any) -> Optional[List[Tuple[Any, Any]]]:
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
        check.fail(key, f"names {preview(n)} twice")
    return out
  return None


def check_split_types(check: Checker, schema: Schema) -> Schema:
  """Text bounds on a column read as numbers would compare as text
  ("10" < "9"): refused."""
  rule = schema.splits
  if rule.kind is SplitKind.BELOW and isinstance(rule.bounds[0], str):
    column = rule.columns[0]
    types = [t for c, t in schema.group_by if c == column] + [
        f.type for f in schema.all_features
        if f.column == column and f.is_scalar and f.derive is None]
    if types and types[0] in (FeatureType.INT64, FeatureType.FLOAT):
      check.fail("splits.below", f"the bounds are text but column "
                 f"{preview(column)} is read as {types[0].value} "
                 "(text compares "
                 f'"10" < "9"); give numbers as bounds, e.g. 20261101')
  return schema

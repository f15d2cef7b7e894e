"""The `expect:` sections (of a feature, and of the dataset), `baseline:` and
`on_anomaly:`, checked: what the data must show before it is published
(beam_tfrecords.inspect.expectations checks it against the statistics).

    features:
      dep_delay:
        type: float
        expect: {presence: 0.95, min: -120, max: 1500, drift: 0.1}
      carrier:
        type: string
        expect: {values: [AA, DL, UA], max_unexpected: 0.01, drift: 0.05}
    expect: {records: {min: 1000}, records_change: 0.5,
             disjoint_splits: true}
    baseline: out/flights/previous
"""

from typing import Any, Optional, Tuple

from beam_tfrecords.core.errors import preview
from beam_tfrecords.schema.checking import Checker, listed, suggest
from beam_tfrecords.schema.model import (ON_ANOMALY, DatasetExpect, Feature,
                                         FeatureExpect, FeatureType)

__all__ = ["parse_feature_expect", "parse_dataset_expect", "parse_baseline",
           "check_disjoint_keys",
           "parse_on_anomaly", "FEATURE_EXPECT_KEYS", "DATASET_EXPECT_KEYS"]

FEATURE_EXPECT_KEYS = ("presence", "min", "max", "values", "max_unexpected",
                       "length", "drift")
DATASET_EXPECT_KEYS = ("records", "records_change", "disjoint_splits",
                       "disjoint_keys")
_NUMBERS = (FeatureType.INT64, FeatureType.FLOAT)
_CATEGORIES = (FeatureType.STRING, FeatureType.BYTES, FeatureType.INT64)


def _number(check: Checker, key: str, value: Any) -> float:
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    check.fail(key, f"must be a number; got {preview(value)}")
  return value


def _fraction(check: Checker, key: str, value: Any) -> float:
  value = _number(check, key, value)
  if not 0 <= value <= 1:
    check.fail(key, f"must be a fraction from 0 to 1; got {preview(value)}")
  return float(value)


def _count(check: Checker, key: str, value: Any) -> int:
  if isinstance(value, bool) or not isinstance(value, int) or value < 0:
    check.fail(key, f"must be a whole number >= 0; got {preview(value)}")
  return value


def _range(check: Checker, key: str, raw: Any,
           ) -> Tuple[Optional[int], Optional[int]]:
  """{min: a, max: b} of whole numbers (either may be left out)."""
  if not isinstance(raw, dict) or not raw:
    check.fail(key, f"must be a mapping such as {{min: 1, max: 10}}; got "
               f"{preview(raw)}")
  check.check_keys(key, raw, ("min", "max"))
  low = None if raw.get("min") is None else _count(check, f"{key}.min",
                                                    raw["min"])
  high = None if raw.get("max") is None else _count(check, f"{key}.max",
                                                     raw["max"])
  if low is not None and high is not None and high < low:
    check.fail(key, f"max {high} is below min {low}")
  return low, high


def _values(check: Checker, key: str, raw: Any,
            feature: Feature) -> Tuple[Any, ...]:
  if feature.type not in _CATEGORIES:
    check.fail(key, f"values are for string, bytes and int64 features; "
               f"{feature.name!r} is {feature.type.value} (give min / max)")
  if not isinstance(raw, list) or not raw:
    check.fail(key, f"must be a non-empty list of allowed values; got "
               f"{preview(raw)}")
  out = []
  for v in raw:
    if feature.type is FeatureType.INT64:
      if isinstance(v, bool) or not isinstance(v, int) or \
          not -2**63 <= v < 2**63:
        check.fail(key, f"{preview(v)} is not an int64 value")
      out.append(v)
    else:
      if not isinstance(v, str):
        check.fail(key, f"{preview(v)} is not text; quote it "
                   f"(\"{v}\")")
      out.append(v.encode("utf-8"))
  if len(set(out)) != len(out):
    check.fail(key, "lists a value twice")
  return tuple(out)


def parse_feature_expect(check: Checker, key: str, raw: Any,
                         feature: Feature) -> FeatureExpect:
  """A feature's `expect:` section (`key`: where it stands)."""
  if not isinstance(raw, dict) or not raw:
    check.fail(key, f"must be a mapping of checks "
               f"({listed(FEATURE_EXPECT_KEYS)}); got {preview(raw)}")
  check.check_keys(key, raw, FEATURE_EXPECT_KEYS)
  fields: dict = {}
  if raw.get("presence") is not None:
    fields["presence"] = _fraction(check, f"{key}.presence", raw["presence"])
  for bound in ("min", "max"):
    if raw.get(bound) is not None:
      if feature.type not in _NUMBERS:
        check.fail(f"{key}.{bound}", f"{bound} is for int64 and float "
                   f"features; {feature.name!r} is {feature.type.value}"
                   + (" (give values)" if feature.type in _CATEGORIES
                      else ""))
      fields[bound] = _number(check, f"{key}.{bound}", raw[bound])
  if "min" in fields and "max" in fields and fields["max"] < fields["min"]:
    check.fail(key, f"max {fields['max']} is below min {fields['min']}")
  if raw.get("values") is not None:
    fields["values"] = _values(check, f"{key}.values", raw["values"], feature)
  if raw.get("max_unexpected") is not None:
    if "values" not in fields:
      check.fail(f"{key}.max_unexpected", "goes with values: the fraction "
                 "of values allowed outside them")
    fields["max_unexpected"] = _fraction(check, f"{key}.max_unexpected",
                                         raw["max_unexpected"])
  if raw.get("length") is not None:
    if feature.is_scalar:
      check.fail(f"{key}.length", f"length is for list features (values per "
                 f"record); {feature.name!r} is a scalar")
    fields["length_min"], fields["length_max"] = _range(
        check, f"{key}.length", raw["length"])
  if raw.get("drift") is not None:
    fields["drift"] = _fraction(check, f"{key}.drift", raw["drift"])
    if feature.type is FeatureType.BYTES and "values" not in fields:
      check.fail(f"{key}.drift", "drift of bytes compares value "
                 "frequencies: give values too")
  return FeatureExpect(**fields)


def parse_dataset_expect(check: Checker, raw: Any) -> DatasetExpect:
  """The top-level `expect:` section."""
  if not isinstance(raw, dict) or not raw:
    check.fail("expect", f"must be a mapping of checks "
               f"({listed(DATASET_EXPECT_KEYS)}); got {preview(raw)}")
  for k in raw:
    if k not in DATASET_EXPECT_KEYS and k in FEATURE_EXPECT_KEYS:
      check.fail(f"expect.{k}", f"{k} is a feature's check: put it in the "
                 "feature's own expect: section")
  check.check_keys("expect", raw, DATASET_EXPECT_KEYS)
  low = high = change = None
  if raw.get("records") is not None:
    low, high = _range(check, "expect.records", raw["records"])
  if raw.get("records_change") is not None:
    change = _number(check, "expect.records_change", raw["records_change"])
    if change < 0:
      check.fail("expect.records_change", f"must be >= 0 (0.5: at most "
                 f"50% more or fewer records); got {preview(change)}")
  disjoint = raw.get("disjoint_splits", False)
  if not isinstance(disjoint, bool):
    check.fail("expect.disjoint_splits", f"must be true or false; got "
               f"{preview(disjoint)}")
  keys = raw.get("disjoint_keys")
  if keys is not None:
    keys = [keys] if isinstance(keys, str) else keys
    if not isinstance(keys, list) or not keys or not all(
        isinstance(k, str) and k for k in keys):
      check.fail("expect.disjoint_keys", f"must be a column name or a list "
                 f"of them; got {preview(raw['disjoint_keys'])}")
  return DatasetExpect(low, high, change, disjoint, tuple(keys or ()))


def check_disjoint_keys(check: Checker, grouped: bool) -> None:
  """disjoint_keys reads the rows' columns: builds that encode row by
  row (Examples, sequences from list columns)."""
  if grouped:
    check.fail("expect.disjoint_keys", "works on builds that encode row by "
               "row; with group_by, split by a hash of the group key "
               "(splits: {hash: ...}): one key, one split")


def parse_baseline(check: Checker, raw: Any) -> str:
  if not isinstance(raw, str) or not raw:
    check.fail("baseline", f"must be a dataset folder, or previous; got "
               f"{preview(raw)}")
  return raw


def parse_on_anomaly(check: Checker, raw: Any) -> str:
  if raw not in ON_ANOMALY:
    check.fail("on_anomaly", f"{preview(raw)} is not allowed; allowed: "
               f"{listed(ON_ANOMALY)}.{suggest(str(raw), ON_ANOMALY)}")
  return raw

"""The schema's expectations checked against a build's statistics (and a
baseline dataset's) before anything is published.

Every failed check is an `Anomaly`: the feature (None for the dataset's
own checks), the check, the split, what was observed and what was
expected, as TFDV's Anomalies name them. The checks read only what the
build's statistics pass computed (encoding.stats): presence, min / max,
the values outside an allowed set (counted exactly), values per record,
and for drift the full histogram (numbers) or value counts (categories);
the records of two splits are compared by digest (transforms.overlap).

Drift is measured on the training split against the baseline's, by
beam_tfrecords.inspect.drift (which the report uses too): L-infinity distance
between value frequencies for categories (text, and int64 features with
`values`), Jensen-Shannon divergence (base 2, 0..1) for numbers.
"""

import dataclasses
import math
import os
from fractions import Fraction
from typing import List, NamedTuple, Optional, Tuple

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.info import (Anomalies, Anomaly, DatasetInfo,
                                      FeatureStats)
from beam_tfrecords.core.layout import ANOMALIES_FILE
from beam_tfrecords.inspect import drift
from beam_tfrecords.read.reader import dataset_info
from beam_tfrecords.schema import Schema
from beam_tfrecords.schema.model import Feature
from beam_tfrecords.schema.split_rule import training_split

__all__ = ["Anomaly", "Checked", "CheckPlan", "check_dataset", "load_baseline"]


class CheckPlan(NamedTuple):
  """What the commit step checks a build against (decided on the
  launcher): the schema's expectations, the baseline's dataset.json and
  where it is."""
  schema: Schema
  baseline: Optional[DatasetInfo] = None
  baseline_path: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Checked:
  """The outcome: the anomalies, and notes on what was not compared."""
  anomalies: Tuple[Anomaly, ...]
  notes: Tuple[str, ...] = ()

  def described(self, baseline: Optional[str]) -> Anomalies:
    """dataset.json's `anomalies` (and anomalies.json's content)."""
    return Anomalies(ANOMALIES_FILE, baseline, self.notes, self.anomalies)


def load_baseline(path: Optional[str], schema: Schema
                  ) -> Tuple[Optional[DatasetInfo], Optional[str]]:
  """(its dataset.json, its path) of a baseline dataset; (None, None)
  without one.

  Raises:
    InputError: not a finished dataset, or one of another record kind.
  """
  if not path:  # none ("": --baseline previous found no earlier one)
    return None, None
  if path == "previous":
    raise InputError(
        "baseline: previous means the newest earlier date or span of the "
        "output's placeholders; it is resolved by the command line "
        "(beam-tfrecords build --output 'out/{YYYY}{MM}{DD}' --date ... "
        "--baseline previous); from Python give the dataset's folder")
  path = path.rstrip("/")
  if "://" not in path:  # as the output: workers may run elsewhere
    path = os.path.abspath(path)
  try:
    info = dataset_info(path)
  except InputError as e:
    raise InputError(f"the baseline: {e}; give a finished dataset this "
                     "tool built, or leave the baseline out") from None
  if info.record != schema.record.value:
    raise InputError(f"the baseline {path} holds {info.record} records; "
                     f"this schema writes {schema.record.value}")
  return info, path


def check_dataset(schema: Schema, info: DatasetInfo,
                  baseline: Optional[DatasetInfo] = None,
                  overlap: Optional[int] = None,
                  key_overlap: Optional[int] = None) -> Checked:
  """The anomalies of a built (staged) dataset.

  Args:
    schema: the schema, with its expect: sections.
    info: the staged dataset.json, with statistics.
    baseline: a finished dataset to compare with (drift, records_change).
    overlap: distinct records found in more than one split (when the
      schema expects disjoint splits).
    key_overlap: distinct values of the disjoint_keys columns found in
      more than one split.
  """
  found: List[Anomaly] = []
  notes: List[str] = []
  stats = info.statistics or {}
  for feature in schema.all_features:
    if feature.expect is None:
      continue
    for split, features in sorted(stats.items()):
      if feature.name in features:
        found += _feature_checks(feature, split, features[feature.name])
  found += _dataset_checks(schema, info, baseline, overlap)
  if schema.expect is not None and schema.expect.disjoint_keys and \
      key_overlap:
    found.append(Anomaly(None, "disjoint_keys", key_overlap,
                         f"0 values of {', '.join(schema.expect.disjoint_keys)}"
                         " found in more than one split"))
  if baseline is not None:
    drift, drift_notes = _drift_checks(schema, info, baseline)
    found += drift
    notes += drift_notes
  elif any(f.expect is not None and f.expect.drift is not None
           for f in schema.all_features) or (
               schema.expect is not None
               and schema.expect.records_change is not None):
    notes.append("no baseline: drift and records_change were not checked")
  return Checked(tuple(found), tuple(notes))


def _feature_checks(feature: Feature, split: str,
                    s: FeatureStats) -> List[Anomaly]:
  expect = feature.expect
  assert expect is not None
  out = []
  name = feature.name
  records = s.records
  # Fractions compared exactly (0.29 * 100 is 28.999... in floats).
  if expect.presence is not None and records and \
      s.present < _exact(expect.presence) * records:
    needed = math.ceil(_exact(expect.presence) * records)
    out.append(Anomaly(name, "presence", s.present / records,
                       f">= {expect.presence:g} ({needed:,} of {records:,})",
                       split))
  if expect.min is not None and s.min is not None and s.min < expect.min:
    out.append(Anomaly(name, "min", s.min, f">= {expect.min:g}", split))
  if expect.max is not None and s.max is not None and s.max > expect.max:
    out.append(Anomaly(name, "max", s.max, f"<= {expect.max:g}", split))
  if expect.min is not None or expect.max is not None:
    if s.non_finite:
      out.append(Anomaly(name, "finite", s.non_finite,
                         "0 NaN or infinite values (min / max hold for "
                         "numbers)", split))
  if expect.values is not None and s.values:
    allowed = math.floor(_exact(expect.max_unexpected) * s.values)
    if (s.unexpected or 0) > allowed:
      out.append(Anomaly(name, "values", s.unexpected,
                         f"at most {allowed:,} of {s.values:,} values "
                         f"outside the {len(expect.values)} allowed",
                         split))
  length = s.list_length
  if length is not None:
    if expect.length_min is not None and length.min < expect.length_min:
      out.append(Anomaly(name, "length.min", length.min,
                         f">= {expect.length_min}", split))
    if expect.length_max is not None and length.max > expect.length_max:
      out.append(Anomaly(name, "length.max", length.max,
                         f"<= {expect.length_max}", split))
  return out


def _exact(fraction: float) -> Fraction:
  """A fraction as written in the schema (0.29 is 29/100, not the float)."""
  return Fraction(repr(fraction))


def _dataset_checks(schema: Schema, info: DatasetInfo,
                    baseline: Optional[DatasetInfo],
                    overlap: Optional[int]) -> List[Anomaly]:
  expect = schema.expect
  if expect is None:
    return []
  out = []
  n = info.counts.records_written
  if expect.records_min is not None and n < expect.records_min:
    out.append(Anomaly(None, "records.min", n, f">= {expect.records_min:,}"))
  if expect.records_max is not None and n > expect.records_max:
    out.append(Anomaly(None, "records.max", n, f"<= {expect.records_max:,}"))
  if expect.records_change is not None and baseline is not None:
    before = baseline.counts.records_written
    if before:
      change = abs(n - before) / before
      if change > expect.records_change:
        out.append(Anomaly(None, "records_change", change,
                           f"<= {expect.records_change:g} (baseline "
                           f"{before:,} records, now {n:,})"))
    elif n:  # (infinite: JSON has no number for it)
      out.append(Anomaly(None, "records_change", "infinite",
                         f"<= {expect.records_change:g} (baseline 0 "
                         f"records, now {n:,})"))
  if expect.disjoint_splits and overlap:
    out.append(Anomaly(None, "disjoint_splits", overlap,
                       "0 records found in more than one split"))
  return out


def _drift_checks(schema: Schema, info: DatasetInfo, baseline: DatasetInfo
                  ) -> Tuple[List[Anomaly], List[str]]:
  out, notes = [], []
  new_stats = info.statistics or {}
  old_stats = baseline.statistics or {}
  split = training_split(new_stats)
  old_split = split if split in old_stats else training_split(old_stats)
  mine = {f.name for f in schema.all_features}
  theirs = set((baseline.feature_spec or {}).get("context", {})) | set(
      (baseline.feature_spec or {}).get("sequence", {})) | set(
          baseline.feature_spec or {})
  only_new = sorted(mine - theirs - {"context", "sequence"})
  if only_new:
    notes.append("compared with the baseline on the features both have; "
                 f"not in the baseline: {', '.join(only_new)}")
  for feature in schema.all_features:
    expect = feature.expect
    if expect is None or expect.drift is None or split is None:
      continue
    new = new_stats.get(split, {}).get(feature.name)
    old = old_stats.get(old_split or "", {}).get(feature.name)
    if new is None or old is None:
      if feature.name in theirs:
        notes.append(f"drift of {feature.name!r} not measured: no "
                     "statistics of it in the "
                     + ("baseline" if old is None else "new data"))
      continue
    if not new.values or not old.values:
      notes.append(f"drift of {feature.name!r} not measured: no values in "
                   + ("the new data" if not new.values else "the baseline"))
      continue
    if new.drift_note:
      notes.append(f"drift of {feature.name!r} not measured: "
                   f"{new.drift_note}")
      continue
    measured = drift.distance(drift.from_json(new), drift.from_json(old))
    if measured is None:
      notes.append(f"drift of {feature.name!r} not measured: the baseline's "
                   "statistics of it are not comparable (built without "
                   "this expect: section, or with other values:)")
      continue
    if measured.value > expect.drift:
      out.append(Anomaly(feature.name, "drift", measured.value,
                         f"<= {expect.drift:g} ({measured.kind} from the "
                         "baseline's "
                         f"{old_split})", split))
  return out, notes

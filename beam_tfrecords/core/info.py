"""dataset.json as typed values: `DatasetInfo` and its parts.

    info = btr.dataset_info("out/ratings")            # a DatasetInfo
    info.splits["train"].num_records, info.splits["train"].num_shards
    info.splits["train"].files                         # shard paths, in order
    info.counts.rows_rejected, info.errors.reasons[0].reason
    info.name, info.record, info.label, info.feature_spec

`DatasetInfo.from_json(d).to_json() == d` for every dataset.json a build
writes, and `to_text()` gives its exact bytes (keys sorted, two-space
indent): tests/e2e/test_info.py checks it on the bundled and grouped builds.
Keys this version does not know (written by a later one) are kept in
`extra` and written back unchanged.

dataset.json is read and written only through these types (their
attributes; `to_json()` gives the JSON object).
"""

import dataclasses
import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from beam_tfrecords.core import fs

__all__ = ["DatasetInfo", "SplitInfo", "ShardInfo", "Counts", "Errors",
           "Anomaly", "Anomalies",
           "ErrorFile", "ErrorReason", "TransformInfo", "DATASET_JSON"]

DATASET_JSON = "dataset.json"


@dataclasses.dataclass(frozen=True)
class ShardInfo:
  """One shard file: its path relative to the dataset folder."""
  file: str
  num_records: int
  num_bytes: int

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "ShardInfo":
    return cls(d["file"], d["records"], d["bytes"])

  def to_json(self) -> Dict[str, Any]:
    return {"file": self.file, "records": self.num_records,
            "bytes": self.num_bytes}


@dataclasses.dataclass(frozen=True)
class SplitInfo:
  """One split: its records, bytes and shards (in order)."""
  name: str
  num_records: int
  num_bytes: int
  shards: Tuple[ShardInfo, ...]

  @property
  def num_shards(self) -> int:
    return len(self.shards)

  @property
  def files(self) -> List[str]:
    """The shard files, relative to the dataset folder, in order."""
    return [s.file for s in self.shards]

  @classmethod
  def from_json(cls, name: str, d: Mapping[str, Any]) -> "SplitInfo":
    return cls(name, d["records"], d["bytes"],
               tuple(ShardInfo.from_json(s) for s in d["shards"]))

  def to_json(self) -> Dict[str, Any]:
    return {"records": self.num_records, "bytes": self.num_bytes,
            "shards": [s.to_json() for s in self.shards]}


def _splits_from_json(d: Mapping[str, Any]) -> Dict[str, SplitInfo]:
  return {name: SplitInfo.from_json(name, s) for name, s in d.items()}


def _splits_to_json(splits: Mapping[str, SplitInfo]) -> Dict[str, Any]:
  return {name: s.to_json() for name, s in splits.items()}


@dataclasses.dataclass(frozen=True)
class Counts:
  """Where every input row went (rows read = written + rejected +
  dropped); steps for SequenceExamples only."""
  rows_read: int
  rows_written: int
  rows_rejected: int
  rows_dropped: int
  records_written: int
  steps_written: Optional[int] = None
  steps_dropped: Optional[int] = None

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "Counts":
    return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls)
                  if f.name in d})

  def to_json(self) -> Dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(self).items()
            if v is not None}


@dataclasses.dataclass(frozen=True)
class ErrorFile:
  """One dead-letter file: JSON lines, and the input rows they name."""
  file: str
  lines: int
  rows: int

  def to_json(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ErrorReason:
  """A kind of problem (its values taken out), its rows, one example."""
  reason: str
  rows: int
  example: Optional[Dict[str, Any]] = None

  def to_json(self) -> Dict[str, Any]:
    return {"reason": self.reason, "rows": self.rows,
            "example": self.example}


@dataclasses.dataclass(frozen=True)
class Errors:
  """The dead-letter output: rows, files, the most frequent reasons."""
  rows: int
  files: Tuple[ErrorFile, ...] = ()
  reasons: Tuple[ErrorReason, ...] = ()

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "Errors":
    return cls(d["rows"], tuple(ErrorFile(**f) for f in d["files"]),
               tuple(ErrorReason(**r) for r in d["reasons"]))

  def to_json(self) -> Dict[str, Any]:
    return {"rows": self.rows, "files": [f.to_json() for f in self.files],
            "reasons": [r.to_json() for r in self.reasons]}


@dataclasses.dataclass(frozen=True)
class TransformInfo:
  """TensorFlow Transform's part: the transformed splits, the graph's
  files and the transformed feature spec (as dataset.json writes it)."""
  splits: Dict[str, SplitInfo]
  files: Optional[Tuple[str, ...]] = None
  feature_spec: Optional[Dict[str, Any]] = None

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "TransformInfo":
    files = d.get("files")
    return cls(_splits_from_json(d.get("splits", {})),
               None if files is None else tuple(files),
               d.get("feature_spec"))

  def to_json(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {"splits": _splits_to_json(self.splits)}
    if self.files is not None:
      out["files"] = list(self.files)
    if self.feature_spec is not None:
      out["feature_spec"] = self.feature_spec
    return out


@dataclasses.dataclass(frozen=True)
class Anomaly:
  """One failed check."""
  feature: Optional[str]
  check: str
  observed: Any
  expected: Any
  split: Optional[str] = None

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "Anomaly":
    return cls(d["feature"], d["check"], d["observed"], d["expected"],
               d.get("split"))

  def to_json(self) -> Dict[str, Any]:
    return {"feature": self.feature, "check": self.check, "split": self.split,
            "observed": self.observed, "expected": self.expected}

  def line(self) -> str:
    where = (f"feature {self.feature!r}" if self.feature is not None
             else "dataset")
    split = f" in {self.split}" if self.split else ""
    return (f"{where}: {self.check}{split}: observed {_show(self.observed)}, "
            f"expected {_show(self.expected)}")


def _show(value: Any) -> str:
  if isinstance(value, float):
    return f"{value:.6g}"
  if isinstance(value, int) and not isinstance(value, bool):
    return f"{value:,}"
  return str(value)


@dataclasses.dataclass(frozen=True)
class Anomalies:
  """The schema's expectations checked (beam_tfrecords.inspect.expectations): the
  file that lists them (anomalies.json), the baseline compared with, notes
  on what was not compared, and the anomalies found."""
  file: str
  baseline: Optional[str]
  notes: Tuple[str, ...] = ()
  found: Tuple[Anomaly, ...] = ()

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "Anomalies":
    return cls(d["file"], d.get("baseline"), tuple(d.get("notes", ())),
               tuple(Anomaly.from_json(a) for a in d.get("found", ())))

  def to_json(self) -> Dict[str, Any]:
    return {"file": self.file, "baseline": self.baseline,
            "notes": list(self.notes),
            "found": [a.to_json() for a in self.found]}


# Keys whose values stay JSON objects (their content is the schema's, the
# inputs' or the options' own): typed here as dicts.
_PLAIN = ("schema", "feature_spec", "inputs", "split_rule", "options",
          "vocabularies", "tool", "aligned_lists", "statistics")
_TEXT = ("name", "record", "compression", "statistics_of", "tfmd_schema",
         "build_key", "tfdv_statistics", "report")


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
  """A dataset's dataset.json, typed.

  Attributes:
    name, record: the schema's name and record kind ("example" or
      "sequence_example").
    splits: {split: SplitInfo} of the records written.
    counts: where the input rows went.
    errors: the dead-letter output.
    label: the label feature(s), when the schema names them.
    feature_spec: the parsing spec, as JSON ({feature: {kind, dtype,
      shape}}); `btr.feature_spec(path)` gives TensorFlow's.
    schema: the schema, as a dict (`btr.dataset_schema(path)` parses it).
    statistics: {split: {feature: statistics}}, when computed.
    transform: TensorFlow Transform's part, with `transform:`.
    inputs, options, split_rule, tool, ...: as dataset.json has them.
    extra: keys this version does not know, kept as they are.
  """
  name: str
  record: str
  splits: Dict[str, SplitInfo]
  counts: Counts
  errors: Errors
  schema: Dict[str, Any]
  feature_spec: Dict[str, Any]
  inputs: Dict[str, Any]
  options: Dict[str, Any]
  split_rule: Dict[str, Any]
  tool: Dict[str, Any]
  compression: Optional[str] = None
  vocabularies: Optional[Dict[str, Any]] = None
  statistics_of: Optional[str] = None
  tfmd_schema: Optional[str] = None
  build_key: Optional[str] = None
  statistics: Optional[Dict[str, Any]] = None
  tfdv_statistics: Optional[str] = None
  report: Optional[str] = None
  transform: Optional[TransformInfo] = None
  label: Optional[Tuple[str, ...]] = None
  aligned_lists: Optional[Dict[str, Any]] = None
  # With expect: blocks (beam_tfrecords.inspect.expectations).
  anomalies: Optional[Anomalies] = None
  extra: Dict[str, Any] = dataclasses.field(default_factory=dict)
  # Not in dataset.json: the _SUCCESS text of the publish this was read
  # from (beam_tfrecords.core.generations), when read as a finished dataset.
  generation: Optional[str] = dataclasses.field(default=None, compare=False)

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "DatasetInfo":
    known = {f.name for f in dataclasses.fields(cls)} - {"extra",
                                                          "generation"}
    label = d.get("label")
    return cls(
        splits=_splits_from_json(d["splits"]),
        counts=Counts.from_json(d["counts"]),
        errors=Errors.from_json(d["errors"]),
        transform=(TransformInfo.from_json(d["transform"])
                   if "transform" in d else None),
        label=None if label is None else tuple(label),
        anomalies=(Anomalies.from_json(d["anomalies"])
                   if d.get("anomalies") is not None else None),
        extra={k: v for k, v in d.items() if k not in known},
        **{k: d.get(k) for k in _PLAIN + _TEXT})  # type: ignore[arg-type]

  @classmethod
  def from_directory(cls, path: str) -> "DatasetInfo":
    """The dataset.json of a dataset folder (finished or not: see
    `btr.dataset_info` for a finished one)."""
    with fs.open_read(fs.join(path.rstrip("/"), DATASET_JSON)) as f:
      return cls.from_json(json.loads(f.read().decode("utf-8")))

  def to_json(self) -> Dict[str, Any]:
    """The JSON object of dataset.json."""
    out: Dict[str, Any] = dict(self.extra)
    for key in _PLAIN + _TEXT:
      value = getattr(self, key)
      if value is not None:
        out[key] = value
    out["splits"] = _splits_to_json(self.splits)
    out["counts"] = self.counts.to_json()
    out["errors"] = self.errors.to_json()
    if self.transform is not None:
      out["transform"] = self.transform.to_json()
    if self.label is not None:
      out["label"] = list(self.label)
    if self.anomalies is not None:
      out["anomalies"] = self.anomalies.to_json()
    return out

  def to_text(self) -> str:
    """dataset.json's text, byte for byte as a build writes it."""
    return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"

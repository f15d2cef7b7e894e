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
attributes; `to_json()` gives the JSON object). Its shape is checked
where it is loaded (`from_json`, against the SHAPE table): a hand-edited,
cut or foreign dataset.json is a MalformedFileError naming the file and
the key, before any reader uses it.
"""

import dataclasses
import hashlib
import json
import os
import stat
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import InputError, MalformedFileError
from beam_tfrecords.core.json_shapes import Each, Maybe, OneOf, check, parse
from beam_tfrecords.core.layout import DATASET_JSON, TFDS_FILES

__all__ = ["DatasetInfo", "description_bytes", "SplitInfo", "ShardInfo",
           "IndexInfo", "FileSum", "Counts",
           "Errors",
           "Anomaly", "Anomalies", "InputsInfo", "InputFileInfo",
           "OptionsInfo", "SplitRuleInfo", "ToolInfo", "FeatureStats",
           "Span", "Statistics",
           "ErrorFile", "ErrorReason", "TransformInfo", "listed_files",
           "files_fingerprint"]

# The largest dataset.json read (one of a million shards takes ~300 MB;
# anything larger is not one a build wrote).
_MAX_JSON = 1 << 30


def listed_files(meta: Mapping[str, Any]) -> List[str]:
  """The files a dataset.json says its dataset has (relative paths), from
  the JSON object of any version's dataset.json: what a publish moves and
  verify expects."""
  transform = meta.get("transform", {})
  names = []
  for splits in (meta.get("splits", {}), transform.get("splits", {})):
    for split in splits.values():
      for shard in split.get("shards", []):
        names.append(shard["file"])
        if shard.get("index"):  # the index beside it (core.shard_index)
          names.append(shard["index"]["file"])
  names += [e["file"] for e in meta.get("errors", {}).get("files", [])]
  names += list(transform.get("files", []))
  for key in ("tfmd_schema", "tfdv_statistics", "report"):
    if meta.get(key):
      names.append(meta[key])
  if meta.get("anomalies"):
    names.append(meta["anomalies"]["file"])
  if (meta.get("options") or {}).get("tfds"):
    names += list(TFDS_FILES)
  # With checksums: every other file, and croissant.json.
  names += list(meta.get("checksums") or {})
  if meta.get("croissant"):
    names.append(meta["croissant"])
  return list(dict.fromkeys(names))


@dataclasses.dataclass(frozen=True)
class IndexInfo:
  """A shard's index file (core.shard_index, or DALI's `.idx` beside an
  uncompressed shard): its path relative to the dataset folder, bytes and
  SHA-256 (hex)."""
  file: str
  num_bytes: int
  sha256: str

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "IndexInfo":
    return cls(d["file"], d["bytes"], d["sha256"])

  def to_json(self) -> Dict[str, Any]:
    return {"file": self.file, "bytes": self.num_bytes,
            "sha256": self.sha256}


@dataclasses.dataclass(frozen=True)
class FileSum:
  """A published file's bytes and SHA-256 (hex), taken while it was
  written."""
  num_bytes: int
  sha256: str

  @classmethod
  def of(cls, data: bytes) -> "FileSum":
    return cls(len(data), hashlib.sha256(data).hexdigest())

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "FileSum":
    return cls(d["bytes"], d["sha256"])

  def to_json(self) -> Dict[str, Any]:
    return {"bytes": self.num_bytes, "sha256": self.sha256}


@dataclasses.dataclass(frozen=True)
class ShardInfo:
  """One shard file: its path relative to the dataset folder; `index`:
  the index beside it (None: a dataset written before indexes, or by
  Beam's sink, reads as a stream only); `sha256`: of its bytes (hex; None
  in datasets written before checksums)."""
  file: str
  num_records: int
  num_bytes: int
  index: Optional[IndexInfo] = None
  sha256: Optional[str] = None

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "ShardInfo":
    index = d.get("index")
    return cls(d["file"], d["records"], d["bytes"],
               IndexInfo.from_json(index) if index else None,
               d.get("sha256"))

  def to_json(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {"file": self.file, "records": self.num_records,
                           "bytes": self.num_bytes}
    if self.index is not None:
      out["index"] = self.index.to_json()
    if self.sha256 is not None:
      out["sha256"] = self.sha256
    return out


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
  """One dead-letter file: JSON lines, the input rows they name, and its
  bytes and SHA-256 (None in datasets written before checksums)."""
  file: str
  lines: int
  rows: int
  num_bytes: Optional[int] = None
  sha256: Optional[str] = None

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "ErrorFile":
    return cls(d["file"], d["lines"], d["rows"], d.get("bytes"),
               d.get("sha256"))

  def to_json(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {"file": self.file, "lines": self.lines,
                           "rows": self.rows}
    if self.sha256 is not None:
      out.update(bytes=self.num_bytes, sha256=self.sha256)
    return out


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
    return cls(d["rows"], tuple(ErrorFile.from_json(f) for f in d["files"]),
               tuple(ErrorReason(r["reason"], r["rows"], r.get("example"))
                     for r in d["reasons"]))

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


def _unknown(cls: Any, d: Mapping[str, Any], *known: str) -> Dict[str, Any]:
  """The keys of `d` that `cls` does not type (written by a later
  version): kept in its `extra`, written back as they were."""
  names = {f.name for f in dataclasses.fields(cls)} | set(known)
  return {k: v for k, v in d.items() if k not in names}


def _extra() -> Any:
  return dataclasses.field(default_factory=dict, compare=False)


@dataclasses.dataclass(frozen=True)
class ToolInfo:
  """What wrote the dataset: beam-tfrecords and its version."""
  name: str
  version: str
  extra: Dict[str, Any] = _extra()

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "ToolInfo":
    return cls(d["name"], d["version"], _unknown(cls, d))

  def to_json(self) -> Dict[str, Any]:
    return {**self.extra, "name": self.name, "version": self.version}


@dataclasses.dataclass(frozen=True)
class InputFileInfo:
  """One input file as the build saw it (its size and modification time
  make the input fingerprint), or one image folder (`images`: how many
  images it held; no time)."""
  path: str
  num_bytes: int
  modified: Optional[float] = None
  images: Optional[int] = None
  extra: Dict[str, Any] = _extra()

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "InputFileInfo":
    return cls(d["path"], d["bytes"], d.get("modified"), d.get("images"),
               _unknown(cls, d, "bytes"))

  def to_json(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {**self.extra, "path": self.path,
                           "bytes": self.num_bytes}
    for key in ("modified", "images"):
      if getattr(self, key) is not None:
        out[key] = getattr(self, key)
    return out


def files_fingerprint(files: Iterable[Tuple[str, int, Any]]) -> str:
  """A fingerprint of input files: (path, size, modification time) of
  each, in path order (what the file system reports; the content is not
  read again): dataset.json's inputs.fingerprint, and the build key's."""
  digest = hashlib.blake2b(digest_size=16)
  for path, size, mtime in sorted(files, key=lambda f: f[0]):
    digest.update(f"{path}\0{size}\0{mtime!r}\n".encode("utf-8"))
  return digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class InputsInfo:
  """What the build read: the format, the patterns given, the files they
  matched and their fingerprint (None for a PCollection, whose `source`
  says so)."""
  format: str
  patterns: Tuple[str, ...]
  files: Tuple[InputFileInfo, ...]
  fingerprint: Optional[str]
  source: Optional[str] = None
  extra: Dict[str, Any] = _extra()

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "InputsInfo":
    return cls(d["format"], tuple(d.get("patterns", ())),
               tuple(InputFileInfo.from_json(f) for f in d.get("files", ())),
               d.get("fingerprint"), d.get("source"), _unknown(cls, d))

  def to_json(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {
        **self.extra, "format": self.format, "patterns": list(self.patterns),
        "files": [f.to_json() for f in self.files],
        "fingerprint": self.fingerprint}
    if self.source is not None:
      out["source"] = self.source
    return out


@dataclasses.dataclass(frozen=True)
class OptionsInfo:
  """The build options as they shaped the output (BuildOptions.described
  writes them): shards per split, the sink, the shuffle, compression,
  statistics, the rejection thresholds, the preprocess function's name and
  the input format's options."""
  num_shards: Dict[str, int]
  max_shard_bytes: Dict[str, Optional[int]]
  sink: str
  shuffle_seed: Optional[int] = None
  shuffle_buckets: Optional[Dict[str, int]] = None
  gzip_level: Optional[int] = None
  statistics: bool = True
  max_bad_rows: Optional[int] = None
  max_bad_fraction: Optional[float] = None
  preprocess: Optional[str] = None
  format_options: Dict[str, Any] = dataclasses.field(default_factory=dict)
  # Written only when set, so that other datasets' dataset.json stays as
  # it was.
  tfds: bool = False
  # Framed bytes per gzip member at most (--member-size); only for the
  # deterministic sink's gzip shards.
  member_bytes: Optional[int] = None
  # array-record's writer options (--array-record-options); only for
  # ArrayRecord shards.
  array_record_options: Optional[str] = None
  extra: Dict[str, Any] = _extra()

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "OptionsInfo":
    extra = _unknown(cls, d)
    return cls(**{k: v for k, v in d.items() if k not in extra},
               extra=extra)

  def to_json(self) -> Dict[str, Any]:
    out = {**self.extra, **dataclasses.asdict(self)}
    del out["extra"]
    for key in ("member_bytes", "array_record_options"):
      if out[key] is None:
        del out[key]
    if not out.pop("tfds"):
      return out
    return {**out, "tfds": True}


@dataclasses.dataclass(frozen=True)
class SplitRuleInfo:
  """How rows were assigned to splits: the rule's kind (none, hash,
  values, below), the split names in declared order, and the rule's own
  settings as the schema's `splits:` gives them (`hash`/`weights`,
  `column`/`values`, `column`/`below`/`rest`)."""
  kind: str
  splits: Tuple[str, ...]
  settings: Dict[str, Any] = dataclasses.field(default_factory=dict)

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "SplitRuleInfo":
    return cls(d["kind"], tuple(d["splits"]),
               {k: v for k, v in d.items() if k not in ("kind", "splits")})

  def to_json(self) -> Dict[str, Any]:
    return {"kind": self.kind, "splits": list(self.splits), **self.settings}


@dataclasses.dataclass(frozen=True)
class Span:
  """The least and the most of something per record (values in a list,
  steps in a sequence)."""
  min: int
  max: int


Ranked = Tuple[Tuple[Any, int], ...]  # ((value, count), ...), most first


@dataclasses.dataclass(frozen=True)
class FeatureStats:
  """One feature's statistics in one split, exact, from the build's one
  statistics pass (encoding.stats): what the report, the trend, the
  publish gate and drift read.

  Attributes:
    present, missing: records with and without the feature.
    values: the values in all its records.
    list_length: values per record (list features); steps: steps per
      record (sequence features).
    min, max, mean: over the numbers (None: no number).
    long_values: text values too long to count among the top ones.
    top, top_exact: the most frequent values (text and bytes), and whether
      their counts are exact.
    unexpected, non_finite: values outside an `expect:` section's
      `values:`, and NaN or infinite numbers (expect: sections only).
    frequencies: every value's count, for drift (an expect: section's
      `values:`, or a text feature's when few enough).
    drift_note: why drift cannot be measured for it.
    histogram: the exact fine histogram of its numbers, for drift
      (encoding.histogram's JSON).
  """
  present: int
  missing: int
  values: int
  list_length: Optional[Span] = None
  steps: Optional[Span] = None
  min: Optional[float] = None
  max: Optional[float] = None
  mean: Optional[float] = None
  long_values: Optional[int] = None
  top: Optional[Ranked] = None
  top_exact: Optional[bool] = None
  unexpected: Optional[int] = None
  non_finite: Optional[int] = None
  frequencies: Optional[Ranked] = None
  drift_note: Optional[str] = None
  histogram: Optional[Dict[str, Any]] = None
  extra: Dict[str, Any] = _extra()

  @property
  def records(self) -> int:
    return self.present + self.missing

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "FeatureStats":
    extra = _unknown(cls, d)
    values: Dict[str, Any] = {k: v for k, v in d.items() if k not in extra}
    for key in ("list_length", "steps"):
      if key in values:
        values[key] = Span(values[key]["min"], values[key]["max"])
    for key in ("top", "frequencies"):
      if key in values:
        values[key] = tuple((v, c) for v, c in values[key])
    return cls(**values, extra=extra)

  def to_json(self) -> Dict[str, Any]:
    out: Dict[str, Any] = dict(self.extra)
    for f in dataclasses.fields(self):
      value = getattr(self, f.name)
      if value is None or f.name == "extra":
        continue
      if isinstance(value, Span):
        value = {"min": value.min, "max": value.max}
      elif f.name in ("top", "frequencies"):
        value = [[v, c] for v, c in value]
      out[f.name] = value
    return out


Statistics = Dict[str, Dict[str, FeatureStats]]  # {split: {feature: ...}}


def _statistics_from_json(d: Optional[Mapping[str, Any]]
                          ) -> Optional[Statistics]:
  if d is None:
    return None
  return {split: {name: FeatureStats.from_json(s)
                  for name, s in features.items()}
          for split, features in d.items()}


def _statistics_to_json(statistics: Statistics) -> Dict[str, Any]:
  return {split: {name: s.to_json() for name, s in features.items()}
          for split, features in statistics.items()}


# Keys whose values stay JSON objects, typed here as dicts: the schema and
# the parsing spec as the schema module writes them, {name: [value]} and
# {list path: [feature]} mappings.
_PLAIN = ("schema", "feature_spec", "vocabularies", "aligned_lists")
# Keys typed with their own classes (from_json / to_json).
_TYPED: Dict[str, Any] = {"inputs": InputsInfo, "options": OptionsInfo,
                          "split_rule": SplitRuleInfo, "tool": ToolInfo}
_TEXT = ("name", "record", "compression", "file_format", "statistics_of",
         "tfmd_schema", "build_key", "tfdv_statistics", "report",
         "croissant")

# dataset.json's shape (core.json_shapes): what from_json and the readers
# take from it, any version's. Keys it does not name pass (a later
# version's: kept in `extra`).
_SUM = {"bytes": int, "sha256": str}
_SHARD = {"file": str, "records": int, "bytes": int,
          "index?": {"file": str, "bytes": int, "sha256": str},
          "sha256?": str}
_SPLITS = Each({"records": int, "bytes": int, "shards": [_SHARD]})
# One feature's parsing spec, as schema.spec writes it.
_SPEC = Each({"kind": OneOf(("FixedLenFeature", "VarLenFeature",
                             "FixedLenSequenceFeature", "RaggedFeature")),
              "dtype": OneOf(("int64", "float32", "string")),
              "shape?": [int]})
_SPAN = {"min": int, "max": int}
_RANKED = [(object, int)]  # [[value, count], ...]
_FEATURE_STATS = {
    "present": int, "missing": int, "values": int, "list_length?": _SPAN,
    "steps?": _SPAN, "min?": float, "max?": float, "mean?": float,
    "long_values?": int, "top?": _RANKED, "top_exact?": bool,
    "unexpected?": int, "non_finite?": int, "frequencies?": _RANKED,
    "drift_note?": str, "histogram?": dict}
_COUNT_KEYS = ("rows_read", "rows_written", "rows_rejected", "rows_dropped",
               "records_written")
SHAPE = {
    "name": str, "record": OneOf(("example", "sequence_example")),
    "schema": dict, "feature_spec": dict,
    "splits": _SPLITS,
    "counts": {**{k: int for k in _COUNT_KEYS}, "steps_written?": int,
               "steps_dropped?": int},
    "errors": {"rows": int,
               "files": [{"file": str, "lines": int, "rows": int,
                          "bytes?": int, "sha256?": str}],
               "reasons": [{"reason": str, "rows": int, "example?": dict}]},
    "inputs": {"format": str, "patterns?": [str],
               "files?": [{"path": str, "bytes": int, "modified?": float,
                           "images?": int}],
               "fingerprint?": str, "source?": str},
    "options": {"num_shards": Each(int), "max_shard_bytes": Each(Maybe(int)),
                "sink": str, "shuffle_seed?": int,
                "shuffle_buckets?": Each(int), "gzip_level?": int,
                "statistics?": bool, "max_bad_rows?": int,
                "max_bad_fraction?": float, "preprocess?": str,
                "format_options?": dict, "tfds?": bool, "member_bytes?": int,
                "array_record_options?": str},
    "split_rule": {"kind": str, "splits": [str]},
    "tool": {"name": str, "version": str},
    "transform?": {"splits?": _SPLITS, "files?": [str],
                   "feature_spec?": dict},
    "label?": [str],
    "anomalies?": {"file": str, "baseline?": str, "notes?": [str],
                   "found?": [{"feature": Maybe(str), "check": str,
                               "observed": object, "expected": object,
                               "split?": str}]},
    "statistics?": Each(Each(_FEATURE_STATS)),
    "checksums?": Each(_SUM),
    "vocabularies?": dict, "aligned_lists?": dict,
    **{f"{k}?": str for k in _TEXT if k not in ("name", "record")},
}
# What a MalformedFileError about dataset.json says to do.
_FIX = (" (not a dataset.json a build writes: restore it from a copy, or "
        "build the dataset again)")


def description_bytes(path: str) -> Tuple[str, bytes]:
  """(its path, its bytes): the dataset.json of a dataset folder, read
  with care (a regular file, of a size a build writes).

  Raises:
    InputError: it has no dataset.json.
    MalformedFileError: not a regular file (a FIFO would keep the reader
      forever), or too large to be one a build writes.
  """
  file = fs.join(path.rstrip("/"), DATASET_JSON)
  missing = InputError(f"{path} has no {DATASET_JSON}: not a dataset "
                       "folder (or one whose build never finished)")
  if fs.is_local(file):
    try:
      st = os.stat(file)
    except FileNotFoundError:
      raise missing from None
    if not stat.S_ISREG(st.st_mode):
      raise MalformedFileError(f"{file} is not a regular file (a FIFO, "
                               "a device or a folder): not read", file)
    if st.st_size > _MAX_JSON:
      raise MalformedFileError(f"{file} is {st.st_size:,} bytes: not a "
                               "dataset.json a build writes", file)
  try:
    with fs.open_read(file) as f:
      data = f.read()
  except FileNotFoundError:
    raise missing from None
  return file, data


def _check_shape(d: Any, file: str) -> None:
  """Raises MalformedFileError if `d` is not dataset.json's object, or
  names a file outside its dataset's folder."""
  check(d, SHAPE, file, hint=_FIX)
  spec = (_SPEC if d["record"] == "example" else
          {"context": _SPEC, "sequence": _SPEC})
  check(d["feature_spec"], spec, file, "feature_spec", _FIX)
  for name in listed_files(d):
    if not _inside(name):
      raise MalformedFileError(
          f"{file} names {name!r}, which is not a file inside its dataset's "
          f"folder{_FIX}", file)


def _inside(name: str) -> bool:
  """Whether a name dataset.json lists is a path inside the dataset's
  folder: relative, without a scheme, a backslash or a '..' part."""
  return bool(name) and not name.startswith("/") and "\\" not in name \
      and "://" not in name and ".." not in name.split("/") and \
      not os.path.isabs(name)


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
  """A dataset's dataset.json, typed.

  Attributes:
    name, record: the schema's name and record kind ("example" or
      "sequence_example").
    compression: how the shards are compressed: GZIP or NONE for
      TFRecord shards; for ArrayRecord shards (`file_format`
      "array_record"), how array-record compresses their chunks (ZSTD,
      BROTLI, SNAPPY or NONE).
    file_format: None (TFRecord shards) or "array_record".
    splits: {split: SplitInfo} of the records written.
    counts: where the input rows went.
    errors: the dead-letter output.
    label: the label feature(s), when the schema names them.
    feature_spec: the parsing spec, as JSON ({feature: {kind, dtype,
      shape}}); `btr.feature_spec(path)` gives TensorFlow's.
    schema: the schema, as a dict (`btr.open(path).schema` parses it).
    statistics: {split: {feature: FeatureStats}}, when computed.
    transform: TensorFlow Transform's part, with `transform:`.
    checksums: {path: FileSum} of the published files besides the
      shards, their indexes and errors/ (which carry their own):
      statistics.pb, the report, schema.pbtxt, anomalies.json, the card
      (README.md), the previews, TensorFlow Transform's and TFDS's files.
      None in datasets written before checksums. `file_checksums()`
      gives every file's.
    croissant: croissant.json, the Croissant description (not in
      `checksums`: it holds the build time and dataset.json's own SHA-256,
      so dataset.json stays the same bytes on every run; publish.verify
      checks it against both).
    inputs: what was read (InputsInfo); options: the build options as
      they shaped the output (OptionsInfo); split_rule: how rows went to
      splits (SplitRuleInfo); tool: what wrote it (ToolInfo).
    extra: keys this version does not know, kept as they are.
  """
  name: str
  record: str
  splits: Dict[str, SplitInfo]
  counts: Counts
  errors: Errors
  schema: Dict[str, Any]
  feature_spec: Dict[str, Any]
  inputs: InputsInfo
  options: OptionsInfo
  split_rule: SplitRuleInfo
  tool: ToolInfo
  compression: Optional[str] = None
  # None: TFRecord shards; "array_record" (--file-format array_record):
  # ArrayRecord shards (core.array_record_files). Written only then, so
  # that other datasets' dataset.json stays as it was.
  file_format: Optional[str] = None
  vocabularies: Optional[Dict[str, Any]] = None
  statistics_of: Optional[str] = None
  tfmd_schema: Optional[str] = None
  build_key: Optional[str] = None
  statistics: Optional[Statistics] = None
  tfdv_statistics: Optional[str] = None
  report: Optional[str] = None
  transform: Optional[TransformInfo] = None
  label: Optional[Tuple[str, ...]] = None
  aligned_lists: Optional[Dict[str, Any]] = None
  # With expect: sections (beam_tfrecords.inspect.expectations).
  anomalies: Optional[Anomalies] = None
  checksums: Optional[Dict[str, FileSum]] = None
  croissant: Optional[str] = None
  extra: Dict[str, Any] = dataclasses.field(default_factory=dict)
  # Not in dataset.json: the _SUCCESS text of the publish this was read
  # from (beam_tfrecords.core.generations), when read as a finished dataset.
  generation: Optional[str] = dataclasses.field(default=None, compare=False)

  @classmethod
  def from_json(cls, d: Mapping[str, Any],
                file: str = DATASET_JSON) -> "DatasetInfo":
    """dataset.json's object, typed.

    Raises:
      MalformedFileError: `d` is not of dataset.json's shape (SHAPE); the
        message names `file` and the key.
    """
    _check_shape(d, file)
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
        statistics=_statistics_from_json(d.get("statistics")),
        checksums=({name: FileSum.from_json(f)
                    for name, f in d["checksums"].items()}
                   if d.get("checksums") is not None else None),
        **{k: kind.from_json(d[k]) for k, kind in _TYPED.items()},
        **{k: d.get(k) for k in _PLAIN + _TEXT})  # type: ignore[arg-type]

  @classmethod
  def from_bytes(cls, data: bytes, file: str = DATASET_JSON
                 ) -> "DatasetInfo":
    """dataset.json's bytes, parsed and typed.

    Raises:
      MalformedFileError: not UTF-8, not JSON, or not of dataset.json's
        shape; the message names `file`.
    """
    return cls.from_json(parse(data, file, _FIX), file)

  @classmethod
  def from_directory(cls, path: str) -> "DatasetInfo":
    """The dataset.json of a dataset folder (finished or not: see
    `btr.dataset_info` for a finished one).

    Raises:
      InputError: it has no dataset.json.
      MalformedFileError: its dataset.json is not one a build writes (or
        not a regular file: a FIFO would keep the reader forever).
    """
    file, data = description_bytes(path)
    return cls.from_bytes(data, file)

  def to_json(self) -> Dict[str, Any]:
    """The JSON object of dataset.json."""
    out: Dict[str, Any] = dict(self.extra)
    for key in _PLAIN + _TEXT:
      value = getattr(self, key)
      if value is not None:
        out[key] = value
    for key in _TYPED:
      out[key] = getattr(self, key).to_json()
    if self.statistics is not None:
      out["statistics"] = _statistics_to_json(self.statistics)
    out["splits"] = _splits_to_json(self.splits)
    out["counts"] = self.counts.to_json()
    out["errors"] = self.errors.to_json()
    if self.transform is not None:
      out["transform"] = self.transform.to_json()
    if self.label is not None:
      out["label"] = list(self.label)
    if self.anomalies is not None:
      out["anomalies"] = self.anomalies.to_json()
    if self.checksums is not None:
      out["checksums"] = {name: f.to_json()
                          for name, f in sorted(self.checksums.items())}
    return out

  def declarations(self) -> Dict[str, Dict[str, Any]]:
    """The schema's feature declarations by name, each as a dict (`int64`
    written alone is {"type": "int64"}): an example's features, a
    SequenceExample's context then sequence ones, in the schema's order.
    Features the build makes of a declaration (an image's height, a
    vocabulary's index) have none."""
    out: Dict[str, Dict[str, Any]] = {}
    for section in ("features", "context", "sequence"):
      for name, raw in (self.schema.get(section) or {}).items():
        out[name] = ({"type": raw} if isinstance(raw, str) else
                     dict(raw) if isinstance(raw, dict) else {})
    return out

  def section_of(self, name: str) -> str:
    """The schema section of a SequenceExample's feature, "context" or
    "sequence"; else ""."""
    for section in ("context", "sequence"):
      if name in (self.schema.get(section) or {}):
        return section
    return ""

  def shards(self) -> List[ShardInfo]:
    """Every shard, raw and transformed, in split and file order."""
    out = [s for split in self.splits.values() for s in split.shards]
    if self.transform is not None:
      out += [s for split in self.transform.splits.values()
              for s in split.shards]
    return out

  def file_checksums(self) -> Dict[str, Tuple[Optional[int],
                                              Optional[str]]]:
    """{path: (bytes, SHA-256)} of every published file dataset.json
    lists, but croissant.json: shards, indexes, errors/ and `checksums`
    (None where a dataset written before checksums has none)."""
    out: Dict[str, Tuple[Optional[int], Optional[str]]] = {}
    for shard in self.shards():
      out[shard.file] = (shard.num_bytes, shard.sha256)
      if shard.index is not None:
        out[shard.index.file] = (shard.index.num_bytes, shard.index.sha256)
    for error in self.errors.files:
      out[error.file] = (error.num_bytes, error.sha256)
    for name, f in (self.checksums or {}).items():
      out[name] = (f.num_bytes, f.sha256)
    return out

  def to_text(self) -> str:
    """dataset.json's text, byte for byte as a build writes it."""
    return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"

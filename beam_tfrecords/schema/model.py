"""The schema language as frozen dataclasses.

A `Schema` is built by `beam_tfrecords.schema.loader` (which validates it) and
dumps back to the plain dict it came from with `to_dict()`. Nothing here reads
files or data.
"""

import dataclasses
import enum
from typing import Any, Callable, Dict, Optional, Tuple

from beam_tfrecords.schema.split_rule import DEFAULT_SPLIT, SplitKind, SplitRule
from beam_tfrecords.schema.card_section import Card

__all__ = ["FeatureType", "RecordKind", "Derive", "Overflow", "OnBadStep",
           "Feature", "OrderKey", "SplitKind", "SplitRule", "Schema", "Media",
           "MediaKind", "Transform", "TransformSection", "TRANSFORMS",
           "DEFAULT_MAX_RECORD_BYTES", "DEFAULT_SPLIT",
           "MADE", "made_column", "FeatureExpect", "DatasetExpect",
           "ON_ANOMALY"]

# A record larger than this is not written (the dead-letter output says why).
# Protobuf refuses messages over 2 GiB; TensorFlow readers slow down long
# before that, so the default stays far below.
DEFAULT_MAX_RECORD_BYTES = 256 * 1024 * 1024
# Columns that a Media feature makes (no input has them) start with this.
MADE = "\x00"


@dataclasses.dataclass(frozen=True)
class FeatureExpect:
  """A feature's `expect:` section: what its statistics must show before the
  dataset is published (None: not checked).

  Attributes:
    presence: the least fraction of records that carry the feature.
    min, max: the least / largest number (int64 and float features).
    values: the allowed values (string, bytes or int64 features), and
      max_unexpected, the largest fraction of values outside them.
    length_min, length_max: values per record (list features).
    drift: the largest distance from the baseline's training split:
      L-infinity between value frequencies (text, and int64 features with
      `values`), else Jensen-Shannon divergence (base 2) over the
      statistics' histogram buckets.
  """
  presence: Optional[float] = None
  min: Optional[float] = None
  max: Optional[float] = None
  values: Optional[Tuple[Any, ...]] = None
  max_unexpected: float = 0.0
  length_min: Optional[int] = None
  length_max: Optional[int] = None
  drift: Optional[float] = None

  @property
  def categorical(self) -> bool:
    """Whether drift compares value frequencies (with `values`)."""
    return self.values is not None

  def to_dict(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key in ("presence", "min", "max", "drift"):
      if getattr(self, key) is not None:
        out[key] = getattr(self, key)
    if self.values is not None:
      out["values"] = [v.decode("utf-8", "backslashreplace")
                       if isinstance(v, bytes) else v for v in self.values]
      if self.max_unexpected:
        out["max_unexpected"] = self.max_unexpected
    if self.length_min is not None or self.length_max is not None:
      out["length"] = {k: v for k, v in (("min", self.length_min),
                                         ("max", self.length_max))
                       if v is not None}
    return out


@dataclasses.dataclass(frozen=True)
class DatasetExpect:
  """The schema's top-level `expect:` section.

  Attributes:
    records_min, records_max: records written (all splits).
    records_change: the largest relative change of the records written
      from the baseline's (0.5: half as many or half as many again).
    disjoint_splits: no identical record in two splits.
    disjoint_keys: input columns whose values (together) must not appear
      in two splits.
  """
  records_min: Optional[int] = None
  records_max: Optional[int] = None
  records_change: Optional[float] = None
  disjoint_splits: bool = False
  disjoint_keys: Tuple[str, ...] = ()

  def to_dict(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if self.records_min is not None or self.records_max is not None:
      out["records"] = {k: v for k, v in (("min", self.records_min),
                                          ("max", self.records_max))
                        if v is not None}
    if self.records_change is not None:
      out["records_change"] = self.records_change
    if self.disjoint_splits:
      out["disjoint_splits"] = True
    if self.disjoint_keys:
      out["disjoint_keys"] = list(self.disjoint_keys)
    return out


# What an anomaly does: fail the build (nothing published), or publish
# with the anomalies recorded.
ON_ANOMALY = ("fail", "warn")


def made_column(feature: str, facet: str) -> str:
  """The name of a column that a Media feature computes for a batch:
  its `facet` ("bytes", "height", "width", ...)."""
  return f"{MADE}{feature}{MADE}{facet}"


class FeatureType(enum.Enum):
  """How values are stored in a `tf.train.Feature`."""
  INT64 = "int64"    # int64_list
  FLOAT = "float"    # float_list (float32)
  BYTES = "bytes"    # bytes_list, raw bytes
  STRING = "string"  # bytes_list, UTF-8 text (validated)

  @property
  def proto_kind(self) -> str:
    return {"int64": "int64_list", "float": "float_list"}.get(
        self.value, "bytes_list")


class RecordKind(enum.Enum):
  EXAMPLE = "example"
  SEQUENCE_EXAMPLE = "sequence_example"


class Derive(enum.Enum):
  """Context values a SequenceExample computes instead of reading a column."""
  LENGTH = "length"  # number of steps (of one feature list with `of`)
  FIRST = "first"    # the source column's value at the first step
  LAST = "last"      # ... at the last step
  PART = "part"      # 0-based number of the piece when overflow: split


class Overflow(enum.Enum):
  """What happens to a sequence longer than `max_length` steps."""
  REJECT = "reject"          # all its rows go to the dead-letter output
  KEEP_FIRST = "keep_first"  # keep the first max_length steps
  KEEP_LAST = "keep_last"    # keep the last max_length steps
  SPLIT = "split"            # several sequences of at most max_length steps


class OnBadStep(enum.Enum):
  """What happens to a group (group_by) when one of its rows is rejected."""
  REJECT_GROUP = "reject_group"  # its other rows go to errors/ as well
  DROP_STEP = "drop_step"        # the sequence is written without the row


@dataclasses.dataclass(frozen=True)
class Feature:
  """One feature of a record.

  Attributes:
    name: the feature key in the record.
    type: how values are stored.
    shape: () scalar, (n, ...) fixed, (-1,) variable length.
    source: the input column; defaults to `name`.
    separator: splits a text cell into a list (list features only).
    default: the flat tuple of values that fills a missing value, or None.
    required: a missing value sends the row to the dead-letter output.
    description: free text, kept in dataset.json.
    derive: for SequenceExample context features, a computed value.
    of: the sequence feature whose length `derive: length` counts.
  """
  name: str
  type: FeatureType
  shape: Tuple[int, ...] = ()
  source: Optional[str] = None
  separator: Optional[str] = None
  default: Optional[Tuple[Any, ...]] = None
  required: bool = False
  description: str = ""
  derive: Optional[Derive] = None
  of: Optional[str] = None
  expect: Optional[FeatureExpect] = None

  @property
  def column(self) -> Optional[str]:
    """The column this feature reads (None for computed values); a column
    a Media feature makes starts with MADE."""
    if self.derive in (Derive.LENGTH, Derive.PART):
      return None
    return self.source if self.source is not None else self.name

  @property
  def input_column(self) -> Optional[str]:
    """The input column this feature reads, None if it reads none."""
    column = self.column
    return None if column is None or column.startswith(MADE) else column

  @property
  def is_scalar(self) -> bool:
    return self.shape == ()

  @property
  def is_variable_length(self) -> bool:
    return self.shape == (-1,)

  @property
  def num_values(self) -> Optional[int]:
    """Values per record when fixed (1 for a scalar), else None."""
    if self.is_variable_length:
      return None
    n = 1
    for d in self.shape:
      n *= d
    return n

  @property
  def always_present(self) -> bool:
    """Whether every written record carries this feature."""
    return (self.required or self.default is not None
            or self.derive in (Derive.LENGTH, Derive.PART))

  def to_dict(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {"type": self.type.value}
    if self.shape:
      out["shape"] = list(self.shape)
    if self.source is not None:
      out["source"] = self.source
    if self.separator is not None:
      out["separator"] = self.separator
    if self.default is not None:
      out["default"] = (self.default[0] if self.is_scalar
                        else list(self.default))
      if self.type in (FeatureType.BYTES, FeatureType.STRING):
        out["default"] = _bytes_to_text(out["default"])
    if self.required:
      out["required"] = True
    if self.description:
      out["description"] = self.description
    if self.derive is not None:
      out["derive"] = self.derive.value
    if self.of is not None:
      out["of"] = self.of
    if self.expect is not None:
      out["expect"] = self.expect.to_dict()
    return out


def _bytes_to_text(value: Any) -> Any:
  if isinstance(value, list):
    return [_bytes_to_text(v) for v in value]
  return value.decode("utf-8", "backslashreplace")


class MediaKind(enum.Enum):
  """Declared features that become several stored ones."""
  IMAGE = "image"            # a file's encoded image + height/width/...
  TENSOR = "tensor"          # an array as raw bytes + shape, or a flat list
  VOCABULARY = "vocabulary"  # a string + its index in a vocabulary


@dataclasses.dataclass(frozen=True)
class Media:
  """A declared feature that the build turns into stored features (which
  are in Schema.features, reading MADE columns).

  Attributes:
    name: the declared name.
    kind: what it is.
    sources: the input columns it reads.
    stored: the names of the stored features it makes.
    options: its validated settings (see beam_tfrecords.encoding.media).
    declared: the declaration as written (to_dict gives it back).
  """
  name: str
  kind: MediaKind
  sources: Tuple[str, ...]
  stored: Tuple[str, ...]
  options: Any = dataclasses.field(default=None, hash=False)
  declared: Any = dataclasses.field(default=None, hash=False)


# Image settings (encoding.images): resize filters, conversions, encodings.
IMAGE_METHODS = ("nearest", "bilinear", "bicubic", "lanczos", "box",
                 "hamming")
IMAGE_CONVERTS = ("rgb", "grayscale")
IMAGE_ENCODES = ("png", "jpeg", "raw")

# TensorFlow Transform analyzers a `transform:` section can use: name ->
# (the stored types it takes, its parameters).
TRANSFORMS = {
    "scale_to_z_score": (("int64", "float"), ()),
    "scale_to_0_1": (("int64", "float"), ()),
    "compute_and_apply_vocabulary": (
        ("string", "bytes", "int64"),
        ("top_k", "frequency_threshold", "num_oov_buckets")),
    "bucketize": (("int64", "float"), ("num_buckets",)),
    "hash_strings": (("string", "bytes"), ("hash_buckets",)),
    "pass": (("int64", "float", "string", "bytes"), ()),
}


@dataclasses.dataclass(frozen=True)
class Transform:
  """One transformed feature: `op` (a TRANSFORMS name) applied to the
  stored feature `source`, with its parameters."""
  name: str
  op: str
  source: str
  params: Tuple[Tuple[str, Any], ...] = ()

  def to_dict(self) -> Dict[str, Any]:
    return {self.op: self.source, **dict(self.params)}


@dataclasses.dataclass(frozen=True)
class TransformSection:
  """The schema's `transform:` section: TensorFlow Transform features,
  analyzed on the training split (`analyze_split`) and applied to every
  split; `keep_raw` also writes the untransformed records.

  Attributes:
    features: the declared analyzers (may be empty with a
      preprocessing_fn).
    preprocessing_fn: the user's TFT preprocessing_fn as
      "module:function" (its name when given as a function).
    fn: that function, once resolved on the launcher (not in to_dict).
  """
  features: Tuple[Transform, ...]
  keep_raw: bool = True
  analyze_split: str = DEFAULT_SPLIT
  preprocessing_fn: Optional[str] = None
  fn: Optional[Callable[..., Any]] = dataclasses.field(
      default=None, compare=False, repr=False)

  def __getstate__(self) -> Dict[str, Any]:
    # A schema travels to many steps; the function only to TFT's own
    # (which pickles it itself), so no other step needs its module.
    return dict(self.__dict__, fn=None)

  def __setstate__(self, state: Dict[str, Any]) -> None:
    for key, value in state.items():
      object.__setattr__(self, key, value)

  def to_dict(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if self.features:
      out["features"] = {t.name: t.to_dict() for t in self.features}
    if self.preprocessing_fn is not None:
      out["preprocessing_fn"] = self.preprocessing_fn
    if not self.keep_raw:
      out["keep_raw"] = False
    if self.analyze_split != DEFAULT_SPLIT:
      out["analyze_split"] = self.analyze_split
    return out


@dataclasses.dataclass(frozen=True)
class OrderKey:
  """One `order_by` column: its stored type and direction."""
  column: str
  type: FeatureType
  descending: bool = False

  def to_dict(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {"column": self.column, "type": self.type.value}
    if self.descending:
      out["descending"] = True
    return out


@dataclasses.dataclass(frozen=True)
class Schema:
  """One dataset: its name, record kind and features (sorted by name).

  An `example` schema has `features`. A `sequence_example` schema has
  `context` and `sequence` features instead, and optionally `group_by` key
  columns (rows sharing a key become one sequence, steps in `order_by`
  order; `on_bad_step` says whether a rejected row rejects its group);
  without `group_by` each row is one sequence whose sequence cells hold
  lists of steps.
  """
  name: str
  record: RecordKind
  features: Tuple[Feature, ...] = ()
  description: str = ""
  path: str = dataclasses.field(default="<dict>", compare=False)
  context: Tuple[Feature, ...] = ()
  sequence: Tuple[Feature, ...] = ()
  group_by: Tuple[Tuple[str, FeatureType], ...] = ()
  order_by: Tuple[OrderKey, ...] = ()
  max_length: Optional[int] = None
  overflow: Overflow = Overflow.REJECT
  on_bad_step: OnBadStep = OnBadStep.REJECT_GROUP
  ragged: bool = False
  max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
  max_bad_rows: Optional[int] = None
  max_bad_fraction: Optional[float] = None
  splits: SplitRule = SplitRule()
  media: Tuple[Media, ...] = ()
  transform: Optional[TransformSection] = None
  # The label feature(s), for supervised readers (load(as_supervised=True)).
  label: Tuple[str, ...] = ()
  # Checks before publishing (expectations.py): the top-level `expect:`,
  # the dataset to compare with, and what an anomaly does.
  expect: Optional[DatasetExpect] = None
  baseline: Optional[str] = None
  on_anomaly: Optional[str] = None
  # What the dataset's card and croissant.json say of it (schema.card_section).
  card: Optional[Card] = None

  @property
  def expects(self) -> bool:
    """Whether anything is to be checked before publishing."""
    return self.expect is not None or any(
        f.expect is not None for f in self.all_features)

  @property
  def is_sequence(self) -> bool:
    return self.record is RecordKind.SEQUENCE_EXAMPLE

  @property
  def all_features(self) -> Tuple[Feature, ...]:
    return self.features + self.context + self.sequence

  def feature(self, name: str) -> Feature:
    for f in self.all_features:
      if f.name == name:
        return f
    raise KeyError(name)

  @property
  def columns(self) -> Tuple[str, ...]:
    """The input columns read, without repeats."""
    names = [f.input_column for f in self.all_features
             if f.input_column is not None]
    names += [c for m in self.media for c in m.sources]
    names += [c for c, _ in self.group_by] + [k.column for k in self.order_by]
    names += list(self.splits.columns)
    if self.expect is not None:
      names += list(self.expect.disjoint_keys)
    return tuple(dict.fromkeys(names))

  def to_dict(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {"name": self.name, "record": self.record.value}
    if self.description:
      out["description"] = self.description
    if self.max_bad_rows is not None:
      out["max_bad_rows"] = self.max_bad_rows
    if self.max_bad_fraction is not None:
      out["max_bad_fraction"] = self.max_bad_fraction
    if self.splits.kind is not SplitKind.NONE:
      out["splits"] = self.splits.to_dict()
    if self.label:
      out["label"] = self.label[0] if len(self.label) == 1 else list(
          self.label)
    # Only when set: other schemas' dicts (and build keys) stay as they were.
    if self.expect is not None:
      out["expect"] = self.expect.to_dict()
    if self.baseline is not None:
      out["baseline"] = self.baseline
    if self.on_anomaly is not None:
      out["on_anomaly"] = self.on_anomaly
    if self.card is not None:
      out["card"] = self.card.to_dict()
    if not self.is_sequence:
      made = {n for m in self.media for n in m.stored}
      out["features"] = {f.name: f.to_dict() for f in self.features
                         if f.name not in made}
      out["features"].update((m.name, m.declared) for m in self.media)
      if self.transform is not None:
        out["transform"] = self.transform.to_dict()
      return out
    if self.group_by:
      out["group_by"] = [{"column": c, "type": t.value}
                         for c, t in self.group_by]
    if self.order_by:
      out["order_by"] = [k.to_dict() for k in self.order_by]
    if self.max_length is not None:
      out["max_length"] = self.max_length
      out["overflow"] = self.overflow.value
    # Only when set, so that the dicts (and build keys) of schemas that do
    # not use it stay as they were.
    if self.on_bad_step is not OnBadStep.REJECT_GROUP:
      out["on_bad_step"] = self.on_bad_step.value
    if self.ragged:
      out["ragged"] = True
    if self.max_record_bytes != DEFAULT_MAX_RECORD_BYTES:
      out["max_record_bytes"] = self.max_record_bytes
    out["context"] = {f.name: f.to_dict() for f in self.context}
    out["sequence"] = {f.name: f.to_dict() for f in self.sequence}
    if self.transform is not None:
      out["transform"] = self.transform.to_dict()
    return out

"""The schema language as frozen dataclasses.

A `Schema` is built by `beam_tfrecords.schema.loader` (which validates it) and
dumps back to the plain dict it came from with `to_dict()`. Nothing here reads
files or data.
"""

import dataclasses
import enum
from typing import Any, Optional, Tuple

__all__ = ["FeatureType", "RecordKind", "Feature", "Schema"]


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
  """
  name: str
  type: FeatureType
  shape: Tuple[int, ...] = ()
  source: Optional[str] = None
  separator: Optional[str] = None
  default: Optional[Tuple[Any, ...]] = None
  required: bool = False
  description: str = ""

  @property
  def column(self) -> str:
    """The input column this feature reads."""
    return self.source if self.source is not None else self.name

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
    return self.required or self.default is not None

  def to_dict(self) -> dict:
    out = {"type": self.type.value}
    if self.shape:
      out["shape"] = list(self.shape)
    if self.source is not None:
      out["source"] = self.source
    if self.separator is not None:
      out["separator"] = self.separator
    if self.default is not None:
      out["default"] = (self.default[0] if self.is_scalar
                        else list(self.default))
      if self.type is FeatureType.BYTES:
        out["default"] = _bytes_to_text(out["default"])
    if self.required:
      out["required"] = True
    if self.description:
      out["description"] = self.description
    return out


def _bytes_to_text(value):
  if isinstance(value, list):
    return [_bytes_to_text(v) for v in value]
  return value.decode("utf-8", "backslashreplace")


@dataclasses.dataclass(frozen=True)
class Schema:
  """One dataset: its name, record kind and features (sorted by name)."""
  name: str
  record: RecordKind
  features: Tuple[Feature, ...]
  description: str = ""
  path: str = dataclasses.field(default="<dict>", compare=False)

  def feature(self, name: str) -> Feature:
    for f in self.features:
      if f.name == name:
        return f
    raise KeyError(name)

  @property
  def columns(self) -> Tuple[str, ...]:
    """The input columns read, in feature order, without repeats."""
    return tuple(dict.fromkeys(f.column for f in self.features))

  def to_dict(self) -> dict:
    out = {"name": self.name, "record": self.record.value}
    if self.description:
      out["description"] = self.description
    out["features"] = {f.name: f.to_dict() for f in self.features}
    return out

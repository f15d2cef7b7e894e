"""The `splits:` rule of a schema, as a frozen dataclass.

Which split each row goes to (see beam_tfrecords.encoding.splitting); the checks of the
section are in beam_tfrecords.schema.splits.
"""

import dataclasses
import enum
from typing import Any, Dict, Iterable, Optional, Tuple

__all__ = ["DEFAULT_SPLIT", "SplitKind", "SplitRule", "training_split"]

# The one split of a schema without `splits:`.
DEFAULT_SPLIT = "train"


def training_split(names: Iterable[str]) -> Optional[str]:
  """The split that stands for training among these (drift and the
  report's baseline comparison): train, else the first by name."""
  names = list(names)
  if DEFAULT_SPLIT in names:
    return DEFAULT_SPLIT
  return min(names) if names else None


class SplitKind(enum.Enum):
  """How rows are assigned to splits (see beam_tfrecords.encoding.splitting)."""
  NONE = "none"      # one split, "train"
  HASH = "hash"      # a stable hash of key columns, with weights
  VALUES = "values"  # a column's value names the split
  BELOW = "below"    # a column's value against ordered bounds


@dataclasses.dataclass(frozen=True)
class SplitRule:
  """The schema's `splits:` section.

  Attributes:
    kind: the rule.
    names: the split names, in the order declared.
    columns: HASH: the key columns; VALUES / BELOW: the one column read.
    weights: HASH: one weight per name (percent or bucket count).
    values: VALUES: (column value, split name) pairs.
    bounds: BELOW: one bound per name except `rest` (numbers or text).
    rest: BELOW: the split of rows not below any bound (None: an error).
  """
  kind: SplitKind = SplitKind.NONE
  names: Tuple[str, ...] = (DEFAULT_SPLIT,)
  columns: Tuple[str, ...] = ()
  weights: Tuple[float, ...] = ()
  values: Tuple[Tuple[bytes, str], ...] = ()
  bounds: Tuple[Any, ...] = ()
  rest: Optional[str] = None

  def to_dict(self) -> Dict[str, Any]:
    if self.kind is SplitKind.NONE:
      return {}
    # Ordered mappings as lists of one-key mappings: JSON with sorted keys
    # (dataset.json) keeps their order.
    if self.kind is SplitKind.HASH:
      return {"hash": list(self.columns),
              "weights": [{n: w} for n, w in zip(self.names, self.weights)]}
    if self.kind is SplitKind.VALUES:
      return {"column": self.columns[0],
              "values": [{split: [v.decode("utf-8") for v, s in self.values
                                  if s == split]} for split in self.names]}
    out: Dict[str, Any] = {
        "column": self.columns[0],
        "below": [{n: b} for n, b in zip(self.names, self.bounds)]}
    if self.rest is not None:
      out["rest"] = self.rest
    return out

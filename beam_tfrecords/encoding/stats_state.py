"""The statistics' merge state as JSON: what `encoding.stats` merges,
before `finish` rounds it into what dataset.json shows. A build writes
it (core.layout.STATS_STATE_FILE) so that a later `--append` merges the
new rows' statistics into the old ones exactly, without reading the old
shards again.

    text = state_json({"train": {"rating": stats}})
    splits = from_state_json(text)      # the same dicts, value for value

Plain JSON, no pickle: a dataset folder someone hands over is read, not
run. Integers of the exact sums are hex text (their decimal text would
pass Python's 4,300-digit limit); floats are JSON numbers (Python writes
the shortest text that reads back as the same float); a top value or an
expected value is tagged with its type (text, bytes as base64, integer,
float), since JSON keys are text, and listed in value order (a merge's
dict order is the order values came in: not part of the state). A text
feature with more than TOP_KEPT distinct values (`top_exact: false`)
keeps only the TOP_SHOWN values the published statistics show: the set
of 1,000 kept before depends on how the partials were grouped, so it
differs from runner to runner, and the file is the same bytes on every
runner, as every published file is.
"""

import base64
import json
from typing import Any, Dict

import numpy as np

from beam_tfrecords.core.errors import MalformedFileError
from beam_tfrecords.encoding.histogram import Histogram
from beam_tfrecords.encoding.stats import TOP_SHOWN, plain

__all__ = ["state_json", "from_state_json", "STATE_VERSION"]

STATE_VERSION = 1
_HISTOGRAMS = ("hist", "len_hist", "steps_hist")
_BIG = ("sum", "sumsq")
_VALUED = ("top", "expected_counts")


def _value(v: Any) -> list:
  if isinstance(v, bytes):
    return ["b", base64.b64encode(v).decode("ascii")]
  if isinstance(v, bool) or not isinstance(v, (str, int, float)):
    raise TypeError(f"a value of type {type(v).__name__} in statistics")
  return [{str: "s", int: "i", float: "f"}[type(v)], v]


def _unvalue(tagged: list) -> Any:
  kind, v = tagged
  if kind == "b":
    return base64.b64decode(v)
  if kind == "f":
    return float(v)
  if kind == "i":
    return int(v)
  return str(v)


def _histogram(h: Histogram) -> dict:
  return {"level": h.level, "keys": h.keys.tolist(),
          "counts": h.counts.tolist(),
          "ranges": [None if r is None else list(r) for r in h.ranges]}


def _unhistogram(d: dict) -> Histogram:
  ranges = tuple(None if r is None else (int(r[0]), int(r[1]))
                 for r in d["ranges"])
  return Histogram(int(d["level"]), np.array(d["keys"], dtype=np.int64),
                   np.array(d["counts"], dtype=np.int64),
                   (ranges[0], ranges[1]))


def _feature(stats: Dict[str, Any]) -> Dict[str, Any]:
  out: Dict[str, Any] = {}
  for k, v in plain(stats).items():
    if k in _HISTOGRAMS:
      out[k] = None if v is None else _histogram(v)
    elif k in _BIG:
      out[k] = hex(v)
    elif k in _VALUED:
      if k == "top" and not stats.get("top_exact", True):
        # Past TOP_KEPT distinct values the kept set depends on how the
        # partials were grouped (another runner, other workers): only
        # the values the published statistics show are kept, which do
        # not.
        v = dict(sorted(v.items(), key=lambda kv: (-kv[1], kv[0]))
                 [:TOP_SHOWN])
      # Sorted by value (within a type): the same text whatever order
      # the merges added them in.
      out[k] = sorted([_value(value), count] for value, count in v.items())
    else:
      out[k] = v
  return out


def _unfeature(d: Dict[str, Any]) -> Dict[str, Any]:
  out: Dict[str, Any] = {}
  for k, v in d.items():
    if k in _HISTOGRAMS:
      out[k] = None if v is None else _unhistogram(v)
    elif k in _BIG:
      out[k] = int(v, 16)
    elif k in _VALUED:
      out[k] = {_unvalue(value): int(count) for value, count in v}
    else:
      out[k] = v
  return out


def state_json(splits: Dict[str, Dict[str, dict]]) -> str:
  """{split: {feature: merge state}} as JSON text (sorted: the same bytes
  for the same state)."""
  return json.dumps({"version": STATE_VERSION, "splits": {
      split: {name: _feature(s) for name, s in features.items()}
      for split, features in splits.items()}},
                    sort_keys=True, separators=(",", ":")) + "\n"


def from_state_json(text: str, path: str = "statistics state"
                    ) -> Dict[str, Dict[str, dict]]:
  """What `state_json` wrote; MalformedFileError naming `path` if it is
  not such a file."""
  try:
    data = json.loads(text)
    if data.get("version") != STATE_VERSION:
      raise ValueError(f"version {data.get('version')!r}, not "
                       f"{STATE_VERSION}")
    return {split: {name: _unfeature(s) for name, s in features.items()}
            for split, features in data["splits"].items()}
  except (ValueError, KeyError, TypeError, AttributeError,
          IndexError) as e:
    raise MalformedFileError(
        f"{path}: not a statistics state this version writes ({e}); "
        "build the dataset again without --append", file=path) from e

"""What `beam-tfrecords view` shows of a dataset, without the web page:
its records by number, each feature by its kind, filters over the
values, the statistics' histograms, and the rejected rows by reason.

    viewer = Viewer("out/detections")
    viewer.splits()                        # [("train", 24)]
    viewer.shown("train", 3)               # the page's view of record 3
    viewer.media("train", 3, "image")      # (the image's bytes, mimetype)
    viewer.scan("train", Filter("label", "eq", value="circle"))

Records are read by number through the shards' indexes
(read.random_access: only the gzip member that holds one is inflated, and
every byte read is checked) and decoded as `btr.iter_records` decodes
them, so a record shows what training reads. Nothing here loads a split:
a filter reads SCAN_BATCH records at a time, stops after `budget` seconds or
when it found what a page shows, and says where it stopped; the page
goes on from there. The dataset is read as it was when the viewer
opened it: a build that replaces it since is refused while its files
are read (DatasetReplacedError), never mixed in.
"""

import dataclasses
import io
import math
import random
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow.compute as pc

from beam_tfrecords.core.errors import InputError, reason_category
from beam_tfrecords.core.generations import generation, replaced_error
from beam_tfrecords.core.tfrecord_files import (decode_example,
                                                decode_sequence_example)
from beam_tfrecords.read.gc_pause import paused_gc
from beam_tfrecords.read.dataset_reader import DatasetReader
from beam_tfrecords.read.reader import dataset_statistics, plain_records
from beam_tfrecords.read.wire_columns import native_decode
from beam_tfrecords.schema import Feature, FeatureType
from beam_tfrecords.schema.model import MediaKind

__all__ = ["Filter", "NotFound", "Scan", "Shown", "Viewer", "OPS"]

SCAN_BATCH = 2048  # records read and decoded at a time by a filter, at most
SCAN_BYTES = 32 << 20  # ... and about this many bytes of records
CACHE_BYTES = 64 << 20  # inflated gzip members kept per split
TRANSFORMED = "+transformed"  # a transformed split's name: train+transformed
SHOWN_VALUES = 64  # values of a list shown on a record's page
SHOWN_STEPS = 1000  # steps of a SequenceExample shown on its page
ROWS_PER_REASON = 20  # rejected rows shown under each reason
ERRORS_READ = 20_000  # rejected rows read for the page, at most

# Filters: equals (a list: any of its values), a range [lo, hi) (lo
# left out with `lo_open`, hi taken in with `hi_closed`; a list: any
# value), missing (absent or empty), contains (text or bytes: a
# substring; a list: a value).
OPS = ("eq", "range", "missing", "contains")

# Encoded images a browser shows, by their first bytes.
_IMAGE_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"),
                (b"\xff\xd8\xff", "image/jpeg"),
                (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"),
                (b"BM", "image/bmp"))


class NotFound(InputError):
  """A split, record or feature the dataset does not have."""


@dataclasses.dataclass
class Shown:
  """One feature of one record as the page shows it.

  kind: "scalar", "list", "image", "tensor" or "missing". `values`: a
  scalar's value, or a list's first SHOWN_VALUES values (`length`: all
  of them); an image: its shape (height, width, channels) and format in
  `note`; a tensor: its shape and a summary in `note`.
  """
  name: str
  kind: str
  value: Any = None
  length: Optional[int] = None
  note: str = ""


@dataclasses.dataclass
class Filter:
  """Records whose `feature` matches: see OPS. Values are parsed as the
  feature's type (int64, float; text and bytes as text)."""
  feature: str
  op: str
  value: str = ""
  lo: str = ""
  hi: str = ""
  lo_open: bool = False
  hi_closed: bool = False


@dataclasses.dataclass
class Scan:
  """What a filter found from `start` on: record numbers and their
  records; `stop`: where it stopped (the next record to read; `total`:
  the split's records, read to the end), `seconds` it took."""
  matches: List[Tuple[int, Dict[str, Any]]]
  start: int
  stop: int
  total: int
  seconds: float

  @property
  def done(self) -> bool:
    return self.stop >= self.total


class Viewer:
  """A finished dataset, read by record number for the page."""

  def __init__(self, path: str):
    self.path = path
    self.reader = DatasetReader(path)
    self.schema = self.reader.schema
    self._indexes: Dict[str, Any] = {}
    self._lock = threading.Lock()
    self._images = {m.name: m for m in self.schema.media
                    if m.kind is MediaKind.IMAGE}
    self._tensors = {m.name: m for m in self.schema.media
                     if m.kind is MediaKind.TENSOR}
    made = {n for m in self.schema.media
            if m.kind in (MediaKind.IMAGE, MediaKind.TENSOR)
            for n in m.stored}
    self._features = self.schema.context if self.schema.is_sequence \
        else self.schema.features
    # The features a record's page lists: stored ones, an image or a
    # tensor once (as its declared name).
    self.listed: List[str] = sorted(
        [f.name for f in self._features if f.name not in made]
        + list(self._images) + list(self._tensors))

  # -- what there is ----------------------------------------------------

  def splits(self) -> List[Tuple[str, int]]:
    """(name, records) of each split; a `transform:` section's splits
    as "<split>+transformed"."""
    info = self.reader.info
    out = [(s, self.reader.num_records(s)) for s in self.reader.splits]
    if info.transform is not None:
      out += [(s + TRANSFORMED, split.num_records)
              for s, split in sorted(info.transform.splits.items())]
    return out

  def count(self, split: str) -> int:
    counts = dict(self.splits())
    if split not in counts:
      raise NotFound(f"{self.path} has no split {split!r} (its splits: "
                     f"{', '.join(counts)})")
    return counts[split]

  def feature(self, name: str) -> Feature:
    """A stored feature (of the context, for SequenceExamples) or a
    feature list."""
    for f in list(self._features) + list(self.schema.sequence):
      if f.name == name:
        return f
    raise NotFound(f"{self.path} has no feature {name!r}")

  def _type(self, name: str) -> Optional[FeatureType]:
    try:
      return self.feature(name).type
    except NotFound:
      return None

  def _list(self, name: str) -> bool:
    """Whether a feature may hold several values in a record (a list, or
    a feature list's steps): its statistics count values, not records."""
    try:
      f = self.feature(name)
    except NotFound:
      return False
    return not f.is_scalar or f in self.schema.sequence

  @property
  def step_features(self) -> List[str]:
    return sorted(f.name for f in self.schema.sequence)

  # -- records ----------------------------------------------------------

  def _index(self, split: str) -> Any:
    """The split's RecordIndex: every member read is checked (its CRC,
    size and records), not each whole shard's SHA-256, which would read
    a whole shard to show one record of it (`btr.verify` checks those)."""
    self.count(split)
    with self._lock:
      if split not in self._indexes:
        name, transformed = _split(split)
        # (the window the viewer opened: a build published since is
        # refused, never read)
        self._indexes[split] = self.reader.by_number(
            name, transformed, check=False, cache_bytes=CACHE_BYTES)
      return self._indexes[split]

  def _unchanged(self) -> None:
    """Raises DatasetReplacedError if the dataset is not the build the
    viewer opened (for files read whole: statistics, rejected rows)."""
    if generation(self.path) != self.reader.info.generation:
      raise replaced_error(self.path)

  def records(self, split: str, numbers: Sequence[int]
              ) -> List[Dict[str, Any]]:
    """Records by number, as btr.iter_records gives them."""
    total = self.count(split)
    for n in numbers:
      if not 0 <= n < total:
        raise NotFound(f"{split} has {total:,} records (0 to "
                       f"{total - 1:,}): there is no record {n:,}")
    return self._decoded(split, self._raw(split, numbers))

  def _raw(self, split: str, numbers: Sequence[int]) -> List[bytes]:
    index = self._index(split)
    with self._lock:  # (one reader of the index at a time)
      return index.get(list(numbers))

  def _decoded(self, split: str, raw: List[bytes]) -> List[Dict[str, Any]]:
    if not raw:
      return []
    if _split(split)[1]:  # TFT's records: no schema of ours, as stored
      with paused_gc():  # (a dict per record: see read.gc_pause)
        return [_transformed(r, self.schema.is_sequence) for r in raw]
    # (text that is not UTF-8 shown with its bytes escaped, not refused)
    return plain_records(raw, self.schema, errors="backslashreplace")

  def record(self, split: str, n: int) -> Dict[str, Any]:
    return self.records(split, [n])[0]

  def random(self, split: str) -> int:
    total = self.count(split)
    if not total:
      raise NotFound(f"{split} has no records")
    return random.randrange(total)

  def shown(self, split: str, n: int) -> Dict[str, Any]:
    """Record n for the page: {"features": [Shown] (an Example's, or a
    SequenceExample's context), "steps": (feature list names, rows of
    values per step (the first SHOWN_STEPS), steps) or None}."""
    record = self.record(split, n)
    values = record["context"] if self.schema.is_sequence else record
    names = sorted(values) if _split(split)[1] else self.listed
    out = [self._shown(name, values) for name in names]
    steps = None
    if self.schema.is_sequence:
      lists = record["feature_lists"]
      names = sorted(lists) if _split(split)[1] else self.step_features
      longest = max((len(lists.get(k) or []) for k in names), default=0)
      steps = (names, [[_cell(lists.get(k), i) for k in names]
                       for i in range(min(longest, SHOWN_STEPS))],
               longest)
    return {"features": out, "steps": steps}

  def _shown(self, name: str, values: Dict[str, Any]) -> Shown:
    if name in self._images:
      stored = self._images[name].stored
      data = values.get(stored[0])
      if data is None:
        return Shown(name, "missing")
      height, width, channels, form = (values.get(s) for s in stored[1:5])
      return Shown(name, "image", (height, width, channels),
                   note=f"{form} {height}x{width}x{channels}, "
                   f"{len(data):,} bytes")
    if name in self._tensors:
      return self._tensor(name, values)
    value = values.get(name)
    if value is None:
      return Shown(name, "missing")
    if isinstance(value, list):
      return Shown(name, "list", [_text(v) for v in value[:SHOWN_VALUES]],
                   len(value))
    return Shown(name, "scalar", _text(value))

  def _tensor(self, name: str, values: Dict[str, Any]) -> Shown:
    media = self._tensors[name]
    options = media.options if isinstance(media.options, dict) else {}
    data = values.get(media.stored[0])
    if data is None:
      return Shown(name, "missing")
    shape = values.get(media.stored[1]) if len(media.stored) > 1 else None
    if shape is None:
      shape = options.get("shape")
    dtype = options.get("dtype")
    array = _tensor_array(data, dtype)
    note = f"shape {list(shape) if shape is not None else '?'}, {dtype}"
    if array is not None and array.size:
      first = ", ".join(f"{v:g}" for v in array[:8].tolist())
      note += (f", min {array.min():g}, max {array.max():g}, mean "
               f"{float(array.mean()):g}; values {first}"
               + (", …" if array.size > 8 else ""))
    return Shown(name, "tensor", None, None, note)

  def media(self, split: str, n: int, name: str) -> Tuple[bytes, str]:
    """An image's bytes and mimetype: as stored where a browser shows
    them (PNG, JPEG, GIF, BMP), else (raw pixels, other formats) as a
    PNG made from them."""
    if name not in self._images:
      raise NotFound(f"{self.path} has no image feature {name!r}")
    record = self.record(split, n)
    values = record["context"] if self.schema.is_sequence else record
    stored = self._images[name].stored
    data = values.get(stored[0])
    if data is None:
      raise NotFound(f"record {n:,} of {split} has no {name}")
    if values.get(stored[4]) == "raw":  # decoded pixels: as a PNG
      return _png(data, *(values.get(s) for s in stored[1:4])), "image/png"
    for magic, kind in _IMAGE_MAGIC:
      if data.startswith(magic):
        return data, kind
    raise NotFound(f"record {n:,} of {split}: {name} is in a format a "
                   "browser does not show (not PNG, JPEG, GIF or BMP)")

  # -- filters ----------------------------------------------------------

  def scan(self, split: str, flt: Filter, start: int = 0, want: int = 50,
           budget: float = 2.0) -> Scan:
    """The records from `start` on that match, until `want` are found,
    the split ends or `budget` seconds passed (then `stop` says where to
    go on)."""
    test = self._test(flt, split)
    total = self.count(split)
    began = time.perf_counter()
    found: List[Tuple[int, Dict[str, Any]]] = []
    at = max(0, start)
    size = SCAN_BATCH
    while at < total and len(found) < want:
      numbers = range(at, min(at + size, total))
      raw = self._raw(split, numbers)
      # (fewer records at a time where they are large: images)
      size = max(16, min(SCAN_BATCH, size * SCAN_BYTES // max(
          1, sum(map(len, raw)))))
      hits = self._hits(flt, raw, split)
      if hits is None:  # a record at a time
        records = self._decoded(split, raw)
        hits = [i for i, r in enumerate(records) if test(r)]
      else:
        records = None
      hits = hits[:want - len(found)]
      if records is None:
        kept = self._decoded(split, [raw[i] for i in hits])
      else:
        kept = [records[i] for i in hits]
      found += [(numbers[i], r) for i, r in zip(hits, kept)]
      at = numbers[hits[-1]] + 1 if len(found) == want else numbers.stop
      if time.perf_counter() - began > budget:
        break
    return Scan(found, max(0, start), min(at, total), total,
                time.perf_counter() - began)

  def _hits(self, flt: Filter, raw: List[bytes], split: str
            ) -> Optional[List[int]]:
    """Which of the serialized records match, found column by column
    from the native core's columns (the same answer as a record at a
    time: test_view checks both); None where that cannot be (no core,
    SequenceExamples, transformed splits, bytes features)."""
    f = self.feature(flt.feature)
    if self.schema.is_sequence or _split(split)[1] or \
        f.type is FeatureType.BYTES:
      return None
    flat = native_decode(raw, self.schema)
    if flat is None:
      return None
    values, lengths, _ = flat[f.name]
    if flt.op == "missing":
      return np.flatnonzero(lengths == 0).tolist()
    if f.type is FeatureType.STRING:
      if flt.op not in ("eq", "contains"):
        return None
      match = pc.equal(values.array, flt.value) if flt.op == "eq" else \
          pc.match_substring(values.array, flt.value)
      mask = np.asarray(match.to_numpy(zero_copy_only=False), bool)
    else:
      # (float32 compared as the float64 a record's value reads as)
      numbers = values.astype(np.float64) if f.type is FeatureType.FLOAT \
          else values
      try:
        if flt.op in ("eq", "contains"):
          mask = numbers == _parse(f, flt.value, "value")
        else:
          lo = _number(flt.lo, "lo") if flt.lo != "" else -math.inf
          hi = _number(flt.hi, "hi") if flt.hi != "" else math.inf
          mask = ((numbers > lo) if flt.lo_open else (numbers >= lo)) & (
              (numbers <= hi) if flt.hi_closed else (numbers < hi))
      except OverflowError:  # (an int past int64's range)
        return None
    owner = np.repeat(np.arange(len(raw)), lengths)
    return np.unique(owner[mask]).tolist()

  def find(self, split: str, name: str, value: Any,
           budget: float = 2.0) -> Optional[int]:
    """The first record whose scalar `name` is `value` (as a filter's
    eq finds it), or None (none read within `budget` seconds)."""
    if value is None or isinstance(value, list):
      raise InputError(f"{name}: a key is a feature with one value per "
                       "record")
    text = repr(value) if isinstance(value, float) else str(value)
    found = self.scan(split, Filter(name, "eq", value=text), want=1,
                      budget=budget).matches
    return found[0][0] if found else None

  def value(self, record: Dict[str, Any], name: str) -> Any:
    """A feature's value in a plain record (a feature list's steps), a
    list cut to its first SHOWN_VALUES values."""
    if not self.schema.is_sequence:
      value = record.get(name)
    elif name in record["context"]:
      value = record["context"][name]
    else:
      value = record["feature_lists"].get(name)
    if isinstance(value, list):
      more = len(value) - SHOWN_VALUES
      return [_text(v) for v in value[:SHOWN_VALUES]] + (
          [f"… {more:,} more"] if more > 0 else [])
    return _text(value)

  def _test(self, flt: Filter, split: str = ""):
    if _split(split)[1]:
      raise InputError("filters read the raw splits: a transformed "
                       "split's features are TensorFlow Transform's, not "
                       "the schema's")
    if flt.op not in OPS:
      raise InputError(f"unknown filter {flt.op!r} (one of "
                       f"{', '.join(OPS)})")
    f = self.feature(flt.feature)
    steps = self.schema.is_sequence and f in self.schema.sequence

    def values_of(record) -> Optional[list]:
      if self.schema.is_sequence:
        where = record["feature_lists"] if steps else record["context"]
        value = where.get(f.name)
        if steps and value is not None:  # every step's values
          return [v for step in value for v in
                  (step if isinstance(step, list) else [step])]
      else:
        value = record.get(f.name)
      if value is None:
        return None
      return value if isinstance(value, list) else [value]

    if flt.op == "missing":
      return lambda record: not values_of(record)
    if flt.op == "contains":
      needle = flt.value
      if f.type in (FeatureType.STRING, FeatureType.BYTES):
        return lambda record: any(
            needle in _text(v) for v in values_of(record) or ())
      wanted = _parse(f, flt.value, "value")
      return lambda record: wanted in (values_of(record) or ())
    if flt.op == "eq":
      wanted = _parse(f, flt.value, "value")
      return lambda record: any(_text(v) == wanted if isinstance(
          wanted, str) else v == wanted for v in values_of(record) or ())
    if f.type not in (FeatureType.INT64, FeatureType.FLOAT):
      raise InputError(f"a range needs a number feature: {f.name} is "
                       f"{f.type.value}")
    # (Bounds as floats for int64 too: the histograms' buckets are.)
    lo = _number(flt.lo, "lo") if flt.lo != "" else -math.inf
    hi = _number(flt.hi, "hi") if flt.hi != "" else math.inf
    def inside(v) -> bool:
      v = float(v)  # (as the histograms' edges and the columns compare)
      return (lo < v if flt.lo_open else lo <= v) and (
          v <= hi if flt.hi_closed else v < hi)
    return lambda record: any(inside(v) for v in values_of(record) or ())

  # -- statistics and rejected rows --------------------------------------

  def histograms(self, split: str) -> List[Dict[str, Any]]:
    """Per feature of statistics.pb for the split: {"name", "buckets":
    [(low, high, count, lo_open, hi_closed)], "most", "values"} for
    numbers, {"name", "top": [(value, count)], "values"} for text; []
    without statistics. "values": the counts are of values (a list
    feature), so a bar's records may be fewer than its count.

    A bar's edges are fine buckets' (encoding.histogram): a positive
    bucket holds [a, b), a negative one (a, b], zero its own; so a bar
    at or above 0 holds [low, high), one at or below 0 (low, high], one
    across 0 (low, high), one of width 0 [low, high]."""
    self.count(split)
    self._unchanged()
    stats = dataset_statistics(self.path, self.reader.info)
    self._unchanged()
    out = []
    for name, feature in sorted(stats.get(split, {}).items()):
      if feature.HasField("num_stats") and feature.num_stats.histograms:
        buckets = [b for b in feature.num_stats.histograms[0].buckets
                   if b.sample_count]
        out.append({"name": name, "buckets": [
            (b.low_value, b.high_value, int(round(b.sample_count)))
            + _sides(b.low_value, b.high_value) for b in buckets],
                    "most": max(int(round(b.sample_count))
                                for b in buckets),
                    "values": self._list(name)})
      elif feature.HasField("string_stats") and \
          feature.string_stats.top_values and \
          self._type(name) is FeatureType.STRING:  # (not bytes: images)
        out.append({"name": name, "top": [
            (v.value, int(v.frequency))
            for v in feature.string_stats.top_values],
                    "values": self._list(name)})
    return out

  def errors(self) -> Tuple[List[Dict[str, Any]], Optional[int]]:
    """The rejected rows by kind of reason (core.errors.reason_category),
    most first: ([{"reason", "rows" (how many), "shown": the first
    ROWS_PER_REASON entries}], None), reading at most ERRORS_READ
    entries; when there are more, the second item says how many were
    read, and the counts are dataset.json's where it has them."""
    self._unchanged()
    groups: Dict[str, Dict[str, Any]] = {}
    read, stopped = 0, None
    for entry in self.reader.errors():
      if read == ERRORS_READ:
        stopped = read
        break
      read += 1
      reason = reason_category(str(entry.get("reason", "")))
      group = groups.setdefault(reason, {"reason": reason, "rows": 0,
                                         "shown": []})
      group["rows"] += int(entry.get("rows", 1) or 1)
      if len(group["shown"]) < ROWS_PER_REASON:
        group["shown"].append(entry)
    if stopped is not None:  # (exact counts of the frequent ones)
      for known in self.reader.info.errors.reasons:
        groups.setdefault(known.reason, {"reason": known.reason,
                                         "shown": []})["rows"] = known.rows
    self._unchanged()
    return sorted(groups.values(),
                  key=lambda g: (-g["rows"], g["reason"])), stopped


def _split(key: str) -> Tuple[str, bool]:
  """(split, transformed) of a viewer's split name."""
  if key.endswith(TRANSFORMED):
    return key[:-len(TRANSFORMED)], True
  return key, False


def _transformed(record: bytes, sequence: bool) -> Dict[str, Any]:
  """A transformed record as stored: a feature of one value as that
  value, others as lists."""
  def plain(decoded):
    return {k: (v[0] if len(v) == 1 else list(v))
            for k, (_, v) in decoded.items()}
  if not sequence:
    return plain(decode_example(record))
  context, lists = decode_sequence_example(record)
  return {"context": plain(context),
          "feature_lists": {k: [v[0] if len(v) == 1 else list(v)
                                for _, v in steps]
                            for k, steps in lists.items()}}


def _cell(steps: Optional[list], i: int) -> Any:
  if steps is None or i >= len(steps):
    return ""
  value = steps[i]
  if isinstance(value, list):
    more = len(value) - SHOWN_VALUES
    return ", ".join(str(_text(v)) for v in value[:SHOWN_VALUES]) + (
        f", … {more:,} more" if more > 0 else "")
  return _text(value) if value is not None else ""


def _text(value: Any) -> Any:
  """Bytes as text where they are UTF-8, else their escapes."""
  if isinstance(value, bytes):
    return value.decode("utf-8", "backslashreplace")
  return value


def _parse(f: Feature, text: str, what: str) -> Any:
  try:
    if f.type is FeatureType.INT64:
      return int(text)
    if f.type is FeatureType.FLOAT:
      return float(text)
  except ValueError:
    raise InputError(f"{what}: {text!r} is not a {f.type.value} (the type "
                     f"of {f.name})") from None
  return text


def _sides(low: float, high: float) -> Tuple[bool, bool]:
  """(lo_open, hi_closed) of a histogram bar (see Viewer.histograms)."""
  if low == high:
    return False, True
  if low >= 0:
    return False, False
  if high <= 0:
    return True, True
  return True, False


def _number(text: str, what: str) -> float:
  try:
    return float(text)
  except ValueError:
    raise InputError(f"{what}: {text!r} is not a number") from None


def _tensor_array(data: Any, dtype: Optional[str]) -> Optional[np.ndarray]:
  if isinstance(data, list):
    return np.asarray(data) if data else None
  if isinstance(data, bytes) and dtype:
    try:
      return np.frombuffer(data, np.dtype(dtype).newbyteorder("<"))
    except (TypeError, ValueError):
      return None
  return None


def _png(data: bytes, height: Any, width: Any, channels: Any) -> bytes:
  """Raw 8-bit pixels (height x width x channels) as a PNG."""
  from PIL import Image  # pylint: disable=import-outside-toplevel
  try:
    mode = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[int(channels)]
    image = Image.frombytes(mode, (int(width), int(height)), data)
    out = io.BytesIO()
    image.save(out, "PNG")
  except (KeyError, TypeError, ValueError, OverflowError, OSError) as e:
    raise NotFound(f"the image's {len(data):,} bytes are not "
                   f"{height}x{width}x{channels} pixels") from e
  return out.getvalue()

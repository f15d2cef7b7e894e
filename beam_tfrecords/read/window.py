"""Several finished datasets read as one, and pins that fix which.

A scheduled build writes one dataset a day; training reads the last N:

    btr.load(["out/events/2026-11-24", "out/events/2026-11-25"], "train")
    btr.load("out/events/2026-11-*", "train")        # a glob: sorted
    btr.pin("out/events/2026-11-*", "window.json")   # fix exactly which
    btr.load("window.json", "train")                 # those, or an error

The datasets of a window are read in the order given (a glob's matches
sorted by path), one after the other; each must be finished and have the
same feature spec (the record kind and every feature's parsing spec), or
the window is refused naming the dataset and the feature that differs.

A pin holds each dataset's path and a digest of its records: the name,
size and SHA-256 of every shard, as its dataset.json records them (taken
as the build wrote them), and how they parse (records_digest). Reading a pin checks them, and the shards'
sizes on disk, first, so a window reads the same records on every day,
or fails naming the dataset that was rebuilt with other records or
changed since; a rebuild that wrote the same records (--force, another
report) keeps it. `btr.verify` checks every byte against the checksums.
(Pins of version 1, and datasets written before checksums, use a digest
of dataset.json's bytes and the files' sizes instead.)
"""

import dataclasses
import hashlib
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import InputError, MalformedFileError
from beam_tfrecords.core.generations import check_sealed, consistent
from beam_tfrecords.core.info import DatasetInfo, description_bytes
from beam_tfrecords.core.layout import DATASET_JSON
from beam_tfrecords.core.json_shapes import check, parse

__all__ = ["datasets", "window", "pin", "digest", "records_digest",
           "PIN_KIND", "is_pin",
           "finished", "split_files", "Datasets", "Window"]

PIN_KIND = "beam_tfrecords.read.window"
# A pin's shape (core.json_shapes): each dataset's path, and the digest of
# its records (version 2) or of its dataset.json and files' sizes (1).
_PIN_SHAPE = {"datasets": [{"path": str, "records?": str, "digest?": str}]}
_PIN_FIX = " (btr.pin writes pin files: pin the window again)"


class Window(List[Tuple[str, DatasetInfo]]):
  """A window as `window()` read it: (folder, dataset.json) of each
  dataset, in reading order. Given where datasets are named, it is read
  as it was then (each dataset's generation), without reading again."""


# What load / iter_records / the torch Dataset take as datasets.
Datasets = Union[str, Sequence[str], Window]


def is_pin(path: str) -> bool:
  """Whether `path` names a pin file (not a dataset folder)."""
  return path.endswith(".json") and not fs.exists(
      fs.join(path, DATASET_JSON))


def _normal(path: str) -> str:
  """A local path made absolute (a pin is read from anywhere; the same
  dataset named two ways is one); a remote one as given."""
  path = path.rstrip("/") if len(path) > 1 else path
  return os.path.abspath(path) if fs.is_local(path) else path


def _expand(entry: str) -> List[str]:
  """One entry: a dataset folder, a glob of them, or a pin file."""
  entry = entry.rstrip("/") if len(entry) > 1 else entry
  if is_pin(entry):
    return _read_pin(entry)
  if any(c in entry for c in "*?["):
    found = sorted(f.path[:-len(DATASET_JSON) - 1]
                   for f in fs.match(fs.join(entry, DATASET_JSON)))
    if not found:
      raise InputError(f"no dataset matches {entry!r} (no "
                       f"{entry}/{DATASET_JSON})")
    return found
  return [entry]


def datasets(which: Datasets) -> List[str]:
  """The dataset folders `which` names, in reading order: a folder, a glob
  (its matches sorted), a pin file, or a list of those."""
  if isinstance(which, Window):
    return [path for path, _ in which]
  entries = [which] if isinstance(which, str) else list(which)
  if not entries:
    raise InputError("no datasets given: name a dataset folder, a glob of "
                     "them or a pin file")
  out: List[str] = []
  for entry in entries:
    if not isinstance(entry, str):
      raise InputError(f"a dataset is named by a path; got {entry!r}")
    out.extend(_normal(p) for p in _expand(entry))
  seen = set()
  for path in out:
    if path in seen:
      raise InputError(f"{path} is named twice in the window; its records "
                       "would be read twice")
    seen.add(path)
  return out


def finished(path: str) -> DatasetInfo:
  """The dataset.json of a finished dataset, with the generation it
  belongs to (its `generation`: the same _SUCCESS before and after it was
  read; see beam_tfrecords.core.generations).

  Raises:
    InputError: no _SUCCESS (the build failed, was killed or runs).
    DatasetReplacedError: it is being replaced (for over 2 s).
    MalformedFileError: its dataset.json is not the one its _SUCCESS
      seals (damaged or edited since the publish), or not of its shape.
  """
  (file, data), token = consistent(path, lambda: description_bytes(path))
  info = DatasetInfo.from_bytes(data, file)  # (its shape named first)
  check_sealed(file, token, data)
  return dataclasses.replace(info, generation=token)


def _spec_items(info: DatasetInfo) -> Dict[str, Any]:
  spec = info.feature_spec
  if info.record == "sequence_example":
    return {f"{section}.{k}": v for section in ("context", "sequence")
            for k, v in spec.get(section, {}).items()}
  return dict(spec)


def window(which: Datasets) -> Window:
  """(folder, dataset.json) of each dataset, checked to read as one (a
  Window given is returned as it is).

  Raises:
    InputError: one is not finished, or its record kind or a feature's
      parsing spec differs from the first one's (named).
  """
  if isinstance(which, Window):
    return which
  found = Window((p, finished(p)) for p in datasets(which))
  first_path, first = found[0]
  want = _spec_items(first)
  for path, info in found[1:]:
    if info.record != first.record:
      raise InputError(f"{path} holds {info.record} records and "
                       f"{first_path} {first.record}: a window reads one "
                       "kind")
    got = _spec_items(info)
    for name in sorted(set(want) | set(got)):
      if want.get(name) != got.get(name):
        raise InputError(
            f"{path} cannot be read with {first_path}: feature {name!r} is "
            f"{_said(got.get(name))} there and {_said(want.get(name))} in "
            f"{first_path}; a window needs one feature spec")
    _same_reading(first_path, first, path, info)
  return found


def _media(info: DatasetInfo) -> Dict[str, Any]:
  """The image and tensor declarations (how readers decode them)."""
  return {k: v for k, v in (info.schema.get("features") or {}).items()
          if isinstance(v, dict) and v.get("type") in ("image", "tensor")}


def _same_reading(first_path: str, first: DatasetInfo, path: str,
                  info: DatasetInfo) -> None:
  """What readers take from the first dataset for all: the label, how
  images and tensors decode, the transformed feature spec."""
  for what, mine, theirs in (
      ("label", first.label, info.label),
      ("image / tensor declarations", _media(first), _media(info)),
      ("transformed feature spec",
       first.transform and first.transform.feature_spec,
       info.transform and info.transform.feature_spec)):
    if mine != theirs:
      raise InputError(
          f"{path} cannot be read with {first_path}: their {what} differ "
          f"({theirs!r} there, {mine!r} in {first_path}); a window reads "
          "its datasets one way")


def _said(spec: Any) -> str:
  if spec is None:
    return "absent"
  shape = f" of shape {spec['shape']}" if "shape" in spec else ""
  return f"{spec['kind']}({spec['dtype']}){shape}"


def split_files(found: Sequence[Tuple[str, DatasetInfo]], split: str,
                transformed: bool = False) -> List[Tuple[str, int]]:
  """(shard path, records) of a split over the window, in reading order
  (`transformed`: of the transformed records).

  Raises:
    InputError: a dataset has no such split (named), or no transformed
      records.
  """
  out = []
  for path, info in found:
    splits = info.splits
    if transformed:
      if info.transform is None:
        raise InputError(f"{path} has no transformed records (its schema "
                         "has no `transform:` section)")
      splits = info.transform.splits
    if split not in splits:
      kind = "transformed split" if transformed else "split"
      raise InputError(f"{path} has no {kind} {split!r}; it has "
                       f"{sorted(splits)}")
    out += [(fs.join(path, s.file), s.num_records)
            for s in splits[split].shards]
  return out


def _sizes(path: str, names: Sequence[str]) -> Dict[str, int]:
  """{name: size} of these files of a dataset (-1: not there), one
  listing per folder, not a request per file."""
  sizes = {}
  for folder in sorted({os.path.dirname(n) for n in names}):
    base = fs.join(path, folder) if folder else path
    sizes.update({os.path.join(folder, f.path.rsplit("/", 1)[-1]): f.size
                  for f in fs.match(fs.join(base, "*"))})
  return {name: sizes.get(name, -1) for name in names}


def digest(path: str) -> str:
  """A digest of a finished dataset's content: dataset.json's bytes and
  the name and size of every file it lists (a pin of version 1, for
  datasets written before checksums)."""
  info = finished(path)
  h = hashlib.sha256()
  with fs.open_read(fs.join(path, DATASET_JSON)) as f:
    h.update(f.read())
  shards = info.shards()
  listed = [s.file for s in shards] + [s.index.file for s in shards
                                       if s.index is not None]
  for name, size in sorted(_sizes(path, listed).items()):
    h.update(f"\0{name}\0{size}".encode("utf-8"))
  return h.hexdigest()


def records_digest(info: DatasetInfo) -> Optional[str]:
  """A digest of a dataset's records as a reader gets them: the name,
  size and SHA-256 of every shard, raw and transformed, as dataset.json
  records them, and how they parse (the record kind, the compression,
  the file format, the feature specs, the label, the image and tensor
  declarations). None: a dataset written before checksums."""
  shards = sorted(info.shards(), key=lambda s: s.file)
  if any(s.sha256 is None for s in shards):
    return None
  h = hashlib.sha256(json.dumps({
      "record": info.record, "compression": info.compression,
      "file_format": info.file_format, "feature_spec": info.feature_spec,
      "label": info.label, "media": _media(info),
      "transformed": info.transform and info.transform.feature_spec},
                                sort_keys=True).encode("utf-8"))
  for s in shards:
    h.update(f"{s.file}\0{s.num_bytes}\0{s.sha256}\n".encode("utf-8"))
  return h.hexdigest()


def pin(which: Datasets, out: str) -> Dict[str, Any]:
  """Writes a pin file naming exactly these datasets (each with the
  digest of its records' checksums) and returns its content. The
  datasets must read as one."""
  found = window(which)
  entries = []
  for path, info in found:
    records = records_digest(info)
    entries.append({"path": path, "records": records} if records
                   else {"path": path, "digest": digest(path)})
  content = {"kind": PIN_KIND, "version": 2, "datasets": entries}
  fs.write_bytes(out, (json.dumps(content, indent=2) + "\n").encode("utf-8"))
  return content


def _still(path: str, entry: Dict[str, Any]) -> bool:
  """Whether a pinned dataset holds what it held: the same shard
  checksums in its dataset.json, and shards of those sizes (a file
  copied over one is caught without reading it; `btr.verify` reads
  every byte). A version-1 entry: the same digest."""
  if entry.get("records") is None:
    return digest(path) == entry["digest"]
  info = finished(path)
  if records_digest(info) != entry["records"]:
    return False
  sizes = _sizes(path, [s.file for s in info.shards()])
  return all(sizes[s.file] == s.num_bytes for s in info.shards())


def _pin_entries(path: str) -> List[Dict[str, Any]]:
  """A pin file's datasets, its shape checked.

  Raises:
    InputError: it cannot be read.
    MalformedFileError: it is not a pin file of the shape btr.pin writes.
  """
  try:
    with fs.open_read(path) as f:
      data = f.read()
  except OSError as e:
    raise InputError(f"{path}: not a readable pin file ({e})") from e
  content = parse(data, path, _PIN_FIX)
  check(content, dict, path, hint=_PIN_FIX)
  if content.get("kind") != PIN_KIND:
    raise MalformedFileError(f"{path} is not a pin file (btr.pin writes "
                             f"them: kind {PIN_KIND!r})", path)
  check(content, _PIN_SHAPE, path, hint=_PIN_FIX)
  entries = content["datasets"]
  if not entries:
    raise MalformedFileError(f"{path}: the pin names no dataset", path)
  for i, entry in enumerate(entries):
    if entry.get("records") is None and entry.get("digest") is None:
      raise MalformedFileError(
          f"{path}: datasets[{i}] has neither 'records' nor 'digest' (the "
          f"digest of what was pinned){_PIN_FIX}", path)
  return entries


def _read_pin(path: str) -> List[str]:
  out = []
  for entry in _pin_entries(path):
    if not fs.exists(fs.join(entry["path"], DATASET_JSON)):
      raise InputError(f"{path}: pinned dataset {entry['path']} is gone")
    if not _still(entry["path"], entry):
      raise InputError(
          f"{path}: pinned dataset {entry['path']} was rebuilt or changed "
          "since it was pinned; its records may differ. Pin the window "
          "again to read what is there now")
    out.append(entry["path"])
  return out

"""Looking at TFRecord files: any TFRecord file (`inspect_files`) and a
built dataset against a schema (`validate`). No TensorFlow needed.

`inspect_files` reads TFRecord files made by anything (gzip or not, told
apart by their first bytes; ArrayRecord files, `.array_record`, too:
core.array_record_files), checks every record's CRCs, tells Examples
from SequenceExamples, and summarizes the features it finds: kind, how many
records hold each, and the fewest / most values (or steps) per record.

`validate` checks every record of a dataset against a schema the way
`tf.io.parse_example` / `parse_sequence_example` with the schema's spec
would: each feature's kind, fixed value counts, required features present,
and for SequenceExamples equal feature-list lengths unless `ragged`.
`validate_transformed` parses a dataset's TensorFlow Transform output with
the transformed spec (TensorFlow's own parser: it needs TensorFlow).
"""

import dataclasses
import hashlib
import glob as _glob
from typing import Any, Dict, List, Optional, Tuple

import numpy as np


from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.layout import DATASET_JSON
from beam_tfrecords.core.shard_formats import of_file
from beam_tfrecords.core.shard_reader import Expected, read_shard
from beam_tfrecords.core.tfrecord_files import (decode_example,
                                                decode_sequence_example)
from beam_tfrecords.schema.model import Derive, Feature, Schema

__all__ = ["FeatureSummary", "FileSummary", "inspect_files", "validate",
           "ValidationReport", "TransformedReport", "validate_transformed",
           "is_gzip"]


def is_gzip(path: str) -> bool:
  """Whether a file starts with the gzip magic bytes."""
  with fs.open_read(path, fs.UNCOMPRESSED) as f:
    return f.read(2) == b"\x1f\x8b"


def _kind(path: str) -> str:
  """gzip, none (uncompressed TFRecords) or the name of a format of its
  own (core.shard_formats: array_record)."""
  fmt = of_file(path)
  if fmt.own:
    return fmt.name
  return "gzip" if is_gzip(path) else "none"


def _records(path: str, kind: Optional[str] = None,
             expect: Optional[Expected] = None):
  """The records of a shard file of any format (TFRecord's compression
  None: by its name and first bytes), checked against its dataset.json
  entry when given."""
  fmt = of_file(path)
  if fmt.own:
    return (r for records in fmt.read(path, expect or Expected(), True, None)
            for r in records)
  return (r for records in read_shard(path, kind, expect) for r in records)


@dataclasses.dataclass
class FeatureSummary:
  """What the records hold under one feature name."""
  kind: Optional[str]            # int64_list / float_list / bytes_list
                                 # (None: a feature with no kind set)
  records: int = 0               # records holding it
  fewest: Optional[int] = None   # values (or steps, for feature lists)
  most: Optional[int] = None
  kinds_seen: Tuple[str, ...] = ()

  def add(self, kind: Optional[str], count: int) -> None:
    self.records += 1
    if kind and kind not in self.kinds_seen:
      self.kinds_seen += (kind,)
    self.fewest = count if self.fewest is None else min(self.fewest, count)
    self.most = count if self.most is None else max(self.most, count)


@dataclasses.dataclass
class FileSummary:
  """One TFRecord file (or ArrayRecord file)."""
  path: str
  compression: str  # gzip, none or array_record
  bytes: int
  records: int = 0
  error: Optional[str] = None


def _match(patterns: List[str]) -> List[Tuple[str, int]]:
  found = {}
  for pattern in patterns:
    if fs.exists(pattern) and not fs.exists(
        fs.join(pattern, DATASET_JSON)) and _is_dir(pattern):
      pattern = fs.join(_glob.escape(pattern.rstrip("/")), "*")
    for m in fs.match(pattern):
      name = m.path.rsplit("/", 1)[-1]
      if not name.startswith((".", "_")):
        found[m.path] = m.size
  if not found:
    raise InputError(f"{patterns} match no file")
  return sorted(found.items())


def _is_dir(path: str) -> bool:
  import os
  return "://" not in path and os.path.isdir(path)


def inspect_files(patterns: List[str], show: int = 3
                  ) -> Tuple[List[FileSummary], str, Dict[str, FeatureSummary],
                             Dict[str, FeatureSummary], List[Any]]:
  """Reads every record of some TFRecord files.

  Returns:
    (files, record kind "example" / "sequence_example" / "empty",
     context or Example features, feature lists, the first `show` records
     decoded as plain values).
  """
  files: List[FileSummary] = []
  features: Dict[str, FeatureSummary] = {}
  lists: Dict[str, FeatureSummary] = {}
  first: List[Any] = []
  kind = "empty"
  for path, size in _match(patterns):
    summary = FileSummary(path, _kind(path), size)
    files.append(summary)
    try:
      for data in _records(path, summary.compression):
        summary.records += 1
        context, steps = decode_sequence_example(data)
        if steps:  # feature lists: a SequenceExample
          kind = "sequence_example"
        elif kind == "empty":
          kind = "example"
        for name, (k, values) in context.items():
          features.setdefault(name, FeatureSummary(k)).add(k, len(values))
        for name, entries in steps.items():
          lists.setdefault(name, FeatureSummary(
              entries[0][0] if entries else None)).add(
                  entries[0][0] if entries else None, len(entries))
        if len(first) < show:
          first.append(_plain(context, steps))
    except Exception as e:  # pylint: disable=broad-except
      summary.error = (f"record {summary.records}: {type(e).__name__}: {e}"
                       if not isinstance(e, ValueError) else str(e))
  return files, kind, features, lists, first


def _plain(context: dict, steps: dict):
  values = {n: v for n, (_, v) in context.items()}
  if not steps:
    return values
  return {"context": values,
          "feature_lists": {n: [v for _, v in s] for n, s in steps.items()}}


# ---------------------------------------------------------------------------
# validate


@dataclasses.dataclass
class ValidationReport:
  records: int = 0
  bad_records: int = 0
  failures: List[str] = dataclasses.field(default_factory=list)
  # problem (without the record's place) -> records with it
  counts: Dict[str, int] = dataclasses.field(default_factory=dict)
  files: int = 0
  listed_records: int = 0
  # Set when the dataset holds the other record kind than the schema
  # says: the records are then not checked one by one.
  kind_mismatch: Optional[str] = None

  @property
  def ok(self) -> bool:
    return (self.kind_mismatch is None and self.bad_records == 0
            and self.records == self.listed_records)


def _check_feature(f: Feature, found, in_steps: bool = False) -> Optional[str]:
  """Why one feature's value would not parse with the schema's spec (or
  None). Fixed-size features that every record carries are FixedLen*
  (present, exactly their values); the others VarLen / Ragged (any count
  of the right kind)."""
  kind = "int64_list" if f.derive in (Derive.LENGTH, Derive.PART) else \
      f.type.proto_kind
  fixed = not f.is_variable_length and f.always_present
  if found is None:
    if fixed and not in_steps:
      return (f'feature "{f.name}" is missing (the spec reads it as a '
              "FixedLenFeature: required, or with a default)")
    return None
  got_kind, values = found
  if got_kind is not None and got_kind != kind:
    return f'feature "{f.name}" holds {got_kind}, the schema says {kind}'
  if fixed and len(values) != f.num_values:
    where = "a step of " if in_steps else ""
    return (f'{where}feature "{f.name}" has {len(values)} value(s), the schema '
            f"says {f.num_values} (shape {list(f.shape)})")
  return None


def _problems(schema: Schema, data: bytes) -> List[str]:
  if not schema.is_sequence:
    found = decode_example(data)
    return [p for f in schema.features
            if (p := _check_feature(f, found.get(f.name))) is not None]
  context, lists = decode_sequence_example(data)
  out = [p for f in schema.context
         if (p := _check_feature(f, context.get(f.name))) is not None]
  lengths = {}
  for f in schema.sequence:
    steps = lists.get(f.name)
    if steps is None:
      continue
    lengths[f.name] = len(steps)
    for step in steps:
      p = _check_feature(f, step, in_steps=True)
      if p is not None:
        out.append(p)
        break
  if not schema.ragged and len(set(lengths.values())) > 1:
    out.append("feature lists of different lengths "
               f"{dict(sorted(lengths.items()))} (the schema is not ragged)")
  return out


def _index_problem(path: str, shard) -> Optional[str]:
  """What is wrong with a shard's index (None: nothing, or no index):
  its SHA-256 against dataset.json's, and it against the shard, member by
  member (gzip) or record by record (DALI's)."""
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.core.members import Hopper, MemberError
  from beam_tfrecords.core.shard_index import DALI_INDEX_SUFFIX
  from beam_tfrecords.read.random_access import (IndexedShard, MemberCache,
                                                 PlainShard)
  if shard.index is None:
    return None
  base = path.rstrip("/")
  file, index = fs.join(base, shard.file), fs.join(base, shard.index.file)
  try:
    with fs.open_read(index, fs.UNCOMPRESSED) as f:
      digest = hashlib.sha256(f.read()).hexdigest()
    if digest != shard.index.sha256:
      return (f"{shard.index.file}: its SHA-256 is not the one dataset.json "
              "lists (the index was changed or replaced)")
    if shard.index.file.endswith(DALI_INDEX_SUFFIX):
      plain = PlainShard(file, index, shard.num_records)
      try:
        plain.get(np.arange(shard.num_records), MemberCache(0))
      finally:
        plain.close()
      return None
    indexed = IndexedShard(file, index, shard.num_records)
    try:
      offsets = indexed.index.offsets[:-1].tolist()
      counts = np.diff(indexed.index.first_records).tolist()
    finally:
      indexed.close()
  except Exception as e:  # pylint: disable=broad-except
    return f"{shard.index.file}: {type(e).__name__}: {e}"
  try:  # hopped over 8 MiB at a time: never the whole shard in memory
    hopper = Hopper()
    with fs.open_read(file, fs.UNCOMPRESSED) as f:
      for data in iter(lambda: f.read(8 << 20), b""):
        hopper.feed(data)
    if not hopper.done():
      raise MemberError("the shard ends inside a member")
    members = hopper.units
  except Exception as e:  # pylint: disable=broad-except
    return f"{shard.file}: {type(e).__name__}: {e}"
  if [m.offset for m in members] != offsets or [
      m.records for m in members] != counts:
    return (f"{shard.index.file}: its members are not the shard's "
            f"({shard.file})")
  return None


def validate(path: str, schema: Schema, show: int = 10) -> ValidationReport:
  """Checks every record of a built dataset against `schema`."""
  from beam_tfrecords.read.reader import dataset_info  # no cycle at import
  info = dataset_info(path)
  report = ValidationReport()
  held, described = info.record, schema.record.value
  if held and held != described:
    names = {"example": "Examples", "sequence_example": "SequenceExamples"}
    report.kind_mismatch = (
        f"this dataset holds {names.get(held, held)} (dataset.json: record: "
        f"{held}), but the schema {schema.path} describes "
        f"{names.get(described, described)} (record: {described}); "
        "validate it with a schema of its kind")
    report.listed_records = sum(s.num_records for s in info.splits.values())
    return report
  for split, s in sorted(info.splits.items()):
    report.listed_records += s.num_records
    for shard in s.shards:
      report.files += 1
      file_path = fs.join(path.rstrip("/"), shard.file)
      wrong = _index_problem(path, shard)
      if wrong is not None:
        report.bad_records += 1
        report.failures.append(wrong)
        report.counts[wrong] = report.counts.get(wrong, 0) + 1
      index = -1
      try:
        for index, data in enumerate(_records(
            file_path, expect=Expected.of(shard))):
          report.records += 1
          problems = _problems(schema, data)
          if problems:
            report.bad_records += 1
            for p in problems:
              report.counts[p] = report.counts.get(p, 0) + 1
            if len(report.failures) < show:
              report.failures.append(f"{shard.file} record {index}: "
                                     + "; ".join(problems))
      except Exception as e:  # pylint: disable=broad-except
        # A CRC, gzip or protobuf failure ends the file: count it once.
        report.bad_records += 1
        problem = f"{type(e).__name__}: {e}"
        report.failures.append(f"{shard.file} after record {index}: "
                               f"{problem}")
        report.counts[problem] = report.counts.get(problem, 0) + 1
  return report


@dataclasses.dataclass
class TransformedReport:
  """What `validate_transformed` found."""
  records: int = 0          # transformed records read
  bad_records: int = 0      # records the transformed spec does not parse
  listed_records: int = 0   # what dataset.json says the splits hold
  failures: List[str] = dataclasses.field(default_factory=list)

  @property
  def ok(self) -> bool:
    return self.bad_records == 0 and self.records == self.listed_records


def validate_transformed(path: str, show: int = 5) -> TransformedReport:
  """Every transformed record parses with the transformed feature spec
  (`tf.io.parse_single_example`); the first `show` failures are listed."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.read.reader import dataset_info, transformed_spec
  from beam_tfrecords.schema import SequenceSpec
  info = dataset_info(path)
  transform = info.transform
  if transform is None:
    raise InputError(f"{path} has no transformed records (its schema has no "
                     "`transform:` section)")
  spec = transformed_spec(info)
  parse = (lambda raw: tf.io.parse_single_sequence_example(raw, *spec)) \
      if isinstance(spec, SequenceSpec) else \
      (lambda raw: tf.io.parse_single_example(raw, spec))
  report = TransformedReport()
  for split, s in sorted(transform.splits.items()):
    report.listed_records += s.num_records
    files = [fs.join(path.rstrip("/"), f) for f in s.files]
    for i, raw in enumerate(tf.data.TFRecordDataset(
        files, compression_type="GZIP").as_numpy_iterator()):
      report.records += 1
      try:
        parse(raw)
      except (tf.errors.InvalidArgumentError, ValueError) as e:
        report.bad_records += 1
        if len(report.failures) < show:
          report.failures.append(
              f"{split} record {i}: {str(e).splitlines()[0]}")
  return report

"""build(): source -> encode -> sink, wired as one Beam pipeline.

Everything that can be checked is checked before the pipeline is built: the
schema (when loaded), the inputs (globs, headers, columns) and the output
(an existing finished dataset is kept unless overwrite is asked for).
"""

import dataclasses
import hashlib
import json
import logging
import os
import time
from typing import (Any, Callable, Dict, List, Mapping, NamedTuple, Optional,
                    Sequence, Union)

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from beam_tfrecords.beam_options import (check_paths_reach_workers,
                                         pipeline_options)
from beam_tfrecords.errors import InputError, from_worker, is_disk_full
from beam_tfrecords.preprocess import resolve_preprocess
from beam_tfrecords.schema import Schema, load_schema, spec_to_json
from beam_tfrecords.schema.loader import parse_size
from beam_tfrecords.schema.model import DEFAULT_SPLIT, MediaKind, SplitKind
from beam_tfrecords.schema.tfmd import TFMD_FILE, tfmd_text
from beam_tfrecords.running import run_pipeline, sigint_deferred
from beam_tfrecords.splits import producible_splits, split_fraction
from beam_tfrecords.sinks import (DATASET_JSON, STAGING_PREFIX, SUCCESS,
                                  TFRECORD_GZIP, Commit, WriteErrors,
                                  Shuffle, WriteShards, WriteWithBeamSink,
                                  OutputLock, check_output_files,
                                  check_thresholds, publish, read_json,
                                  recover, remove_parts, remove_staging)
from beam_tfrecords.sources import plan_inputs
from beam_tfrecords.encoding.stats import merge as merge_stats
from beam_tfrecords.transforms import (STAT_FIELDS, Encode, ReadInputs,
                                       dead_letter_json)
from beam_tfrecords.transforms.encode import FEATURE_STATS
from beam_tfrecords.transforms.read import unit_bytes
from beam_tfrecords.transform import (TRANSFORMED_DIR, TFT_TEMP_DIR,
                                      TransformRecords, describe_transform)
from beam_tfrecords.version import __version__

__all__ = ["build", "BuildResult", "DEFAULT_SPLIT"]

_LOG = logging.getLogger(__name__)
SINKS = {
    "deterministic": lambda d, plan, level, shuffle: WriteShards(
        d, plan.shards, TFRECORD_GZIP, gzip_level=level, shuffle=shuffle,
        max_bytes=plan.max_bytes),
    # WriteToTFRecord compresses with zlib's default level and cannot bound
    # file sizes: it writes exactly plan.shards files.
    "beam": lambda d, plan, level, shuffle: WriteWithBeamSink(d, plan.shards),
}
# A shuffled shard is written bucket by bucket; a bucket holds about this
# many bytes of records (its memory bound), estimated from the input size.
SHUFFLE_BUCKET_BYTES = 64 * 1024 * 1024
# Serialized, framed records per input byte, for that estimate (measured:
# 316 MB of Examples from a 119 MB CSV).
RECORD_BYTES_PER_INPUT_BYTE = 3


def expected_shares(schema: Schema) -> Dict[str, float]:
  """The share of the input each split is expected to get: a hash rule's
  weights, else an even share."""
  names = schema.splits.names
  return split_fraction(schema.splits) or {n: 1 / len(names) for n in names}


def shuffle_buckets(schema: Schema, shards: Dict[str, int],
                    input_bytes: int) -> Dict[str, int]:
  """Buckets per shard of each split, so that a bucket holds about
  SHUFFLE_BUCKET_BYTES (decided on the launcher: the same every run)."""
  share = expected_shares(schema)
  return {name: max(1, -(-int(input_bytes * RECORD_BYTES_PER_INPUT_BYTE
                              * share[name] / n) // SHUFFLE_BUCKET_BYTES))
          for name, n in shards.items()}
# The largest shard file when --num-shards is not given (TFDS aims for
# 64 MiB - 1 GiB files).
DEFAULT_MAX_SHARD_BYTES = 256 * 1024 * 1024
MIN_SHARD_BYTES = 1024
# Compressed output bytes per input byte, to estimate how many shards a
# split needs. Measured: 77 MB of gzip Examples from a 119 MB CSV (0.65),
# 0.8 for a CSV of integers, 1.16 from Parquet (itself compressed); image
# files are stored as they are (1.0). Set high, so that a shard seldom
# outgrows the limit (a shard that does is cut into files of equal size).
OUTPUT_BYTES_PER_INPUT_BYTE = {"parquet": 2.0}
DEFAULT_OUTPUT_BYTES_PER_INPUT_BYTE = 1.0
# One errors/ file per this many input bytes (at least one, at most one
# per records shard).
ERRORS_INPUT_BYTES = 1024 ** 3


@dataclasses.dataclass(frozen=True)
class BuildResult:
  """What a finished build wrote (the content of its dataset.json)."""
  output: str
  metadata: Dict[str, Any]
  seconds: float
  # True when nothing was built: the output already held a dataset of the
  # same inputs, schema and options (see build(..., force=...)).
  up_to_date: bool = False

  @property
  def splits(self) -> Dict[str, dict]:
    return self.metadata["splits"]

  @property
  def rows_rejected(self) -> int:
    return self.metadata["counts"]["rows_rejected"]


def needed_columns(schema: Schema) -> Dict[str, str]:
  """The input columns a build cannot do without, each with what reads it
  and the fix for a misspelling (for the message when one is absent)."""
  needed: Dict[str, str] = {}
  for f in schema.all_features:
    if f.input_column is not None and f.default is None:
      needed.setdefault(f.input_column, f"the source of feature {f.name!r} "
                        "(fix its source:, or give it a default:)")
  for m in schema.media:
    for c in m.sources:
      needed.setdefault(c, f"the source of feature {m.name!r} (fix its "
                        "source:)")
  for c, _ in schema.group_by:
    needed.setdefault(c, "a group_by column (fix group_by:)")
  for k in schema.order_by:
    needed.setdefault(k.column, "an order_by column (fix order_by:)")
  rule = "splits.hash" if schema.splits.kind is SplitKind.HASH else \
      "splits.column"
  for c in schema.splits.columns:
    needed.setdefault(c, f"the split rule's key (fix {rule}:)")
  return needed


def scalar_columns(schema: Schema) -> List[str]:
  """The input columns read as one value per row: scalar features (and,
  grouped into sequences, scalar steps), keys, image paths, .npy paths and
  the gathered columns of a tensor. (TFRecord input holds every value in
  a list: these take its single value.)

  Raises:
    InputError: a column is read both as one value and as a list.
  """
  features = list(schema.features) + list(schema.context)
  if schema.group_by:
    features += list(schema.sequence)
  one, many = {}, {}
  for f in features:
    if f.input_column is not None:
      (one if f.is_scalar else many).setdefault(f.input_column, f.name)
  for c, _ in schema.group_by:
    one.setdefault(c, "group_by")
  for k in schema.order_by:
    one.setdefault(k.column, "order_by")
  for c in schema.splits.columns:
    one.setdefault(c, "splits")
  for m in schema.media:
    if m.kind is MediaKind.IMAGE or (m.kind is MediaKind.TENSOR and (
        m.options["from"] == "npy" or len(m.sources) > 1)):
      for c in m.sources:
        one.setdefault(c, m.name)
    elif m.kind is MediaKind.TENSOR:
      many.setdefault(m.sources[0], m.name)
  both = sorted(set(one) & set(many))
  if both:
    c = both[0]
    raise InputError(
        f"TFRecord input: the feature {c!r} is read as one value (by "
        f"{one[c]}) and as a list (by {many[c]}); an Example holds one "
        "list per feature, so read it one way (or reshape it with "
        "--preprocess)")
  return list(one)


def _success_text(output: str) -> Optional[str]:
  """The output's _SUCCESS (tool version and build key), None if none."""
  path = FileSystems.join(output, SUCCESS)
  try:
    with FileSystems.open(path) as f:
      return f.read().decode("utf-8", "replace")
  except Exception:  # pylint: disable=broad-except
    # Not there (each file system says so its own way).
    return None if not FileSystems.exists(path) else "<unreadable>"


def _check_output_path(output: str) -> None:
  """Refuses outputs that would put a dataset among unrelated files: an
  empty path, the file system's root, `.`, a bucket's root."""
  text = output.strip()
  scheme, _, rest = text.rpartition("://")
  if scheme:
    bucket_root = "/" not in rest.strip("/")
    if bucket_root:
      raise InputError(
          f"output {output!r} is the root of a bucket; give a folder for "
          f"the dataset inside it ({scheme}://{rest.strip('/') or 'bucket'}"
          "/datasets/NAME)")
    return
  if not text:
    raise InputError("output is empty; give the dataset's folder, e.g. "
                     "--output out/my_dataset")
  where = os.path.abspath(text)
  if where in (os.path.abspath(os.sep), os.getcwd()):
    what = ("the file system root" if where == os.path.abspath(os.sep)
            else "the current directory")
    raise InputError(f"output {output!r} is {what}; a dataset gets a folder "
                     "of its own, e.g. --output out/my_dataset")


def _check_output(output: str) -> None:
  """Refuses an output path Beam reads as a pattern, or one that is a
  file."""
  if any(c in output for c in "*?[]"):
    raise InputError(f"output {output!r}: a dataset path cannot hold *, ?, "
                     "[ or ] (Beam's file systems read them as patterns)")
  if ("://" not in output and os.path.exists(output)
      and not os.path.isdir(output)) or (
          "://" in output and FileSystems.exists(output)):
    raise InputError(f"output {output} is a file; a dataset is a folder: "
                     "give a folder path (new or empty, or holding a dataset)")


def _inside(path: str, folder: str) -> bool:
  if "://" in folder:
    return path.startswith(folder.rstrip("/") + "/")
  if "://" in path:
    return False
  real = os.path.realpath(folder)
  return os.path.realpath(path).startswith(real.rstrip(os.sep) + os.sep)


def _check_inputs_outside(output: str, plan, schema: Schema) -> None:
  """Refuses input files (and image folders) inside the output folder: an
  overwrite could remove them, and a build's own files could be read."""
  inside = [f.path for f in plan.files if _inside(f.path, output)]
  inside += [m.options["base_dir"] for m in schema.media
             if m.kind is MediaKind.IMAGE and m.options.get("base_dir")
             and (_inside(m.options["base_dir"], output)
                  or m.options["base_dir"].rstrip("/") == output)]
  if inside:
    raise InputError(
        f"input {inside[0]} is inside the output folder {output}"
        + (f" (and {len(inside) - 1} more)" if len(inside) > 1 else "")
        + "; a build replaces what it published there, so its inputs live "
        "elsewhere: move them out, or write the dataset to another folder")


def input_fingerprint(files) -> str:
  """A fingerprint of the input files: path, size and modification time of
  each (what the file system reports; the content is not read again)."""
  digest = hashlib.blake2b(digest_size=16)
  for f in sorted(files, key=lambda f: f.path):
    digest.update(f"{f.path}\0{f.size}\0{f.mtime!r}\n".encode("utf-8"))
  return digest.hexdigest()


class ShardPlan(NamedTuple):
  """Per split: how many shards are written in parallel, and the largest
  file size (None: exactly that many files, however large)."""
  shards: Dict[str, int]
  max_bytes: Dict[str, Optional[int]]


def shard_plan(schema: Schema,
               num_shards: Union[None, int, Mapping[str, int]],
               max_shard_size: Union[None, int, str],
               input_bytes: int, input_format: str = "csv") -> ShardPlan:
  """How each split's files are cut.

  A split with a count in `num_shards` (one number for every split, or per
  split) gets exactly that many files. The others get files of at most
  `max_shard_size` bytes (default 256 MiB), as many as the data needs: the
  build writes one shard per `max_shard_size` of the output the split is
  expected to get (estimated from the input size and a hash rule's share;
  decided on the launcher, so the same input gives the same files), and a
  shard that outgrows the limit continues in further files.
  """
  names = schema.splits.names
  given = num_shards if isinstance(num_shards, Mapping) else (
      {} if num_shards is None else {n: num_shards for n in names})
  unknown = sorted(set(given) - set(names))
  if unknown:
    raise InputError(f"--num-shards names split(s) {unknown} that the schema "
                     f"does not declare; its splits: {list(names)}")
  if max_shard_size is not None and len(given) == len(names):
    raise InputError(
        "--num-shards fixes the number of files of every split, so "
        "--max-shard-size has nothing left to size; give one of them, or "
        "counts for some splits (train=8) and --max-shard-size for the rest")
  limit = DEFAULT_MAX_SHARD_BYTES
  if max_shard_size is not None:
    limit = parse_size(max_shard_size)
    if limit is None or limit < MIN_SHARD_BYTES:
      raise InputError(f"--max-shard-size must be a size of at least 1KiB "
                       f"such as 256MB or 1GiB; got {max_shard_size!r}")
  share = expected_shares(schema)
  ratio = OUTPUT_BYTES_PER_INPUT_BYTE.get(input_format,
                                          DEFAULT_OUTPUT_BYTES_PER_INPUT_BYTE)
  shards, max_bytes = {}, {}
  for name in names:
    n = given.get(name)
    if n is None:
      expected = input_bytes * share[name] * ratio
      n, max_bytes[name] = max(1, -(-int(expected) // limit)), limit
    else:
      max_bytes[name] = None
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
      raise InputError(f"--num-shards must be at least 1, got {n!r} for "
                       f"split {name!r}")
    shards[name] = n
  return ShardPlan(shards, max_bytes)


def _listed_inputs(plan) -> List[dict]:
  """The input files for dataset.json; image folders as one entry per
  folder (a million images would make a 150 MB dataset.json)."""
  if plan.format != "images":
    return [{"path": f.path, "bytes": f.size, "modified": f.mtime}
            for f in plan.files]
  folders: Dict[str, dict] = {}
  for unit in plan.units:
    entry = folders.setdefault(unit.path, {"path": unit.path, "bytes": 0,
                                           "images": 0})
    entry["images"] += unit.end - unit.start
  for f in plan.files:
    for root, entry in folders.items():
      if f.path.startswith(root.rstrip("/") + "/"):
        entry["bytes"] += f.size
  return list(folders.values())


def resolve_media(schema: Schema, plan) -> Schema:
  """Media settings decided on the launcher: `vocabulary: auto` becomes
  the class folder names of an image folder, and a local relative
  base_dir an absolute one (workers run elsewhere)."""
  if not schema.media:
    return schema
  media = []
  for m in schema.media:
    options, declared = dict(m.options), dict(m.declared)
    if m.kind is MediaKind.VOCABULARY and options["values"] is None:
      if plan.format != "images" or m.sources[0] != "label":
        raise InputError(
            f"{schema.path}: features.{m.name}.vocabulary: auto takes the "
            "class folder names of an image folder (--format images, "
            f"column label), but this build reads {plan.format} input"
            + ("" if plan.format != "images" else
               f" and the feature reads column {m.sources[0]!r}")
            + "; list the values in index order instead: vocabulary: "
            "[cat, dog, ...]")
      if not plan.options["classes"]:
        raise InputError(f"{schema.path}: features.{m.name}.vocabulary: "
                         "auto found no "
                         "class folders (images in sub-folders of the input "
                         "folder)")
      options["values"] = declared["vocabulary"] = list(
          plan.options["classes"])
    base_dir = options.get("base_dir")
    if base_dir and "://" not in base_dir and not os.path.isabs(base_dir):
      options["base_dir"] = declared["base_dir"] = os.path.abspath(base_dir)
    media.append(dataclasses.replace(m, options=options, declared=declared))
  return dataclasses.replace(schema, media=tuple(media))


def merge_split_stats(parts) -> dict:
  """{split: {feature: stats}} parts merged (encoding.stats.merge)."""
  out: Dict[str, dict] = {}
  for part in parts:
    for split, features in part.items():
      into = out.setdefault(split, {})
      for name, s in features.items():
        into[name] = merge_stats(into.get(name), s)
  return out


def _sum_columns(rows) -> tuple:
  """Column sums of STAT_FIELDS tuples; zeros if none."""
  return tuple(sum(c) for c in zip(*rows)) or (0,) * len(STAT_FIELDS)


def build(schema: Union[str, Mapping, Schema], inputs: Union[str, Sequence[str]],
          output: str, *, input_format: Optional[str] = None,
          num_shards: Union[None, int, Mapping[str, int]] = None,
          max_shard_size: Union[None, int, str] = None,
          format_options: Optional[Mapping[str, Any]] = None,
          beam_args: Union[None, Sequence[str], PipelineOptions] = None,
          overwrite: bool = False, max_bad_rows: Optional[int] = None,
          max_bad_fraction: Optional[float] = None,
          sink: str = "deterministic",
          gzip_level: Optional[int] = None,
          shuffle_seed: Optional[int] = None,
          statistics: bool = True, force: bool = False,
          preprocess: Union[None, str, Callable] = None,
          progress: bool = False) -> BuildResult:
  """Builds a TFRecord dataset and waits for it to finish.

  Args:
    schema: a schema file path, dict or Schema.
    inputs: file paths or globs (local, gs://, s3://, ...).
    output: the dataset directory.
    input_format: csv, jsonl, json, parquet; None: from the extensions.
    num_shards: files per split: one number for every split, or a dict
      split -> number; splits without one get files of at most
      `max_shard_size` (see shard_plan).
    max_shard_size: the largest file, in bytes or as text (256MB, 1GiB);
      None: 256 MiB.
    format_options: source options, e.g. {"delimiter": ";"} for CSV.
    beam_args: Beam pipeline options (list of flags or PipelineOptions).
    overwrite: replace an existing finished dataset.
    max_bad_rows, max_bad_fraction: fail instead of publishing when more
      rows (or a larger fraction of the rows read) are rejected; None: the
      schema's value. With neither given anywhere, the build fails when
      more than 1% of the rows read are rejected, or when rows were
      rejected and a split got no records (give max_bad_fraction=1.0 to
      publish whatever was rejected).
    sink: "deterministic" (byte-identical files on every run) or "beam"
      (Beam's WriteToTFRecord: same format, runner-decided placement).
    gzip_level: None: ISA-L's fast deflate; 1-9: zlib at that level
      (smaller files, slower). Every choice writes standard gzip.
    shuffle_seed: None: records in input order; a number: records spread
      over the shards at random and written in a random order, the same
      for the same seed (see sinks.shards.Shuffle).
    statistics: per-feature statistics in dataset.json (computed in the
      encoding pass; about 7% of a plain build's time).
    force: build even when `output` holds a finished dataset of the same
      inputs (paths, sizes, modification times), schema, options and tool
      version; without it such a build returns at once, up_to_date.
    preprocess: a function pyarrow.RecordBatch -> RecordBatch, or
      "module:function", run on the workers on every batch read before
      encoding: it gets every column of the input and returns the columns
      the schema reads, for the same rows in order (see
      beam_tfrecords.preprocess). Checked here: it must pickle.
    progress: show the build's progress on stderr (a live line on a
      terminal, else a line every few seconds); on runners other than the
      DirectRunner, the job's metrics as they report them.

  Returns:
    A BuildResult with the dataset.json content.

  Raises:
    SchemaError, InputError: before anything runs.
    BadRowsError: over a threshold; nothing is published.
    KeyboardInterrupt: the build was interrupted; its staging folder is
      removed and nothing is published.
  """
  started = time.time()
  options, runner = pipeline_options(beam_args)
  # The launcher reads the schema, lists, reads headers and publishes
  # through FileSystems too: it needs the same file system options as the
  # workers (S3 endpoint and credentials, GCS project, ...).
  FileSystems.set_options(options)
  schema = load_schema(schema)
  patterns = [inputs] if isinstance(inputs, str) else list(inputs)
  _check_output_path(output)
  output = output.rstrip("/")
  check_paths_reach_workers(options, list(patterns) + [output])
  if "://" not in output:  # workers run elsewhere: an absolute path
    output = os.path.abspath(output)
  needed = needed_columns(schema)
  user_fn = resolve_preprocess(preprocess)
  plan = plan_inputs(patterns, () if user_fn else schema.columns,
                     {} if user_fn else needed, input_format, format_options,
                     lambda: scalar_columns(schema))
  if user_fn is not None and plan.options.get("column_names"):
    # Inputs with a fixed set of columns (CSV, Parquet) must have those
    # the schema needs; with a function, its output is known on the
    # workers only, so they are checked there, after it ran. (In JSON and
    # TFRecord input an absent column is a missing value.)
    user_fn = dataclasses.replace(user_fn, needed=tuple(dict.fromkeys(
        needed)))
  schema = resolve_media(schema, plan)
  _check_inputs_outside(output, plan, schema)
  check_paths_reach_workers(options, [
      m.options["base_dir"] for m in schema.media
      if m.kind is MediaKind.IMAGE and m.options.get("base_dir")])
  fingerprint = input_fingerprint(plan.files)
  key = build_key(schema, plan, fingerprint, {
      "num_shards": num_shards,
      "max_shard_size": (parse_size(max_shard_size)
                         if max_shard_size is not None else None),
      "sink": sink, "gzip_level": gzip_level, "shuffle_seed": shuffle_seed,
      "statistics": statistics, "max_bad_rows": max_bad_rows,
      "max_bad_fraction": max_bad_fraction,
      **({"preprocess": [user_fn.name, user_fn.digest]} if user_fn else {})})
  _check_output(output)
  # One build at a time per output: the lock is held until the end.
  lock = OutputLock(output, options).acquire()
  try:
    # Builds killed before: their publishes are finished, their staging
    # folders removed.
    recover(output, keep="")
    check_output_files(output)
    published_before = _success_text(output)
    if not force and published_before is not None:
      previous = _finished_with_key(output, key)
      if previous is not None:
        _LOG.info("%s is up to date (same inputs, schema and options)", output)
        return BuildResult(output=output, metadata=previous,
                           seconds=time.time() - started, up_to_date=True)
    if published_before is not None and not overwrite:
      raise InputError(f"{output} already holds a finished dataset; pass "
                       "--overwrite to replace it")
    if max_bad_rows is None:
      max_bad_rows = schema.max_bad_rows
    if max_bad_fraction is None:
      max_bad_fraction = schema.max_bad_fraction
    _check_thresholds_args(max_bad_rows, max_bad_fraction)
    if gzip_level is not None and gzip_level not in range(1, 10):
      raise InputError(f"--gzip-level must be 1-9 (zlib), got {gzip_level!r}")
    if sink not in SINKS:
      raise InputError(f"unknown sink {sink!r}; choose one of {sorted(SINKS)}")
    if schema.transform is not None and sink != "deterministic":
      raise InputError("a schema with transform: writes with the "
                       "deterministic sink; drop --sink beam")
    input_bytes = sum(f.size for f in plan.files)
    plan_shards = shard_plan(schema, num_shards, max_shard_size, input_bytes,
                             plan.format)
    shards = plan_shards.shards
    if sink != "deterministic":
      if max_shard_size is not None:
        raise InputError("--max-shard-size works with the deterministic sink "
                         "(Beam's WriteToTFRecord cannot bound file sizes); "
                         "drop --sink beam, or give --num-shards")
      # WriteToTFRecord writes plan_shards.shards files, however large.
      plan_shards = ShardPlan(shards, dict.fromkeys(shards))
    shuffle = None
    if shuffle_seed is not None:
      if sink != "deterministic":
        raise InputError("--shuffle-seed works with the deterministic sink; "
                         "drop --sink beam")
      if isinstance(shuffle_seed, bool) or not isinstance(shuffle_seed, int):
        raise InputError(f"--shuffle-seed must be a whole number, got "
                         f"{shuffle_seed!r}")
      shuffle = Shuffle(shuffle_seed, shuffle_buckets(schema, shards,
                                                      input_bytes))
    # Everything is written here first and moved into `output` at the end.
    staging = FileSystems.join(output, STAGING_PREFIX + lock.run)
    static = {
        "name": schema.name,
        "record": schema.record.value,
        "schema": schema.to_dict(),
        "feature_spec": spec_to_json(schema),
        "compression": "GZIP",
        "inputs": {"format": plan.format, "patterns": patterns,
                   "files": _listed_inputs(plan),
                   "fingerprint": fingerprint},
        "split_rule": {"kind": schema.splits.kind.value,
                       "splits": list(schema.splits.names),
                       **schema.splits.to_dict()},
        "options": {"num_shards": shards,
                    "max_shard_bytes": plan_shards.max_bytes, "sink": sink,
                    "shuffle_seed": shuffle_seed,
                    "shuffle_buckets": shuffle.buckets if shuffle else None,
                    "gzip_level": gzip_level, "statistics": statistics,
                    "max_bad_rows": max_bad_rows,
                    "max_bad_fraction": max_bad_fraction,
                    "preprocess": user_fn and user_fn.name,
                    "format_options": {k: v for k, v in plan.options.items()
                                       if k not in ("column_names",
                                                    "scalar_columns",
                                                    "classes")}},
        "vocabularies": {m.name: m.options["values"] for m in schema.media
                         if m.kind is MediaKind.VOCABULARY},
        "statistics_of": (
            "rows read into steps (group_by: before max_length policies and "
            "group rejections, whose rows errors/ lists)"
            if schema.group_by else "the written records"),
        "tool": {"name": "beam-tfrecords", "version": __version__},
        "tfmd_schema": TFMD_FILE,
        "build_key": key,
    }
    _LOG.info("Building %s from %d file(s), %d read unit(s) -> %s",
              schema.name, len(plan.files), len(plan.units), output)
    pipeline = beam.Pipeline(runner=runner, options=options)
    encoded = (pipeline
               | "ReadInputs" >> ReadInputs(
                   plan.units, schema.columns, user_fn,
                   unit_bytes(plan.units, [(f.path, f.size)
                                           for f in plan.files]))
               # SourceBatch
               | "Encode" >> Encode(schema, statistics))
    # records: bytes; errors: dead-letter dicts; stats: STAT_FIELDS tuples
    parts = []
    if schema.transform is None or schema.transform.keep_raw:
      parts.append(encoded["records"]
                   # (split, key, [record])
                   | "WriteSplits" >> SINKS[sink](staging, plan_shards,
                                                  gzip_level, shuffle))
    if schema.transform is not None:
      parts.append(
          encoded["records"]
          | "Transform" >> TransformRecords(
              schema, staging, FileSystems.join(staging, TFT_TEMP_DIR))
          # (split, key, [transformed record])
          | "WriteTransformed" >> WriteShards(
              FileSystems.join(staging, TRANSFORMED_DIR), plan_shards.shards,
              TFRECORD_GZIP, gzip_level=gzip_level, shuffle=shuffle,
              max_bytes=plan_shards.max_bytes)
          | "MarkTransformed" >> beam.Map(
              lambda d: dict(d, kind="transformed_shard")))
    errors = (encoded["errors"]
              | "WriteErrors" >> WriteErrors(
                  staging, max(1, min(max(shards.values()),
                                      -(-input_bytes // ERRORS_INPUT_BYTES))),
                  dead_letter_json))
    stats = (encoded["stats"]
             | "SumStats" >> beam.CombineGlobally(_sum_columns)
             | "StatsPart" >> beam.Map(lambda s: {"kind": "stats",
                                                  "counts": list(s)}))
    parts += [errors, stats]
    if statistics and FEATURE_STATS in encoded:
      parts.append(encoded[FEATURE_STATS]
                   | "SumFeatureStats" >> beam.CombineGlobally(
                       merge_split_stats)
                   | "FeatureStatsPart" >> beam.Map(
                       lambda s: {"kind": "statistics", "splits": s}))
    _ = (tuple(parts)
         | "Parts" >> beam.Flatten()
         | "Commit" >> Commit(staging, static, STAT_FIELDS))
    try:
      # TensorFlow Metadata's schema, for TFDV / TFT / TFX tools.
      with FileSystems.create(FileSystems.join(staging, TFMD_FILE)) as f:
        f.write(tfmd_text(schema).encode("utf-8"))
      run_pipeline(pipeline, options, progress, input_bytes)
    except KeyboardInterrupt:
      remove_staging(staging)
      raise
    except Exception as e:  # pylint: disable=broad-except
      if is_disk_full(e):
        remove_staging(staging)
        raise InputError(
            f"no space left on the device while writing {output} (the "
            "build's staging folder was removed; nothing was published); "
            "free space there or write the dataset elsewhere") from e
      typed = from_worker(e)
      if typed is e:
        raise
      raise typed from e
    finally:
      # The shards hold copies of the part files by now (or the run failed).
      try:
        remove_parts(staging)
      except Exception:  # pylint: disable=broad-except
        _LOG.warning("could not remove the part files under %s", staging,
                     exc_info=True)
    metadata = read_json(FileSystems.join(staging, DATASET_JSON))
    if schema.transform is not None:
      metadata = describe_transform(staging, metadata)
      analyzed = schema.transform.analyze_split
      if not metadata["transform"].get("splits", {}).get(analyzed, {}).get(
          "records"):
        raise InputError(
            f"the split {analyzed!r} that TensorFlow Transform analyzes has no "
            "records, so its statistics (means, vocabularies, buckets) would "
            f"be meaningless; nothing was published (see {staging}). Check "
            "the split rule and errors/, or set transform.analyze_split")
    check_thresholds(metadata, max_bad_rows, max_bad_fraction, staging,
                     producible_splits(schema.splits))
    lock.check()
    with sigint_deferred("publishing"):
      publish(staging, output, metadata,
              f"beam-tfrecords {__version__} {key}\n")
    _LOG.info("Published %s", output)
    return BuildResult(output=output, metadata=metadata,
                       seconds=time.time() - started)
  finally:
    lock.release()


def build_key(schema: Schema, plan, fingerprint: str,
              options: Dict[str, Any]) -> str:
  """What decides a build's output: the schema, the input files (their
  `input_fingerprint`), the format and its options, the build options as
  given, and the tool's version."""
  digest = hashlib.blake2b(digest_size=16)
  digest.update(json.dumps({
      "schema": schema.to_dict(),
      "inputs": fingerprint,
      "format": plan.format,
      "format_options": {k: v for k, v in plan.options.items()
                         if k not in ("column_names", "scalar_columns")},
      "options": options, "version": __version__,
  }, sort_keys=True, default=str).encode("utf-8"))
  return digest.hexdigest()


def _finished_with_key(output: str, key: str) -> Optional[Dict[str, Any]]:
  """The dataset.json in `output` (finished: the caller saw _SUCCESS) if it
  was built with `key`."""
  try:
    meta = read_json(FileSystems.join(output, DATASET_JSON))
  except Exception:  # pylint: disable=broad-except
    return None
  return meta if meta.get("build_key") == key else None


def _check_thresholds_args(max_bad_rows, max_bad_fraction) -> None:
  if max_bad_rows is not None and (not isinstance(max_bad_rows, int)
                                   or max_bad_rows < 0):
    raise InputError(f"--max-bad-rows must be a whole number >= 0, got "
                     f"{max_bad_rows!r}")
  if max_bad_fraction is not None and not 0 <= max_bad_fraction <= 1:
    raise InputError(f"--max-bad-fraction must be between 0 and 1, got "
                     f"{max_bad_fraction!r}")

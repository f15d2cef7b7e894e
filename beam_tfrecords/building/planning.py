"""Planning a build on the launcher: what the inputs are, how the output
is cut and described (`dataset_plan`), where it may go; decided before any
pipeline runs, the same on every run of the same inputs.
"""

import dataclasses
import hashlib
import json
import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Union

from beam_tfrecords.building.options import BuildOptions
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.info import (Counts, DatasetInfo, Errors, FileSum,
                                      InputFileInfo, InputsInfo, SplitRuleInfo,
                                      ToolInfo, files_fingerprint)
from beam_tfrecords.core.layout import REPORT_FILE, TFMD_FILE
from beam_tfrecords.core.version import __version__
from beam_tfrecords.encoding.splitting import producible_splits, split_fraction
from beam_tfrecords.inspect.expectations import CheckPlan, load_baseline
from beam_tfrecords.publish.finish import FinishPlan
from beam_tfrecords.publish.publication import Publication
from beam_tfrecords.schema import Schema, spec_to_json
from beam_tfrecords.schema.model import MediaKind, SplitKind
from beam_tfrecords.schema.sizes import parse_size
from beam_tfrecords.schema.spec import aligned_lists
from beam_tfrecords.sinks import Shuffle
from beam_tfrecords.sinks.codec import Codec
from beam_tfrecords.sinks.format_files import codec_of
from beam_tfrecords.sinks.tfds_files import check_tfds, features_json
from beam_tfrecords.transforms.dataset import DatasetPlan
from beam_tfrecords.transforms.grouped import buckets_for

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
  one: Dict[str, str] = {}
  many: Dict[str, str] = {}
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


def _inside(path: str, folder: str) -> bool:
  if "://" in folder:
    return path.startswith(folder.rstrip("/") + "/")
  if "://" in path:
    return False
  real = os.path.realpath(folder)
  return os.path.realpath(path).startswith(real.rstrip(os.sep) + os.sep)


def check_inputs_outside(output: str, plan, schema: Schema) -> None:
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
  """A fingerprint of the input files (core.info.files_fingerprint)."""
  return files_fingerprint((f.path, f.size, f.mtime) for f in files)


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
    parsed = parse_size(max_shard_size)
    if parsed is None or parsed < MIN_SHARD_BYTES:
      raise InputError(f"--max-shard-size must be a size of at least 1KiB "
                       f"such as 256MB or 1GiB; got {max_shard_size!r}")
    limit = parsed
  share = expected_shares(schema)
  ratio = OUTPUT_BYTES_PER_INPUT_BYTE.get(input_format,
                                          DEFAULT_OUTPUT_BYTES_PER_INPUT_BYTE)
  shards: Dict[str, int] = {}
  max_bytes: Dict[str, Optional[int]] = {}
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


def listed_inputs(plan) -> List[InputFileInfo]:
  """The input files for dataset.json; image folders as one entry per
  folder (a million images would make a 150 MB dataset.json)."""
  if plan.format != "images":
    return [InputFileInfo(f.path, f.size, f.mtime) for f in plan.files]
  folders: Dict[str, dict] = {}
  for unit in plan.units:
    entry = folders.setdefault(unit.path, {"path": unit.path, "bytes": 0,
                                           "images": 0})
    entry["images"] += unit.end - unit.start
  for f in plan.files:
    for root, entry in folders.items():
      if f.path.startswith(root.rstrip("/") + "/"):
        entry["bytes"] += f.size
  return [InputFileInfo(e["path"], e["bytes"], images=e["images"])
          for e in folders.values()]


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
      if not plan.format_options["classes"]:
        raise InputError(f"{schema.path}: features.{m.name}.vocabulary: "
                         "auto found no "
                         "class folders (images in sub-folders of the input "
                         "folder)")
      options["values"] = declared["vocabulary"] = list(
          plan.format_options["classes"])
    base_dir = options.get("base_dir")
    if base_dir and "://" not in base_dir and not os.path.isabs(base_dir):
      options["base_dir"] = declared["base_dir"] = os.path.abspath(base_dir)
    media.append(dataclasses.replace(m, options=options, declared=declared))
  return dataclasses.replace(schema, media=tuple(media))


def build_key(schema: Schema, plan, fingerprint: str,
              build_options: Dict[str, Any]) -> str:
  """What decides a build's output: the schema, the input files (their
  `input_fingerprint`), the format and its options, the build options as
  given, and the tool's version."""
  digest = hashlib.blake2b(digest_size=16)
  digest.update(json.dumps({
      "schema": schema.to_dict(),
      "inputs": fingerprint,
      "format": plan.format,
      "format_options": {k: v for k, v in plan.format_options.items()
                         if k not in ("column_names", "scalar_columns")},
      "options": build_options, "version": __version__,
  }, sort_keys=True, default=str).encode("utf-8"))
  return digest.hexdigest()


def _shards(schema: Schema, plan, opts: BuildOptions):
  """(ShardPlan, Shuffle or None) of the build, its options checked."""
  input_bytes = sum(f.size for f in plan.files)
  shards = shard_plan(schema, opts.num_shards, opts.max_shard_size,
                      input_bytes, plan.format)
  opts.check_sink_options()
  if opts.tfds:
    check_tfds(schema)
  if opts.sink != "deterministic" or not opts.shard_format.gzip:
    # WriteToTFRecord (and every format but gzip TFRecord: uncompressed
    # TFRecords, ArrayRecord) writes shards.shards files, however large.
    shards = ShardPlan(shards.shards, dict.fromkeys(shards.shards))
  opts.check_shuffle_seed()
  shuffle = None if opts.shuffle_seed is None else Shuffle(
      opts.shuffle_seed, shuffle_buckets(schema, shards.shards, input_bytes))
  return shards, shuffle


def _codec(opts: BuildOptions) -> Codec:
  """How the record shards are written (their format's codec)."""
  return codec_of(opts.shard_format, opts.writer_options)


def _compression(opts: BuildOptions) -> str:
  """dataset.json's `compression` (core.info.DatasetInfo)."""
  fmt = opts.shard_format
  if fmt.compression is not None:
    return fmt.compression
  assert fmt.compression_of is not None
  return fmt.compression_of(opts.writer_options)


def dataset_plan(schema: Schema, plan, opts: BuildOptions,
                 publication: Publication, inputs: InputsInfo,
                 user_fn) -> DatasetPlan:
  """How the dataset of these inputs is cut and described."""
  shards, shuffle = _shards(schema, plan, opts)
  input_bytes = sum(f.size for f in plan.files)
  aligned = aligned_lists(schema)
  planned = DatasetInfo(
      name=schema.name,
      record=schema.record.value,
      schema=schema.to_dict(),
      feature_spec=spec_to_json(schema),
      compression=_compression(opts),
      file_format=opts.shard_format.name if opts.shard_format.own else None,
      inputs=inputs,
      split_rule=SplitRuleInfo(schema.splits.kind.value,
                               tuple(schema.splits.names),
                               schema.splits.to_dict()),
      options=opts.described(
          shards.shards, shards.max_bytes,
          shuffle.buckets if shuffle else None, user_fn and user_fn.name,
          {k: v for k, v in plan.format_options.items()
           if k not in ("column_names", "scalar_columns", "classes")}),
      vocabularies={m.name: m.options["values"] for m in schema.media
                    if m.kind is MediaKind.VOCABULARY},
      statistics_of=(
          "rows read into steps (group_by: before max_length policies and "
          "group rejections, whose rows errors/ lists)"
          if schema.group_by else "the written records"),
      tool=ToolInfo("beam-tfrecords", __version__),
      tfmd_schema=TFMD_FILE,
      # Staged with the output (publish.staging), these bytes.
      checksums={TFMD_FILE: FileSum.of(publication.tfmd.encode("utf-8"))},
      build_key=publication.key,
      # Written in the staging folder, published with the rest.
      report=REPORT_FILE if opts.report else None,
      # The label feature(s) (load(as_supervised=True)); only when named,
      # so that other datasets' dataset.json stays as it was.
      label=tuple(schema.label) if schema.label else None,
      # Features read from the same list of objects (same length in every
      # record): {list path: [feature, ...]}; only when there are some.
      aligned_lists=aligned or None,
      # Known after the run (publish.commit.Commit).
      splits={}, counts=Counts(0, 0, 0, 0, 0), errors=Errors(0))
  return DatasetPlan(
      staging=publication.staging, shards=shards, sink=opts.sink,
      codec=_codec(opts),
      gzip_level=opts.gzip_level, shuffle=shuffle,
      member_bytes=opts.member_bytes,
      statistics=opts.statistics,
      error_shards=max(1, min(max(shards.shards.values()),
                              -(-input_bytes // ERRORS_INPUT_BYTES))),
      planned=planned,
      buckets=buckets_for(input_bytes),
      finish=FinishPlan(
          publication=publication,
          max_bad_rows=opts.max_bad_rows,
          max_bad_fraction=opts.max_bad_fraction,
          producible=tuple(producible_splits(schema.splits)),
          analyze_split=(schema.transform.analyze_split
                         if schema.transform is not None else None),
          on_anomaly=opts.on_anomaly or "fail",
          tfds_features=features_json(schema) if opts.tfds else None,
          croissant=opts.croissant, live=opts.live_dataset,
          epoch=os.environ.get("SOURCE_DATE_EPOCH")),
      checks=(CheckPlan(schema, *load_baseline(opts.baseline, schema))
              if schema.expects else None))

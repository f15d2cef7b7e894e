"""A build's options, declared once: `BuildOptions`.

    btr.build("schemas/movies.yaml", "data/*.csv", "out/movies",
              build_options=btr.BuildOptions(num_shards=3,
                                             max_bad_fraction=0.05))

Each field carries its command-line flag and help (`add_arguments` makes
the `build` command's flags from them, and docs/cli.md is generated from
that parser), whether it enters the build key (`key()`), and its group
(shards, writing, contents, thresholds, publishing: the CLI's help
sections; `.shards` and `.thresholds` give two of them as values).
`build()` and `WriteDataset` take a `build_options=` and, as before, each
option as a keyword (`build(..., num_shards=3)`); `with_keywords` checks
those names against the declaration.
"""

import argparse
import dataclasses
import difflib
from typing import (Any, Dict, Mapping, NamedTuple, Optional, Sequence,
                    Union)

from beam_tfrecords.core.array_record_files import DEFAULT_OPTIONS
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.info import OptionsInfo
from beam_tfrecords.core.members import MEMBER_CAP
from beam_tfrecords.core.shard_formats import (TFRECORD, TFRECORD_GZIP,
                                               TFRECORD_PLAIN, ShardFormat,
                                               file_formats, named)
from beam_tfrecords.schema import Schema
from beam_tfrecords.schema.card_section import missing_for_croissant
from beam_tfrecords.schema.model import ON_ANOMALY
from beam_tfrecords.schema.sizes import parse_size

__all__ = ["BuildOptions", "ShardOptions", "Thresholds", "SINK_NAMES",
           "CROISSANT_MODES",
           "GROUPS", "add_arguments"]

SINK_NAMES = ("deterministic", "beam")
# --croissant's values.
CROISSANT_MODES = ("auto", "required", "off")

# The groups, in the order the CLI's help shows them: (name, title).
GROUPS = (("shards", "shards"), ("writing", "writing"),
          ("contents", "contents"),
          ("thresholds", "rejected rows"),
          ("checks", "expectations (the schema's expect: sections)"),
          ("publishing", "publishing"),
          ("reuse", "reusing finished work (resume, --cache)"))


def _num_shards(text: str) -> Union[int, Dict[str, int]]:
  """"8" -> 8; "train=8,eval=1" -> {"train": 8, "eval": 1}."""
  try:
    if "=" not in text:
      return int(text)
    out = {}
    for item in text.split(","):
      name, _, n = item.partition("=")
      out[name.strip()] = int(n)
    return out
  except ValueError:
    raise argparse.ArgumentTypeError(
        f"{text!r}: give a number (8) or split=number pairs "
        "(train=8,eval=1)") from None


def _size(text: str) -> int:
  size = parse_size(text)
  if size is None:
    raise argparse.ArgumentTypeError(
        f"{text!r}: give a size such as 256MB, 1GiB or 1000000 (bytes)")
  return size


def _option(default: Any, group: str, help: str, *,  # pylint: disable=redefined-builtin
            key: str = "always", **cli: Any) -> Any:
  """A field of BuildOptions with its declaration.

  Args:
    group: one of GROUPS.
    help: the flag's help (docs/cli.md shows it).
    key: "always": in the build key; "changed": in it only when not the
      default (options added later, so that earlier datasets keep their
      key); "never": does not change what is built.
    cli: argparse's add_argument keywords (type, choices, metavar, flag:
      the flag when not --<name>).
  """
  return dataclasses.field(default=default, metadata={
      "group": group, "help": help, "key": key, "cli": cli})


# --compression's values (TFRecord shards).
COMPRESSIONS = ("gzip", "none")


class ShardOptions(NamedTuple):
  """How the splits are cut into files."""
  num_shards: Union[None, int, Mapping[str, int]]
  max_shard_size: Union[None, int, str]


class Thresholds(NamedTuple):
  """When rejected rows fail the build (None: not given)."""
  max_bad_rows: Optional[int]
  max_bad_fraction: Optional[float]


@dataclasses.dataclass(frozen=True)
class BuildOptions:
  """How a dataset is written: the same for build(), WriteDataset and the
  command line (the flag of each field is --num-shards for num_shards).

  Attributes:
    num_shards: files per split: one number for every split, or a dict
      split -> number; splits without one get files of at most
      `max_shard_size` (see planning.shard_plan).
    max_shard_size: the largest file, in bytes or as text (256MB, 1GiB);
      None: 256 MiB.
    shuffle_seed: None: records in input order; a number: records spread
      over the shards at random and written in a random order, the same
      for the same seed (see sinks.shards.Shuffle).
    sink: "deterministic" (byte-identical files on every run) or "beam"
      (Beam's WriteToTFRecord: same format, runner-decided placement;
      build() only).
    gzip_level: None: ISA-L's fast deflate; 1-9: zlib at that level
      (smaller files, slower). Every choice writes standard gzip.
    member_size: the framed bytes of one gzip member at most, in bytes or
      as text (256KiB): where random access can enter a shard (its
      index); smaller members are entered faster and compress worse.
      None: 256 KiB (+1.8% in shard size on the flights).
    compression: "gzip" or "none" for TFRecord shards (None: gzip, but
      uncompressed with --tfds). Uncompressed shards are read at random
      one record at a time (DALI's index beside each), at about 7 times
      the size.
    tfds: a dataset TensorFlow Datasets reads: uncompressed shards (or
      ArrayRecord ones) and TFDS's metadata files (sinks.tfds_files).
    file_format: "tfrecord" (TFRecord shards), or a format of its own
      (core.shard_formats): "array_record" (ArrayRecord shards, one file
      per shard, for random access: sinks.format_files; the array_record
      extra).
    array_record_options: array-record's writer options for ArrayRecord
      shards; the default, group_size:1, is what Grain's random access
      needs.
    report: write report.html into the dataset (beam_tfrecords.inspect.report):
      one HTML page with the splits, rejected rows and per-feature plots.
    croissant: "auto" (croissant.json from what the schema's card:
      gives), "required" (the same; a build whose schema lacks the license
      or description fails before reading) or "off" (publish.croissant).
    live_dataset: one build of a series (the CLI sets it for a scheduled
      build): croissant.json's isLiveDataset.
    statistics: per-feature statistics in dataset.json and statistics.pb
      (computed in the encoding pass).
    max_bad_rows, max_bad_fraction: fail instead of publishing when more
      rows (or a larger fraction of the rows read) are rejected; None: the
      schema's value. With neither given anywhere, the build fails when
      more than 1% of the rows read are rejected, or when rows were
      rejected and a split got no records (give max_bad_fraction=1.0 to
      publish whatever was rejected).
    baseline: a finished dataset to check drift and records_change
      against (None: the schema's `baseline:`, else none).
    on_anomaly: "fail" (an anomaly fails the build; nothing is published)
      or "warn" (published, the anomalies recorded); None: the schema's
      `on_anomaly:`, else "fail".
    overwrite: replace an existing finished dataset.
    append: add the inputs to the finished dataset in the output as new
      shard files (publish.append).
    force: build even when the output holds a finished dataset of the same
      inputs (paths, sizes, modification times), schema, options and tool
      version; without it such a build returns at once, up to date
      (build() only: WriteDataset always builds).
    resume: keep each finished read unit's results in the output's
      .units/ until the build's checks pass, so that a rerun after a kill
      or a failed job reuses them (core.unit_cache); on by default.
    cache: a folder (local, gs://, s3://) keeping finished units
      across builds.
    cache_size: the cache folder's size bound (default 20 GiB).
  """
  num_shards: Union[None, int, Mapping[str, int]] = _option(
      None, "shards", "shard files per split: exactly N for every split, or "
      "train=8,eval=1 (default: as many as --max-shard-size needs)",
      type=_num_shards)
  max_shard_size: Union[None, int, str] = _option(
      None, "shards", "the largest shard file, e.g. 256MB or 1GiB, for the "
      "splits --num-shards does not fix (default: 256MiB)", type=_size)
  shuffle_seed: Optional[int] = _option(
      None, "writing", "shuffle the records (seeded: the same seed gives the "
      "same files); default: input order", type=int)
  sink: str = _option(
      "deterministic", "writing", "deterministic: byte-identical shard files "
      "on every run (default); beam: Beam's WriteToTFRecord (same format, "
      "the runner places the records)", choices=list(SINK_NAMES))
  gzip_level: Optional[int] = _option(
      None, "writing", "compress with zlib at this level (smaller files, "
      "slower); default: ISA-L's fast deflate", type=int,
      choices=range(1, 10), metavar="1-9")
  member_size: Union[None, int, str] = _option(
      None, "writing", "framed bytes per gzip member at most, e.g. 64KiB "
      "or 1MiB: where random access enters a shard (smaller: faster "
      "random reads, larger files); default: 256KiB", type=_size,
      key="changed")
  tfds: bool = _option(
      False, "writing", "a dataset TensorFlow Datasets reads "
      "(tfds.builder_from_directory): uncompressed shards and TFDS's "
      "dataset_info.json and features.json; Example schemas whose features "
      "are always there", key="changed")
  compression: Optional[str] = _option(
      None, "writing", "gzip: gzip TFRecord shards (default); none: "
      "uncompressed ones (several times larger: docs/performance.md, "
      "Random access, measures it; each "
      "record read at random by one ranged read, and by NVIDIA DALI with "
      "the index written beside it)", choices=list(COMPRESSIONS),
      key="changed")
  file_format: str = _option(
      "tfrecord", "writing", "tfrecord: TFRecord shards (default); "
      "array_record: ArrayRecord shards, one file per shard, that Grain "
      "(ArrayRecordDataSource) and TFDS (as_data_source, with --tfds) read "
      "at random (needs the array_record extra)",
      choices=file_formats(), key="changed")
  array_record_options: str = _option(
      DEFAULT_OPTIONS, "writing", "array-record's writer options for "
      "--file-format array_record, e.g. group_size:1,brotli:6 (default: "
      "group_size:1, a record per chunk, which Grain's random access "
      "needs; the chunks are compressed with zstd:3 unless told)",
      key="changed", metavar="OPTIONS")
  report: bool = _option(
      True, "contents", "do not write report.html into the dataset",
      key="changed", flag="--no-report")
  croissant: str = _option(
      "auto", "contents", "auto: write croissant.json (MLCommons Croissant "
      "1.1: every file with its SHA-256, the splits, the features, a "
      "Parquet preview of each split's first records) with what the "
      "schema's card: gives; required: the same, and fail before reading "
      "when the license or description it needs is missing; off: no "
      "croissant.json, no preview", choices=list(CROISSANT_MODES),
      key="changed")
  live_dataset: bool = _option(
      False, "contents", "this build is one of a series (a scheduled "
      "build's --date / --span set it): croissant.json says "
      "isLiveDataset", key="never")
  statistics: bool = _option(
      True, "contents", "leave the per-feature statistics out of "
      "dataset.json (skips their pass over every value, and "
      "statistics.pb)",
      flag="--no-statistics")
  max_bad_rows: Optional[int] = _option(
      None, "thresholds", "fail (publish nothing) when more rows are "
      "rejected", type=int)
  max_bad_fraction: Optional[float] = _option(
      None, "thresholds", "fail when a larger fraction of the rows read is "
      "rejected, e.g. 0.05 (1 publishes whatever is rejected). Default, "
      "with neither flag nor schema key: fail above 0.01, or when rows were "
      "rejected and a split got no records", type=float)
  baseline: Optional[str] = _option(
      None, "checks", "a finished dataset to compare with (drift, "
      "records_change): its folder, or previous: the newest earlier "
      "date or span of the output's placeholders; default: the schema's "
      "baseline:, else none", key="changed", metavar="DIR|previous")
  on_anomaly: Optional[str] = _option(
      None, "checks", "fail: an anomaly fails the build, nothing is "
      "published (the default, or the schema's on_anomaly:); warn: "
      "publish anyway, the anomalies recorded in dataset.json, "
      "anomalies.json and the report", key="changed",
      choices=list(ON_ANOMALY))
  overwrite: bool = _option(
      False, "publishing", "replace an existing finished dataset",
      key="never")
  force: bool = _option(
      False, "publishing", "build even if the output is up to date (same "
      "inputs, schema and options as its last build)", key="never")
  append: bool = _option(
      False, "publishing", "add these inputs to the finished dataset in "
      "the output as new shard files after its own, without rewriting or "
      "copying its shards (hard links keep them; on GCS and S3 the store "
      "copies them); the schema and record options must be the dataset's, "
      "and no input may be one it holds; counts and statistics are merged",
      key="changed")
  resume: bool = _option(
      True, "reuse", "keep each finished read unit's results in the "
      "output's .units/ until the build's checks pass, so that the same "
      "command after a kill or a failed job reads, encodes and compresses "
      "only the rest (on by default: it costs no measurable CPU, and its "
      "part files are links of the build's own; --no-resume computes "
      "everything and keeps nothing)", key="never", flag="--no-resume")
  cache: Optional[str] = _option(
      None, "reuse", "a folder (local, gs://, s3://) that keeps every "
      "finished read unit's results across builds, so a rebuild computes only new or "
      "changed inputs (`beam-tfrecords cache` lists and clears it); "
      "default: none", key="never", metavar="DIR")
  cache_size: Union[None, int, str] = _option(
      None, "reuse", "the --cache folder's size bound, e.g. 50GiB: least "
      "recently used units are evicted after a build (default: 20GiB)",
      type=_size, key="never")

  @property
  def shards(self) -> ShardOptions:
    return ShardOptions(self.num_shards, self.max_shard_size)

  @property
  def thresholds(self) -> Thresholds:
    return Thresholds(self.max_bad_rows, self.max_bad_fraction)

  @classmethod
  def names(cls) -> Sequence[str]:
    return [f.name for f in dataclasses.fields(cls)]

  @classmethod
  def with_keywords(cls, build_options: Optional["BuildOptions"],
                    keywords: Mapping[str, Any],
                    caller: str = "build()") -> "BuildOptions":
    """`options` (default: the defaults) with these fields replaced.

    Raises:
      TypeError: a keyword that is no option (as Python says it).
    """
    if build_options is not None and not isinstance(build_options,
                                                    BuildOptions):
      raise TypeError(f"{caller}: build_options must be a btr.BuildOptions, "
                      f"got {type(build_options).__name__}")
    names = cls.names()
    for name in keywords:
      if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        raise TypeError(f"{caller} got an unexpected keyword argument "
                        f"{name!r}" + (f"; did you mean {close[0]!r}?"
                                       if close else ""))
    return dataclasses.replace(build_options or cls(), **keywords)

  @classmethod
  def from_args(cls, args: argparse.Namespace) -> "BuildOptions":
    """The options of a parsed `build` command line (see add_arguments)."""
    return cls(**{name: getattr(args, name) for name in cls.names()})

  def key(self) -> Dict[str, Any]:
    """The options that decide what is built, as the build key takes them
    (as given, before the schema's defaults)."""
    out: Dict[str, Any] = {}
    for f in dataclasses.fields(self):
      value = getattr(self, f.name)
      if f.name in ("max_shard_size", "member_size") and value is not None:
        value = parse_size(value)
      if f.metadata["key"] == "always" or (
          f.metadata["key"] == "changed" and value != f.default):
        out[f.name] = value
    return out

  def described(self, shards: Mapping[str, int],
                max_shard_bytes: Mapping[str, Optional[int]],
                shuffle_buckets: Optional[Mapping[str, int]],
                preprocess: Optional[str],
                format_options: Mapping[str, Any]) -> OptionsInfo:
    """dataset.json's `options`: these options (resolved) as they shaped
    the output, with what the plan made of them (shards per split, the
    shuffle's buckets), the preprocess function's name and the input
    format's options."""
    return OptionsInfo(
        num_shards=dict(shards), max_shard_bytes=dict(max_shard_bytes),
        sink=self.sink, shuffle_seed=self.shuffle_seed,
        shuffle_buckets=(None if shuffle_buckets is None
                         else dict(shuffle_buckets)),
        gzip_level=self.gzip_level, statistics=self.statistics,
        max_bad_rows=self.max_bad_rows,
        max_bad_fraction=self.max_bad_fraction, preprocess=preprocess,
        format_options=dict(format_options), tfds=self.tfds,
        member_bytes=self.member_bytes if (
            self.sink == "deterministic" and self.shard_format.gzip)
        else None,
        array_record_options=(self.writer_options
                              if self.shard_format.own else None))

  @property
  def shard_format(self) -> ShardFormat:
    """The shards' format (core.shard_formats): --file-format's; TFRecord
    shards are gzip, or uncompressed with --compression none or --tfds."""
    if self.file_format != TFRECORD:
      return named(self.file_format)
    return TFRECORD_PLAIN if self.compression == "none" or (
        self.tfds and self.compression is None) else TFRECORD_GZIP

  @property
  def writer_options(self) -> str:
    """A format of its own's writer options: --array-record-options as
    given, else the format's default."""
    if self.array_record_options != DEFAULT_OPTIONS:
      return self.array_record_options
    return self.shard_format.default_options

  @property
  def member_bytes(self) -> int:
    """member_size in bytes (core.members.MEMBER_CAP when not given)."""
    if self.member_size is None:
      return MEMBER_CAP
    size = parse_size(self.member_size)
    if size is None or not 1024 <= size <= 1 << 30:
      raise InputError(f"--member-size must be a size from 1KiB to 1GiB "
                       f"such as 256KiB; got {self.member_size!r}")
    return size

  def resolved(self, schema: Schema) -> "BuildOptions":
    """The thresholds the schema sets where none was given; every option
    checked.

    Raises:
      InputError: an option out of range, or options that do not go
        together.
    """
    rows = self.max_bad_rows if self.max_bad_rows is not None \
        else schema.max_bad_rows
    fraction = self.max_bad_fraction if self.max_bad_fraction is not None \
        else schema.max_bad_fraction
    if rows is not None and (not isinstance(rows, int) or rows < 0):
      raise InputError(f"--max-bad-rows must be a whole number >= 0, got "
                       f"{rows!r}")
    if fraction is not None and not 0 <= fraction <= 1:
      raise InputError(f"--max-bad-fraction must be between 0 and 1, got "
                       f"{fraction!r}")
    if self.gzip_level is not None and self.gzip_level not in range(1, 10):
      raise InputError(f"--gzip-level must be 1-9 (zlib), got "
                       f"{self.gzip_level!r}")
    if self.sink not in SINK_NAMES:
      raise InputError(f"unknown sink {self.sink!r}; choose one of "
                       f"{sorted(SINK_NAMES)}")
    if schema.transform is not None and self.sink != "deterministic":
      raise InputError("a schema with transform: writes with the "
                       "deterministic sink; drop --sink beam")
    self._check_file_format(schema)
    self._check_croissant(schema)
    return dataclasses.replace(self, max_bad_rows=rows,
                               max_bad_fraction=fraction,
                               **self._checks(schema))

  @property
  def uncompressed(self) -> bool:
    """Whether the shards are uncompressed TFRecords (--compression none,
    or --tfds's)."""
    return self.shard_format is TFRECORD_PLAIN

  def _check_croissant(self, schema: Schema) -> None:
    if self.croissant not in CROISSANT_MODES:
      raise InputError(f"--croissant must be one of "
                       f"{', '.join(CROISSANT_MODES)}; got {self.croissant!r}")
    missing = missing_for_croissant(schema.card, schema.description)
    if self.croissant == "required" and missing:
      raise InputError(
          f"--croissant required: the schema {schema.path} lacks what a "
          "Croissant description needs (nothing was read):\n"
          + "\n".join("  " + m for m in missing)
          + "\n(or build with --croissant auto, which leaves them out)")

  def _check_file_format(self, schema: Schema) -> None:
    if self.compression is not None:
      if self.compression not in COMPRESSIONS:
        raise InputError(f"--compression must be one of {list(COMPRESSIONS)}"
                         f", got {self.compression!r}")
      own = self._own_format()
      if own is not None:
        raise InputError(f"--compression is for TFRecord shards; "
                         f"{own.shards_text} are {own.writer_note}: drop "
                         "--compression")
      if self.tfds and self.compression == "gzip":
        raise InputError("--tfds writes uncompressed TFRecord shards (what "
                         "TFDS reads): drop --compression gzip")
      if self.compression == "none":
        for given, flag in ((self.sink != "deterministic", "--sink beam"),
                            (self.gzip_level is not None, "--gzip-level"),
                            (self.member_size is not None, "--member-size"),
                            (self.max_shard_size is not None,
                             "--max-shard-size"),
                            (schema.transform is not None,
                             "the schema's transform: section")):
          if given:
            raise InputError(
                "--compression none writes one uncompressed TFRecord file "
                f"per shard with the deterministic sink: drop {flag}"
                + (" (--num-shards sets the number of files)"
                   if flag == "--max-shard-size" else ""))
    fmt = self.shard_format  # (an unknown --file-format is refused here)
    if not fmt.own:
      if self.array_record_options != DEFAULT_OPTIONS:
        owners = " or ".join(file_formats()[1:])
        raise InputError("--array-record-options is for --file-format "
                         f"{owners}: add that, or drop the options")
      return
    if schema.transform is not None and not fmt.transformable:
      raise InputError("a schema with transform: writes TFRecord shards "
                       "(TensorFlow Transform reads them back); drop "
                       f"--file-format {fmt.name}")
    if fmt.check_options is not None:
      fmt.check_options(self.writer_options)

  def _own_format(self) -> Optional[ShardFormat]:
    """The format of its own --file-format names, None for TFRecord (or
    a word no format has: said by _check_file_format)."""
    if self.file_format == TFRECORD or self.file_format not in \
        file_formats():
      return None
    return named(self.file_format)

  def _checks(self, schema: Schema) -> Dict[str, Any]:
    """baseline and on_anomaly with the schema's defaults, checked."""
    baseline = self.baseline if self.baseline is not None \
        else schema.baseline
    on_anomaly = self.on_anomaly or schema.on_anomaly or "fail"
    if on_anomaly not in ON_ANOMALY:
      raise InputError(f"--on-anomaly must be one of {list(ON_ANOMALY)}, "
                       f"got {on_anomaly!r}")
    if not schema.expects and (self.baseline or self.on_anomaly):
      raise InputError(
          "--baseline / --on-anomaly check the schema's expectations, but "
          f"{schema.path} has no expect: section; add some "
          "(docs/schema.md: Expectations) or drop the flag")
    if schema.expects and not self.statistics:
      raise InputError("the schema's expect: sections are checked against "
                       "the statistics: drop --no-statistics")
    return {"baseline": baseline, "on_anomaly": on_anomaly}

  def check_sink_options(self) -> None:
    """What only the deterministic sink can do (checked after the shard
    plan, whose errors come first), and what --tfds and ArrayRecord
    shards cannot."""
    fmt = self.shard_format
    if fmt.own:
      for given, flag in ((self.sink != "deterministic", "--sink beam"),
                          (self.gzip_level is not None, "--gzip-level"),
                          (self.member_size is not None, "--member-size"),
                          (self.max_shard_size is not None,
                           "--max-shard-size")):
        if given:
          raise InputError(
              f"--file-format {fmt.name} writes one {fmt.label} file per "
              f"shard with the deterministic sink, {fmt.writer_note}: drop "
              f"{flag}" + (" (--num-shards sets the number of files)"
                           if flag == "--max-shard-size" else ""))
    if self.tfds:
      for given, flag in ((self.sink != "deterministic", "--sink beam"),
                          (self.shuffle_seed is not None, "--shuffle-seed"),
                          (self.gzip_level is not None, "--gzip-level"),
                          (self.max_shard_size is not None,
                           "--max-shard-size"),
                          (self.member_size is not None, "--member-size")):
        if given:
          shards, shuffle = fmt.label, fmt.tfds_shuffle
          raise InputError(
              f"--tfds writes {shards} shards in the deterministic sink's "
              f"order, one file per shard: drop {flag} (TFDS shuffles when "
              f"it reads: {shuffle})")
    if self.sink == "deterministic":
      return
    if self.member_size is not None:
      raise InputError("--member-size works with the deterministic sink "
                       "(Beam's WriteToTFRecord writes one gzip stream per "
                       "file, without an index); drop --sink beam")
    if self.max_shard_size is not None:
      raise InputError("--max-shard-size works with the deterministic sink "
                       "(Beam's WriteToTFRecord cannot bound file sizes); "
                       "drop --sink beam, or give --num-shards")
    if self.shuffle_seed is not None:
      raise InputError("--shuffle-seed works with the deterministic sink; "
                       "drop --sink beam")

  def check_shuffle_seed(self) -> None:
    seed = self.shuffle_seed
    if seed is not None and (isinstance(seed, bool)
                             or not isinstance(seed, int)):
      raise InputError(f"--shuffle-seed must be a whole number, got "
                       f"{seed!r}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The `build` command's flags of every BuildOptions field, in groups
  (flag --num-shards for num_shards; a bool option whose default is True
  is turned off by its --no-... flag)."""
  groups = {name: parser.add_argument_group(title)
            for name, title in GROUPS}
  for f in dataclasses.fields(BuildOptions):
    cli = dict(f.metadata["cli"])
    flag = cli.pop("flag", "--" + f.name.replace("_", "-"))
    if f.default is True:
      cli.update(action="store_false")
    elif f.default is False:
      cli.update(action="store_true")
    else:
      cli.update(default=f.default)
    groups[f.metadata["group"]].add_argument(
        flag, dest=f.name, help=f.metadata["help"], **cli)

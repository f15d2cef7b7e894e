"""Shard formats as adapters: each format a dataset's shards can be
written in, with what the build, the readers, the card, croissant.json
and TFDS's files need to know of it, and how its files are read and
written. Callers ask the format and never branch on its name (TFDS's
`file_adapters.py` is the model).

    fmt = of_file("out/train-00000-of-00004.array_record")
    fmt = of_dataset(info)                        # its dataset.json's
    fmt = named("array_record")                   # --file-format's word
    for records in fmt.read(path, expect, check, upto): ...

Three are registered here: gzip TFRecord (the default), uncompressed
TFRecord (`--compression none`, `--tfds`) and ArrayRecord
(`--file-format array_record`). `register_format` adds another: a format
of its own gives `read` (its records, in order), `writer` (a local file's
writer: `write(record)`, `close()`) and, for random access, `open_random`
(a local file's reader: `num_records()`, `read(positions)`, `close()`);
tests/e2e/test_toy_format.py builds and reads one defined in the test
file alone.
"""

import dataclasses
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Optional,
                    Sequence)

from beam_tfrecords.core import array_record_files
from beam_tfrecords.core.errors import InputError, ShardDamagedError

__all__ = ["ShardFormat", "register_format", "unregister_format", "of_file",
           "of_dataset",
           "named", "formats", "file_formats", "fork_safe", "TFRECORD", "TFRECORD_GZIP", "TFRECORD_PLAIN",
           "ARRAY_RECORD"]

# --file-format's word for TFRecord shards (gzip or not: --compression).
TFRECORD = "tfrecord"

# A format's reader: (path, what dataset.json says of the shard (a
# core.shard_reader.Expected), check CRCs and checksums, stop after this
# many records) -> lists of records.
Reader = Callable[[str, Any, bool, Optional[int]], Iterator[Sequence[bytes]]]


@dataclasses.dataclass(frozen=True)
class ShardFormat:
  """One shard format.

  Attributes:
    name: --file-format's word, and dataset.json's `file_format` (which
      stays unset for TFRecord shards, as datasets before formats wrote).
    suffix: the shard files' suffix.
    compression: dataset.json's `compression` for it (None: the format's
      writer options say, `compression_of`).
    label: a word for it in `inspect` ("gzip", "ArrayRecord").
    shards_text: the card's words for its shards.
    media_type: croissant.json's encodingFormat of its files.
    read: its reader (see Reader).
    tf_data: tf.data.TFRecordDataset reads its files (btr.load reads
      them through tf.data; others through `read`).
    tfds_name: TFDS's fileFormat word (None: TFDS cannot read it).
    index: the index beside each shard: "members" (core.shard_index),
      "records" (DALI's) or None.
    gzip: its bytes are gzip members (ShardFiles cuts files between
      them; --member-size, --gzip-level and Beam's sink apply).
    previewed: the finish step writes a Parquet preview of its splits.
    transformable: TensorFlow Transform's outputs can be written in it.
    writer: (local path, writer options) -> a writer of a format of its
      own (None: TFRecord's, sinks.shard_files).
    open_random: (local path) -> a random-access reader of a format of
      its own (None: through `index`).
    compression_of: (writer options) -> dataset.json's compression.
    check_options: (writer options) -> None, or InputError.
    default_options: its writer options when none are given.
    shard_note: what croissant.json adds to a shard's description.
    how_to_read: where to read it, for a TFRecord reader that got one.
    writer_note: what a build's messages say of its writer.
    random_note: (writer options) -> what reading its shards at random
      costs, when more than it should (a warning), or None.
    tfds_shuffle: how TFDS shuffles it when it reads (--tfds).
    fork_safe: its reader works in a process forked from one that had
      loaded it (a DataLoader worker under the default "fork" start
      method); if not, loaders start their workers with "forkserver".
  """
  name: str
  suffix: str
  compression: Optional[str]
  label: str
  shards_text: str
  media_type: str
  read: Reader
  tf_data: bool = False
  tfds_name: Optional[str] = None
  index: Optional[str] = None
  gzip: bool = False
  previewed: bool = False
  transformable: bool = False
  writer: Optional[Callable[[str, str], Any]] = None
  open_random: Optional[Callable[[str], Any]] = None
  compression_of: Optional[Callable[[str], str]] = None
  check_options: Optional[Callable[[str], None]] = None
  default_options: str = ""
  shard_note: str = ""
  how_to_read: str = ""
  writer_note: str = ""
  tfds_shuffle: str = ""
  random_note: Optional[Callable[[str], Optional[str]]] = None
  fork_safe: bool = True

  @property
  def own(self) -> bool:
    """Whether it is a format of its own (not TFRecord framing)."""
    return self.writer is not None


_BY_NAME: Dict[str, ShardFormat] = {}


def register_format(fmt: ShardFormat) -> ShardFormat:
  """Adds a format (a later one of the same name or suffix replaces it:
  a test's toy format)."""
  for other in list(_BY_NAME.values()):
    if other.suffix == fmt.suffix and other.name != fmt.name:
      raise ValueError(f"the suffix {fmt.suffix!r} is {other.name!r}'s")
  _BY_NAME[fmt.name if fmt.own else f"{fmt.name}:{fmt.compression}"] = fmt
  return fmt


def unregister_format(fmt: ShardFormat) -> None:
  """Removes a format register_format added (a test's, when it ends)."""
  key = fmt.name if fmt.own else f"{fmt.name}:{fmt.compression}"
  if _BY_NAME.get(key) is fmt:
    del _BY_NAME[key]


def formats() -> List[ShardFormat]:
  """Every registered format."""
  return list(_BY_NAME.values())


def _tfrecord(path: str, expect: Any, check: bool,
              upto: Optional[int]) -> Iterator[Sequence[bytes]]:
  # (imported here: the command line's --help, which asks for the
  # formats' names, imports no numpy or Arrow)
  from beam_tfrecords.core.shard_reader import read_shard  # pylint: disable=import-outside-toplevel
  return read_shard(path, expect=expect, check=check, upto=upto)


def _array_record(path: str, expect: Any, check: bool,
                  upto: Optional[int]) -> Iterator[List[bytes]]:
  """An ArrayRecord file's records (its reader checks its chunks), a
  list at a time, counted against dataset.json."""
  del check, upto  # (array-record's own checks; read whole)
  n, batch = 0, []
  for record in array_record_files.read_array_record(path):
    batch.append(record)
    if len(batch) == 4096:
      n += len(batch)
      yield batch
      batch = []
  n += len(batch)
  if batch:
    yield batch
  if expect.records is not None and n != expect.records:
    raise ShardDamagedError(
        f"{path}: it holds {n:,} records; its dataset.json lists "
        f"{expect.records:,}. The shard is not the one its build wrote: "
        "restore it or build the dataset again", file=path,
        reason=f"it holds {n:,} records; its dataset.json lists "
        f"{expect.records:,}")


TFRECORD_GZIP = register_format(ShardFormat(
    TFRECORD, ".tfrecord.gz", "GZIP", "gzip", "gzip TFRecord shards",
    "application/x-tfrecord", _tfrecord, tf_data=True, tfds_name=None,
    index="members", gzip=True, previewed=True, transformable=True,
    shard_note=", gzip-compressed TFRecord"))
TFRECORD_PLAIN = register_format(ShardFormat(
    TFRECORD, ".tfrecord", "NONE", "uncompressed",
    "uncompressed TFRecord shards", "application/x-tfrecord", _tfrecord,
    tf_data=True, tfds_name=TFRECORD, index="records", previewed=True,
    tfds_shuffle="as_dataset(shuffle_files=True)"))
ARRAY_RECORD = register_format(ShardFormat(
    array_record_files.ARRAY_RECORD, array_record_files.ARRAY_RECORD_SUFFIX,
    None, "ArrayRecord", "ArrayRecord shards", "application/x-array-record",
    _array_record, tfds_name=array_record_files.ARRAY_RECORD,
    writer=array_record_files.open_writer,
    open_random=array_record_files.open_random,
    compression_of=array_record_files.compression_of,
    check_options=array_record_files.check_options,
    default_options=array_record_files.DEFAULT_OPTIONS,
    how_to_read="beam_tfrecords.core.array_record_files.read_array_record, "
    "Grain's ArrayRecordDataSource or TFDS's as_data_source()",
    writer_note="compressed by array-record (--array-record-options)",
    random_note=array_record_files.random_access_note,
    tfds_shuffle="Grain's shuffle over as_data_source()", fork_safe=False))


def fork_safe(paths: Iterable[str]) -> bool:
  """Whether every one of these shards' formats reads in a forked
  process (ShardFormat.fork_safe)."""
  return all(of_file(p).fork_safe for p in paths)


def of_file(path: str) -> ShardFormat:
  """The format of a shard file, by its suffix: a format of its own's,
  else gzip TFRecord for `.gz`, else uncompressed TFRecord (whose reader
  tells gzip by its first bytes)."""
  own = [f for f in _BY_NAME.values() if f.own and path.endswith(f.suffix)]
  if own:
    return max(own, key=lambda f: len(f.suffix))
  return TFRECORD_GZIP if path.endswith(".gz") else TFRECORD_PLAIN


def named(name: str, compression: Optional[str] = "GZIP") -> ShardFormat:
  """The format --file-format names (TFRecord: gzip unless `compression`
  says NONE).

  Raises:
    InputError: no such format, listing those there are.
  """
  if name == TFRECORD:
    return TFRECORD_PLAIN if compression in ("NONE", "none") \
        else TFRECORD_GZIP
  found = _BY_NAME.get(name)
  if found is None or not found.own:
    raise InputError(f"--file-format must be one of {file_formats()}, got "
                     f"{name!r}")
  return found


def file_formats() -> List[str]:
  """--file-format's words: tfrecord, then the formats of their own in
  the order they were registered."""
  return [TFRECORD] + [f.name for f in formats() if f.own]


def of_dataset(info: Any) -> ShardFormat:
  """The format of a dataset's shards, as its dataset.json says."""
  return named(info.file_format or TFRECORD, info.compression or "GZIP")

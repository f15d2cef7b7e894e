"""How a shard's items become its file's bytes (a Codec): TFRecords in
gzip members, uncompressed TFRecords, the dead letters' JSON lines, and
the writer of a format of its own (sinks.format_files).
"""

from typing import Any, Callable, NamedTuple, Optional

from beam_tfrecords.core.tfrecord_files import frame_records


__all__ = ["Codec", "TFRECORD_GZIP", "TFRECORD_PLAIN", "JSON_LINES",
           "SHARD_SUFFIX"]


SHARD_SUFFIX = ".tfrecord.gz"


class Codec(NamedTuple):
  """How items become file bytes: `frame` turns a list of items into the
  bytes they take in the file; `empty_files`: a codec without gzip writes
  an empty file for an empty shard too. TFRecord codecs (frame_records)
  write an index beside each file: ours (core.shard_index) for gzip, DALI's
  for uncompressed files. `files`: the shard's writer, called with
  ShardFiles' arguments (None: ShardFiles); another one writes the framed
  parts of a codec without gzip into another container
  (sinks.format_files)."""
  suffix: str
  frame: Callable[[Any], bytes]
  gzip: bool
  empty_files: bool = False
  files: Optional[Callable[..., Any]] = None

  @property
  def framed(self) -> bool:
    """Whether items are framed as TFRecords (the ArrayRecord codec's
    too: its writer unframes them). ShardFiles indexes the files of such
    codecs."""
    return self.frame is frame_records


TFRECORD_GZIP = Codec(SHARD_SUFFIX, frame_records, True)
# Uncompressed TFRecords (--compression none, --tfds), every shard written
# (an empty file is an empty TFRecord file, and TFDS expects each shard
# its template names).
TFRECORD_PLAIN = Codec(".tfrecord", frame_records, False, True)


JSON_LINES = Codec(".jsonl", lambda lines: "".join(
    line + "\n" for line in lines).encode("utf-8"), False)

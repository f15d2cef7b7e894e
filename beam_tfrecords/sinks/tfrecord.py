"""WriteSplit: serialized records -> gzip TFRecord shards of one split.

Files are OUTPUT/SPLIT-SSSSS-of-NNNNN.tfrecord.gz, written by Beam's
`WriteToTFRecord` (temporary files, then finalize: safe under retries on
every runner). Each finished shard is then counted (and so read back once)
on the workers; the output is one dict per shard for dataset.json.
"""

from typing import Optional

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecords.records import count_tfrecords

__all__ = ["WriteSplit", "SHARD_SUFFIX", "shard_prefix"]

SHARD_SUFFIX = ".tfrecord.gz"
SHARD_TEMPLATE = "-SSSSS-of-NNNNN"


def shard_prefix(output: str, split: str) -> str:
  return FileSystems.join(output, split)


def _shard_info(path: str, split: str) -> dict:
  size = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
  return {"kind": "shard", "split": split, "file": path.rsplit("/", 1)[-1],
          "records": count_tfrecords(path), "bytes": size}


class WriteSplit(beam.PTransform):
  """Writes one split's records as gzip TFRecord shards.

  Args:
    output: the dataset directory.
    split: the split name ("train", ...).
    num_shards: the number of files, or None to let the runner decide
      (a fixed number makes Beam group all records first).
  """

  def __init__(self, output: str, split: str, num_shards: Optional[int]):
    super().__init__()
    self._output = output
    self._split = split
    self._num_shards = num_shards or 0

  def expand(self, records):
    split = self._split
    return (records
            # bytes (a serialized record)
            | "Write" >> beam.io.WriteToTFRecord(
                shard_prefix(self._output, split),
                file_name_suffix=SHARD_SUFFIX,
                num_shards=self._num_shards,
                shard_name_template=SHARD_TEMPLATE,
                compression_type=CompressionTypes.GZIP)
            # final shard path
            | "CountShard" >> beam.Map(_shard_info, split))
            # {"split", "file", "records", "bytes"}

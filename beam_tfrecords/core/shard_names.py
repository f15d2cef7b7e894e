"""A split's shard file names, made, parsed and globbed by one template.

The template is Beam's WriteToTFRecord's and TFDS's,
`<split>-<shard:05d>-of-<num_shards:05d><suffix>`
(`train-00000-of-00004.tfrecord.gz`), kept in one place as TFDS's
ShardedFileTemplate keeps its own.

    SHARDS.name("train", 0, 4, ".tfrecord.gz")  # train-00000-of-00004.tfrecord.gz
    SHARDS.suffix_of("train-00000-of-00004.tfrecord.gz")  # .tfrecord.gz
    SHARDS.glob("train", ".tfrecord.gz")        # train-*-of-*.tfrecord.gz

A shard staged in several files (`--max-shard-size`) has its later files
marked `-rollNNNN` until the commit names them
(sinks.shards.finish_shard_names).
"""

import dataclasses
import re

__all__ = ["ShardTemplate", "SHARDS", "shard_name", "rolled_name"]


@dataclasses.dataclass(frozen=True)
class ShardTemplate:
  """The shard names of a split.

  Attributes:
    digits: the shard number's and count's width.
    beam: the same template as WriteToTFRecord's shard_name_template.
    tfds: the same template as TFDS's filepathTemplate (its FILEFORMAT
      is the suffix without its dot).
  """
  digits: int = 5
  beam: str = "-SSSSS-of-NNNNN"
  tfds: str = "{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}"

  def name(self, split: str, shard: int, num_shards: int,
           suffix: str) -> str:
    """Shard `shard` of `num_shards`."""
    width = self.digits
    return f"{split}-{shard:0{width}d}-of-{num_shards:0{width}d}{suffix}"

  def rolled(self, split: str, shard: int, num_shards: int, roll: int,
             suffix: str) -> str:
    """The staged name of a shard's file number `roll`: the shard's own
    name for the first, a marked one for the files after it (Commit
    renames them all to final names)."""
    name = self.name(split, shard, num_shards, suffix)
    if roll == 0:
      return name
    return f"{name[:-len(suffix)] if suffix else name}-roll{roll:04d}{suffix}"

  def suffix_of(self, name: str) -> str:
    """The suffix of a shard's name (what follows `-of-NNNNN`).

    Raises:
      ValueError: not a shard name of this template.
    """
    found = re.match(r".*-of-[0-9]+(.*)$", name, re.S)
    if found is None:
      raise ValueError(f"{name!r} is not a shard name (<split>-NNNNN-of-"
                       "NNNNN<suffix>)")
    return found.group(1)

  def glob(self, split: str, suffix: str) -> str:
    """A glob of every shard of `split` (its split as given: escape it
    for a glob where it may hold glob characters)."""
    return f"{split}-*-of-*{suffix}"


SHARDS = ShardTemplate()


def shard_name(prefix: str, shard: int, num_shards: int, suffix: str) -> str:
  """SHARDS.name (kept for the callers that name files by it)."""
  return SHARDS.name(prefix, shard, num_shards, suffix)


def rolled_name(split: str, shard: int, num_shards: int, roll: int,
                suffix: str) -> str:
  """SHARDS.rolled."""
  return SHARDS.rolled(split, shard, num_shards, roll, suffix)

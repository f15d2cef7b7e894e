"""A split's shard file names, Beam's WriteToTFRecord's and TFDS's
template: `<split>-<shard:05d>-of-<num_shards:05d><suffix>`; a shard
staged in several files (`--max-shard-size`) has its later files marked
`-rollNNNN` until the commit names them (sinks.shards.finish_shard_names).
"""


__all__ = ["shard_name", "rolled_name"]


def shard_name(prefix: str, shard: int, num_shards: int, suffix: str) -> str:
  return f"{prefix}-{shard:05d}-of-{num_shards:05d}{suffix}"


def rolled_name(split: str, shard: int, num_shards: int, roll: int,
                suffix: str) -> str:
  """The staged name of a shard's file number `roll`: the shard's own name
  for the first, a marked one for the files after it (Commit renames them
  all to final names)."""
  name = shard_name(split, shard, num_shards, suffix)
  if roll == 0:
    return name
  return f"{name[:-len(suffix)]}-roll{roll:04d}{suffix}"

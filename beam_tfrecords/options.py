"""A build's options, checked once: the same for build(), the command
line and WriteDataset, and the same in the build key and dataset.json."""

import dataclasses
from typing import Any, Dict, Mapping, Optional, Union

from beam_tfrecords.errors import InputError
from beam_tfrecords.schema import Schema
from beam_tfrecords.schema.sizes import parse_size

__all__ = ["BuildOptions", "SINK_NAMES"]

SINK_NAMES = ("deterministic", "beam")


@dataclasses.dataclass(frozen=True)
class BuildOptions:
  """How a dataset is written (see build() for each option)."""
  num_shards: Union[None, int, Mapping[str, int]] = None
  max_shard_size: Union[None, int, str] = None
  sink: str = "deterministic"
  gzip_level: Optional[int] = None
  shuffle_seed: Optional[int] = None
  statistics: bool = True
  overwrite: bool = False
  max_bad_rows: Optional[int] = None
  max_bad_fraction: Optional[float] = None

  def key(self) -> Dict[str, Any]:
    """The options as the build key takes them (as given)."""
    return {
        "num_shards": self.num_shards,
        "max_shard_size": (parse_size(self.max_shard_size)
                           if self.max_shard_size is not None else None),
        "sink": self.sink, "gzip_level": self.gzip_level,
        "shuffle_seed": self.shuffle_seed, "statistics": self.statistics,
        "max_bad_rows": self.max_bad_rows,
        "max_bad_fraction": self.max_bad_fraction}

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
    return dataclasses.replace(self, max_bad_rows=rows,
                               max_bad_fraction=fraction)

  def check_sink_options(self) -> None:
    """What only the deterministic sink can do (checked after the shard
    plan, whose errors come first)."""
    if self.sink == "deterministic":
      return
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

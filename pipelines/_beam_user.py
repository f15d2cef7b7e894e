"""What the two pipelines written the way a Beam user writes them share:
their flags, and the line they print when the dataset is published."""

import argparse
import os
from typing import List, Optional, Tuple

import beam_tfrecords as btr

from ._common import HERE, SCHEMAS


def flags(description: str, sample: str, output: str,
          argv: Optional[List[str]]) -> Tuple[argparse.Namespace, List[str]]:
  """--input / --output / --schema / --num-shards; the rest is Beam's."""
  p = argparse.ArgumentParser(description=description)
  p.add_argument("--input", default=os.path.join(HERE, "data", sample),
                 help="input file(s) (default: the bundled sample)")
  p.add_argument("--output", default=output, help="dataset directory")
  p.add_argument("--schema",
                 default=os.path.join(SCHEMAS, "structured_columns.yaml"))
  p.add_argument("--num-shards", type=int, default=None)
  return p.parse_known_args(argv)


def say(output: str) -> dict:
  info = btr.dataset_info(output)
  c = info.counts
  print(f"{info.name}: {c.records_written} records from "
        f"{c.rows_read} rows, {c.rows_rejected} rejected -> {output}")
  return info

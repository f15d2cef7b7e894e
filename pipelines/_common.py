"""What the bundled pipelines share: flags, defaults, and the build call."""

import argparse
import os
from typing import List, Optional

import beam_tfrecords as btr

HERE = os.path.dirname(os.path.abspath(__file__))
# schemas/ in the checkout; pipelines/schemas/ where the wheel installed it.
SCHEMAS = next(p for p in (os.path.join(HERE, "schemas"),
                           os.path.join(os.path.dirname(HERE), "schemas"))
               if os.path.isdir(p))


def run_build(description: str, schema: str, sample: str, output: str,
              argv: Optional[List[str]] = None,
              input_format: Optional[str] = None,
              preprocessing_fn=None) -> btr.BuildResult:
  """Parses --input/--output/--num-shards; the rest goes to Beam."""
  p = argparse.ArgumentParser(description=description)
  p.add_argument("--input", default=os.path.join(HERE, "data", sample),
                 help="input files (default: the bundled sample)")
  p.add_argument("--output", default=output, help="dataset directory")
  p.add_argument("--schema", default=os.path.join(SCHEMAS, schema))
  p.add_argument("--num-shards", type=int, default=None)
  args, beam_args = p.parse_known_args(argv)
  result = btr.build(args.schema, args.input, args.output,
                     input_format=input_format,
                     num_shards=args.num_shards, beam_args=beam_args,
                     overwrite=True, preprocessing_fn=preprocessing_fn)
  counts = result.info.counts
  dropped = (f", {counts.rows_dropped} dropped by max_length"
             if counts.rows_dropped else "")
  print(f"{result.info.name}: {counts.records_written} records "
        f"from {counts.rows_read} rows, {result.rows_rejected} "
        f"rejected{dropped} -> {result.output}")
  return result

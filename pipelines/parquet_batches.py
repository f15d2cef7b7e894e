"""Parquet read by Beam as Arrow record batches, written by
btr.WriteDataset: no row becomes a Python dict on the way.

    python -m pipelines.parquet_batches [--input 'data/*.parquet']
        [--output out/parquet_batches] [--num-shards N]
        [any Beam pipeline option]
"""

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

import beam_tfrecords as btr

from ._beam_user import flags, say


def run(argv=None):
  args, beam_args = flags(__doc__.splitlines()[0], "structured.parquet",
                          "out/parquet_batches", argv)
  with beam.Pipeline(options=PipelineOptions(beam_args)) as p:
    _ = (p
         | "Read" >> beam.io.ReadFromParquetBatched(args.input)
         | "Write" >> btr.WriteDataset(args.schema, args.output,
                                       num_shards=args.num_shards,
                                       overwrite=True))
  return say(args.output)


if __name__ == "__main__":
  run()

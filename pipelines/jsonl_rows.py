"""JSON lines read by Beam, written by btr.WriteDataset: a Beam user's own
pipeline with this tool as its last step.

    python -m pipelines.jsonl_rows [--input 'data/*.jsonl']
        [--output out/jsonl_rows] [--num-shards N] [any Beam pipeline option]

The rows are dicts, as `json.loads` gives them. On Dataflow the same code
reads a BigQuery table instead (its rows are dicts too):

    rows = p | beam.io.ReadFromBigQuery(table="project:dataset.table")
    rows | btr.WriteDataset(schema, "gs://bucket/datasets/name")
"""

import json

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

import beam_tfrecords as btr

from ._beam_user import flags, say


def run(argv=None):
  args, beam_args = flags(__doc__.splitlines()[0], "structured.jsonl",
                          "out/jsonl_rows", argv)
  with beam.Pipeline(options=PipelineOptions(beam_args)) as p:
    _ = (p
         | "Read" >> beam.io.ReadFromText(args.input)
         | "Parse" >> beam.Map(json.loads)
         | "Write" >> btr.WriteDataset(args.schema, args.output,
                                       num_shards=args.num_shards,
                                       overwrite=True))
  return say(args.output)


if __name__ == "__main__":
  run()

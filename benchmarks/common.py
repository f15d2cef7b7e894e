"""What several suites share: the generated 12-column CSV and its schema,
running a command in a fresh interpreter and measuring it (wall seconds,
peak RSS), the command line of a build and of a baseline (run.py's hidden
--run-baseline), showing the suites' tables (and keeping them for
--tables-out: the docs run writes them into docs/performance.md), and
comparing two datasets' records."""

import csv
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import time
from typing import List, NamedTuple, Optional, Sequence

from doc_tables import Table

# The entry point: its hidden `--run-baseline KIND ARG...` runs BASELINES.
RUN_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py")


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


class Result(NamedTuple):
  name: str
  seconds: float
  peak_mb: Optional[float]  # the largest process's peak RSS


def run(cmd: List[str]):
  """Runs a command; (wall seconds, peak RSS in MB of the process)."""
  seconds, _, peak = run_usage(cmd)
  return seconds, peak


def run_usage(cmd: List[str]):
  """Runs a command; (wall seconds, CPU seconds (user + system), peak RSS
  in MB of the process)."""
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
  _, status, usage = os.wait4(proc.pid, 0)
  seconds = time.perf_counter() - start
  proc.returncode = os.waitstatus_to_exitcode(status)
  if proc.returncode:
    raise subprocess.CalledProcessError(proc.returncode, cmd)
  return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def timed_cmd(results, name, cmd) -> None:
  seconds, peak = run(cmd)
  results.append(Result(name, seconds, peak))


def cli_cmd(workdir: str, schema: str, src: str, extra) -> List[str]:
  out = os.path.join(workdir, "out")
  shutil.rmtree(out, ignore_errors=True)
  return [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
          "--input", src, "--output", out] + list(extra)


def cli(results, name, workdir, schema, src, extra=()):
  timed_cmd(results, name, cli_cmd(workdir, schema, src, extra))


def baseline_cmd(kind: str, src: str, dst: str, *more: str) -> List[str]:
  """A baseline in a fresh interpreter (it pays its own imports, as the
  `build` runs do)."""
  return [sys.executable, RUN_PY, "--run-baseline", kind, src, dst, *more]


# Every table shown in this process, in order (run.py --tables-out).
SHOWN: List[Table] = []


def show(name: str, caption: str, header: Sequence[str],
         rows: Sequence[Sequence[object]]) -> Table:
  """Prints a table (its caption, then the rows) and keeps it: `name` is
  its marker in docs/performance.md (<!-- table: NAME -->)."""
  shown = Table.of(name, caption, header, rows)
  print("\n" + shown.markdown(), flush=True)
  SHOWN.append(shown)
  return shown


def table(name: str, title: str, rows: int, src: str, results, bases,
          limits=()) -> Table:
  """The table of timed commands over one input: bases: (label, seconds):
  a column "speed-up vs label" (base / wall); limits: (label, seconds): a
  column "wall / label" (1.0x = at the limit)."""
  mb = os.path.getsize(src) / 1e6
  header = ["approach", "wall s", "rows/s", "MB/s", "peak RSS MB"]
  header += [f"speed-up vs {label}" for label, _ in bases]
  header += [f"wall / {label}" for label, _ in limits]
  lines = []
  for r in results:
    line = [r.name, f"{r.seconds:.1f}", f"{rows / r.seconds:,.0f}",
            f"{mb / r.seconds:.1f}",
            f"{r.peak_mb:,.0f}" if r.peak_mb else "-"]
    line += [f"{base / r.seconds:.2f}x" for _, base in bases]
    line += [f"{r.seconds / lim:.2f}x" for _, lim in limits]
    lines.append(line)
  return show(name, f"{title}: {rows:,} rows, {mb:.1f} MB input, "
              f"{os.cpu_count()} cores.", header, lines)


def examples_input(workdir: str, rows: int):
  """The generated 12-column CSV and its schema file (made once)."""
  src = os.path.join(workdir, f"input-{rows}.csv")
  if not os.path.exists(src):
    run(baseline_cmd("make-csv", src, str(rows)))
  schema = os.path.join(workdir, "schema.yaml")
  with open(schema, "w") as f:
    f.write(SCHEMA)
  return src, schema


def comparable(folder: str, rel: str) -> bytes:
  """A file of a dataset without what differs between two builds of the
  same records by design (design.md, Determinism): _SUCCESS's run id
  (the last word of its first line; its second line is dataset.json's
  SHA-256), croissant.json's build time (dateCreated and the same time
  elsewhere in it)."""
  with open(os.path.join(folder, rel), "rb") as f:
    data = f.read()
  if os.path.basename(rel) == "_SUCCESS":
    first, _, rest = data.partition(b"\n")
    return b" ".join(first.split()[:-1]) + b"\n" + rest
  if os.path.basename(rel) == "croissant.json":
    built = json.loads(data).get("dateCreated", "")
    if built:
      data = data.replace(built.encode(), b"BUILT").replace(
          built[:10].encode(), b"BUILT")
  return data


def same_files(a: str, b: str) -> str:
  """"N files identical" when every file of two datasets is the same
  (comparable: but for the run id and the build time), else "DIFFER:"
  and the files that differ."""
  names = sorted(os.path.relpath(os.path.join(root, name), a)
                 for root, _, files in os.walk(a) for name in files)
  differ = [rel for rel in names if not os.path.exists(os.path.join(b, rel))
            or comparable(a, rel) != comparable(b, rel)]
  return (f"{len(names)} files identical" if not differ else
          f"DIFFER: {differ}")


def same_records(a: str, b: str) -> str:
  """"identical" when the shards of `a` and `b` hold the same records in
  the same order (their gzip framing may differ)."""
  from beam_tfrecords.core.shard_reader import iter_tfrecords
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

"""What several suites share: the generated 12-column CSV and its schema,
running a command in a fresh interpreter and measuring it (wall seconds,
peak RSS), the command line of a build and of a baseline (run.py's hidden
--run-baseline), the table the suites print, and comparing two datasets'
records."""

import csv
import itertools
import os
import random
import shutil
import subprocess
import sys
import time
from typing import List, NamedTuple, Optional

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
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
  _, status, usage = os.wait4(proc.pid, 0)
  seconds = time.perf_counter() - start
  proc.returncode = os.waitstatus_to_exitcode(status)
  if proc.returncode:
    raise subprocess.CalledProcessError(proc.returncode, cmd)
  return seconds, usage.ru_maxrss / 1024


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


def table(title: str, rows: int, src: str, results, bases,
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


def examples_input(workdir: str, rows: int):
  """The generated 12-column CSV and its schema file (made once)."""
  src = os.path.join(workdir, f"input-{rows}.csv")
  if not os.path.exists(src):
    run(baseline_cmd("make-csv", src, str(rows)))
  schema = os.path.join(workdir, "schema.yaml")
  with open(schema, "w") as f:
    f.write(SCHEMA)
  return src, schema


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

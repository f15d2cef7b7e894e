"""The published suite (issue 49): what the checksums, the card, the
preview and croissant.json cost a build, and how fast `verify` reads.

For each --published-rows count of flight rows (stats.flights_input),
alternating rounds (the best CPU of each) of:
  before (--published-before, a git revision unpacked from `git
      archive`: no checksums, no card, no croissant.json);
  `--croissant off`: every file's SHA-256 taken as written, the card;
  the defaults: the same, plus the previews and croissant.json.
Then `beam-tfrecords verify` of the default build against the baselines
of the same run on the same files: `sha256sum` of every file (coreutils,
the floor of reading and hashing them) and `cat > /dev/null` (reading
only).
"""

import os
import shutil
import subprocess
import sys
from typing import Dict, List, Tuple

from common import show
from native_suite import (BUILD_HEADER, _before_tree, _run, best_builds,
                          build_rows)
from stats import flights_input


def _build(workdir: str, schema: str, src: str, extra=()) -> List[str]:
  # A fresh folder each time: the revision before checksums would leave
  # the files it does not know (README.md, ...) behind when it overwrote.
  out = os.path.join(workdir, "published-out")
  shutil.rmtree(out, ignore_errors=True)
  return [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
          schema, "--input", src, "--output", out, "-q", "--force",
          "--overwrite", *extra]


def _files(root: str) -> List[str]:
  return sorted(os.path.join(d, f) for d, _, names in os.walk(root)
                for f in names)


def published_suite(args) -> None:
  before = _before_tree(args.workdir, args.published_before)
  builds: List[Tuple[str, Dict[str, str], Tuple[str, ...]]] = []
  if before:
    builds.append((f"before ({args.published_before})",
                   {"PYTHONPATH": before}, ()))
  builds += [("checksums + card (--croissant off)", {},
              ("--croissant", "off")),
             ("checksums + card + preview + croissant.json (default)", {},
              ())]
  rows_built, rows_checked = [], []
  for rows in (int(r) for r in args.published_rows.split(",")):
    src, schema = flights_input(args.workdir, rows)
    best = best_builds([
        (name, lambda extra=extra: _build(args.workdir, schema, src, extra),
         env) for name, env, extra in builds], args.check_rounds)
    size = f"{rows:,}"
    for row in build_rows(best, digits=3):
      rows_built.append((size,) + row)
      size = ""
    # The last build is the default one: verify it.
    out = os.path.join(args.workdir, "published-out")
    files = _files(out)
    size = sum(os.path.getsize(f) for f in files)
    checks = [
        ("`beam-tfrecords verify`",
         [sys.executable, "-m", "beam_tfrecords", "verify", out]),
        ("`sha256sum` of every file (baseline)", ["sha256sum", *files]),
        ("`cat > /dev/null` (baseline: reading)", ["cat", *files])]
    timed = {}
    for _ in range(args.check_rounds):
      for name, cmd in checks:
        got = _run(cmd, {})
        if name not in timed or got[0] < timed[name][0]:
          timed[name] = got
    floor = timed[checks[1][0]][0]
    what = f"{rows:,} rows, {size / 1e6:,.0f} MB"
    for name, _ in checks:
      wall, cpu, _rss = timed[name]
      rows_checked.append((what, name, f"{wall:.2f}", f"{cpu:.2f}",
                           f"{size / 1e6 / wall:,.0f}",
                           f"{wall / floor:.2f}x"))
      what = ""
    subprocess.run([sys.executable, "-m", "beam_tfrecords", "verify", out],
                   check=True, stdout=subprocess.DEVNULL)
  show("published-builds", f"published: whole builds of the flights, "
       f"{os.cpu_count()} cores, the best CPU of {args.check_rounds} "
       "alternating rounds", ("rows",) + BUILD_HEADER, rows_built)
  show("published-verify", "published: checking the files of the default "
       f"build, the best wall of {args.check_rounds}",
       ["build", "check", "wall s", "CPU s", "MB/s", "wall / sha256sum"],
       rows_checked)

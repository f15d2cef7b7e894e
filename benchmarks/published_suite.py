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

from native_suite import _before_tree, _run, best_builds, builds_table
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
  for rows in (int(r) for r in args.published_rows.split(",")):
    src, schema = flights_input(args.workdir, rows)
    best = best_builds([
        (name, lambda extra=extra: _build(args.workdir, schema, src, extra),
         env) for name, env, extra in builds], args.check_rounds)
    builds_table(f"published: whole build, {rows:,} flight rows, "
                 f"{os.cpu_count()} cores, best CPU of {args.check_rounds}",
                 best, digits=3)
    # The last build is the default one: verify it.
    out = os.path.join(args.workdir, "published-out")
    files = _files(out)
    size = sum(os.path.getsize(f) for f in files)
    checks = [
        ("`beam-tfrecords verify`",
         [sys.executable, "-m", "beam_tfrecords", "verify", out]),
        ("sha256sum of every file (baseline)", ["sha256sum", *files]),
        ("cat > /dev/null (baseline: reading)", ["cat", *files])]
    timed = {}
    for _ in range(args.check_rounds):
      for name, cmd in checks:
        got = _run(cmd, {})
        if name not in timed or got[0] < timed[name][0]:
          timed[name] = got
    floor = timed[checks[1][0]][0]
    print(f"\npublished: checking the {len(files)} files "
          f"({size / 1e6:.1f} MB) of that build, best wall of "
          f"{args.check_rounds}\n")
    print("| check | wall s | CPU s | MB/s | wall / sha256sum |")
    print("|---|---|---|---|---|")
    for name, _ in checks:
      wall, cpu, _rss = timed[name]
      print(f"| {name} | {wall:.2f} | {cpu:.2f} | {size / 1e6 / wall:,.0f} "
            f"| {wall / floor:.2f}x |")
    subprocess.run([sys.executable, "-m", "beam_tfrecords", "verify", out],
                   check=True, stdout=subprocess.DEVNULL)

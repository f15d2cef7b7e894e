"""The docs suite: every table of docs/performance.md, made again in one
run and written into the page in place (issue 66).

    python benchmarks/run.py --suite docs            # rewrites the page
    python benchmarks/run.py --suite docs --quick    # tiny sizes, a copy

PLAN holds one suite's command line for each section of the page, which
the page shows (between <!-- command: SUITE --> markers) and which this
suite runs as it is, in a process of its own (so that a measured
child never starts from a large parent: its peak RSS would include the
parent's), with --tables-out to collect what it shows. The sizes are
those that fit one run on 2 cores in 40 minutes; where the suites' own
defaults are larger (10M to 100M rows at scale, the native suite at 10M),
the page quotes what this plan measures. Then the page's tables, each
section's command and how long it took, and the page's one stamp (date,
commit, cores, the run's minutes) are rewritten between their markers
(benchmarks/doc_tables.py); the figures that moved by more than 10%
against the page as it was are printed, for the change's note.

Nothing is written unless every suite ran. KEPT lists the page's tables
that this run does not make, and why; they stay as they are, dated.

--quick runs the same suites at tiny sizes (a smoke test of the whole
run, about 10 minutes, most of it starting processes) and writes a copy
of the page into --workdir (or --docs-page), never docs/performance.md;
so does --docs-suites, which runs only the suites it names (their tables
in the copy; the stamp left as it was, since the page is then not one
run's).
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List, NamedTuple, Tuple

from common import RUN_PY
from doc_tables import Command, Stamp, Table, moved, parsed, problems, rewrite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "performance.md")


class SuiteRun(NamedTuple):
  """One suite's command line in the docs run."""
  name: str                 # its <!-- command: NAME --> marker
  argv: Tuple[str, ...]     # run.py's arguments, as the page shows them
  quick: Tuple[str, ...]    # with --quick: flags and their values
  tables: Tuple[str, ...]   # the tables it shows, each a <!-- table -->

  def command(self, quick: bool) -> Tuple[str, ...]:
    """run.py's arguments; with `quick`, each flag of .quick given its
    value there (replaced, or added)."""
    argv = list(self.argv)
    for flag, value in zip(self.quick[::2], self.quick[1::2]):
      if flag in argv:
        argv[argv.index(flag) + 1] = value
      else:
        argv += [flag, value]
    return tuple(argv) if quick else self.argv


Q = ("--check-rounds", "1")
PLAN = (
    SuiteRun("examples", ("--suite", "examples", "--rows", "1000000"),
         ("--rows", "20000"), ("examples", "examples-limit")),
    SuiteRun("accounting", ("--suite", "accounting", "--rows", "1000000"),
         ("--rows", "20000"), ("accounting",)),
    SuiteRun("sequences", ("--suite", "sequences", "--rows", "1000000"),
         ("--rows", "20000"), ("sequences",)),
    SuiteRun("images", ("--suite", "images", "--images", "10000"),
         ("--images", "100"), ("images",)),
    SuiteRun("checks", ("--suite", "checks", "--rows", "1000000",
                    "--check-rounds", "3"), ("--rows", "20000") + Q,
         ("checks",)),
    SuiteRun("stats", ("--suite", "stats", "--stats-rows", "1000000,10000000",
                   "--stats-plain-max-rows", "1000000", "--check-rounds",
                   "2"),
         ("--stats-rows", "20000,40000", "--stats-plain-max-rows",
          "20000") + Q, ("stats",)),
    SuiteRun("native", ("--suite", "native", "--native-rows", "1000000",
                    "--check-rounds", "2"), ("--native-rows", "20000") + Q,
         ("native-stages", "native-builds", "native-floor",
          "native-grouped", "native-fixed")),
    SuiteRun("published", ("--suite", "published", "--published-rows",
                       "10000000", "--check-rounds", "2"),
         ("--published-rows", "20000") + Q,
         ("published-builds", "published-verify")),
    SuiteRun("tft", ("--suite", "tft", "--transform-rows", "1000000",
                 "--check-rounds", "2"), ("--transform-rows", "20000") + Q,
         ("tft",)),
    SuiteRun("read", ("--suite", "read", "--read-rows", "1000000",
                  "--check-rounds", "2"), ("--read-rows", "20000") + Q,
         ("read", "read-sequences")),
    SuiteRun("access", ("--suite", "access", "--rows", "1000000",
                    "--check-rounds", "1"), ("--rows", "20000"),
         ("access-bytes", "access")),
    SuiteRun("cli", ("--suite", "cli", "--check-rounds", "5"), Q, ("cli",)),
    SuiteRun("cluster", ("--suite", "cluster", "--rows", "1000000"),
         ("--rows", "20000"), ("cluster",)),
    SuiteRun("portable", ("--suite", "portable", "--portable-rows",
                      "100000,1000000"), ("--portable-rows", "20000"),
         ("portable",)),
    SuiteRun("scale", ("--suite", "scale", "--scale-rows", "10000000,20000000",
                   "--scale-formats", "parquet"),
         ("--scale-rows", "20000,40000", "--scale-file-rows", "20000"),
         ("scale",)),
)
# The page's tables that this run does not make: name -> why, as the page
# says it where the table is.
KEPT = {
    "scale-kinds": "grouped and TensorFlow Transform builds of 10M and 40M "
                   "rows: about 50 minutes by themselves",
    "scale-engines": "local Dask and portable clusters at 1M to 40M rows: "
                     "over 10 minutes by themselves",
    "engines": "Flink and Spark clusters with the assembled job servers "
               "(Java, Maven): about 6 minutes by themselves",
    "resume": "added after the run that made the page (issue 62); about "
              "15 minutes",
    "resume-grouped": "the resume suite's grouped rows, run on their own "
                      "when they were added (issue 62)",
    "resume-tft": "the resume suite's TFT rows, run on their own when "
                  "they were added (issue 62)",
    "peers": "added after the run that made the page (issue 64); about 5 "
             "minutes",
}
# What the suites import beyond the build itself: checked before the first
# one starts, so that a missing one does not end a long run late.
NEEDS = ("import dask.distributed, torch, grain, array_record, "
         "tensorflow_transform, tfx_bsl")
# Datasets the suites build once and keep in --workdir: built again by
# each docs run, since a kept one may come from other code.
BUILT = ("read-*", "access-*", "cli-out")


def table_names() -> List[str]:
  return [t for suite in PLAN for t in suite.tables]


def page_problems(page: str) -> List[str]:
  return problems(page, table_names(), [s.name for s in PLAN], list(KEPT))


def _git(*argv: str) -> str:
  return subprocess.run(["git", "-C", ROOT, *argv], check=True,
                        capture_output=True, text=True).stdout.strip()


def _run(suite: SuiteRun, args) -> Tuple[float, List[Table]]:
  """(minutes, the tables it showed)."""
  argv = suite.command(args.quick)
  out = os.path.join(args.workdir, f"docs-{suite.name}.json")
  if os.path.exists(out):
    os.remove(out)
  print(f"\n== {suite.name}: python benchmarks/run.py {' '.join(argv)}",
        flush=True)
  started = time.perf_counter()
  subprocess.run([sys.executable, RUN_PY, *argv, "--workdir", args.workdir,
                  "--tables-out", out], check=True)
  minutes = (time.perf_counter() - started) / 60
  with open(out) as f:
    tables = [Table.from_json(t) for t in json.load(f)]
  return minutes, tables


def _suites(names: str) -> List[SuiteRun]:
  if not names:
    return list(PLAN)
  known = {s.name: s for s in PLAN}
  unknown = set(names.split(",")) - set(known)
  if unknown:
    raise SystemExit(f"--docs-suites: {sorted(unknown)} unknown; "
                     f"{', '.join(known)}")
  return [known[n] for n in names.split(",")]


def docs_suite(args) -> None:
  suites = _suites(args.docs_suites)
  whole = not args.docs_suites
  page_path = args.docs_page or (
      PAGE if whole and not args.quick else
      os.path.join(args.workdir, "performance.md"))
  with open(PAGE) as f:
    page = f.read()
  bad = page_problems(page)
  if bad:
    raise SystemExit("docs/performance.md's markers:\n  " + "\n  ".join(bad))
  subprocess.run([sys.executable, "-c", NEEDS], check=True)
  commit = _git("describe", "--always", "--dirty", "--abbrev=7")
  for pattern in BUILT:
    for path in glob.glob(os.path.join(args.workdir, pattern)):
      shutil.rmtree(path)
  started = time.perf_counter()
  new: Dict[Tuple[str, str], object] = {}
  failed = []
  for suite in suites:
    try:
      minutes, tables = _run(suite, args)
    except subprocess.CalledProcessError as e:
      failed.append(f"{suite.name}: exit {e.returncode}")
      continue
    shown = {t.name: t for t in tables}
    missing = set(suite.tables) - set(shown)
    if missing:
      failed.append(f"{suite.name}: showed no {sorted(missing)}")
      continue
    for name in suite.tables:
      new["table", name] = shown[name]
    new["command", suite.name] = Command(suite.command(args.quick),
                                        round(minutes, 1))
    print(f"== {suite.name}: {minutes:.1f} minutes; "
          f"{(time.perf_counter() - started) / 60:.1f} in all", flush=True)
  total = (time.perf_counter() - started) / 60
  if failed:
    raise SystemExit("the docs run wrote nothing; suites that failed:\n  "
                     + "\n  ".join(failed))
  if whole:
    new["stamp", ""] = Stamp(time.strftime("%Y-%m-%d"), commit,
                             os.cpu_count() or 0, round(total, 1), args.quick)
  before = parsed(page)
  changes = [line for key, table in new.items() if key[0] == "table"
             and key in before for line in moved(before[key], table)]
  with open(page_path, "w") as f:
    f.write(rewrite(page, new))
  print(f"\ndocs: {total:.1f} minutes; wrote {page_path}")
  if total > 40:
    print("  longer than the 40 minutes the plan is for: was the machine "
          "shared?")
  print(f"figures that moved by more than 10% ({len(changes)}):")
  for line in changes:
    print(f"  {line}")

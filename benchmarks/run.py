"""Times `beam-tfrecords build` on generated data against the baselines.

    python benchmarks/run.py [--suite examples|sequences|accounting|scale|
                              images|transform|portable|tfrecord|cli|
                              cluster|nested|checks|stats|tft|read|
                              members|access|native|published|engines|
                              resume|view|peers|docs|all]
        [--images 3000] [--portable-rows 100000,1000000]
        [--transform-rows 100000]
        [--rows 1000000] [--workdir /tmp/btr-bench]
        [--scale-rows 10000000,40000000,100000000] [--sequence-memory-rows 10000000]
        [--native-rows 1000000,10000000] [--native-before a8b0e9f]
        [--published-rows 1000000,10000000] [--published-before 9623429]
        [--resume-files 10] [--resume-rows 1000000]
        [--window-days 30] [--window-rows 100000]

Prints the suites' tables: wall seconds, rows/s, input MB/s, peak RSS of
the largest process, and ratios against baselines measured in the same run
on the same file. Every run is a fresh interpreter that pays its own
imports. The data is generated deterministically (and kept in --workdir).

`--suite docs` (docs_suite.py) runs every suite that docs/performance.md
quotes, at the sizes it quotes, in one run (about 35 minutes on 2 cores),
and rewrites the page's tables in place; `--suite docs --quick` is its
smoke test (tiny sizes, a copy of the page in --workdir).

Each suite is a module of this folder, whose docstring says what it
measures and against which baselines: examples_suite, sequences_suite,
accounting_suite, scale_suite, images_suite, transform_suite,
portable_suite, tfrecord_suite, cli_suite, cluster, nested, checks,
stats, tft_suite, read_suite, members_suite, access_suite, native_suite,
published_suite, resume_suite, view_suite, peers_suite and engines (by
name only, not in `all`, nor is docs).
What several share is in common.py. This file parses the flags, runs the
suites, and runs the baselines that the suites start in fresh
interpreters (`--run-baseline KIND ARG...`, hidden).
"""

import argparse
import json
import os

from access_suite import access_suite
from accounting_suite import accounting_suite
from checks import checks_suite
from cli_suite import cli_suite
from cluster import cluster_suite
from common import SHOWN, make_csv
from docs_suite import docs_suite
from engines import engines_suite
from examples_suite import (beam_row_by_row, examples_suite, plain_loop,
                            write_dataset_from_parquet, write_limit_steps,
                            write_parquet)
from images_suite import (images_suite, make_images, plain_image_loop,
                          plain_pixels_loop)
from members_suite import members_suite
from native_suite import native_suite, stage_cpu
from nested import nested_suite
from peers_suite import beam_expert, peers_suite, tfx_bsl_loop
from portable_suite import portable_suite
from published_suite import published_suite
from read_suite import read_suite
from resume_suite import resume_suite
from scale_suite import scale_suite
from sequences_suite import (make_events_csv, plain_sequence_loop,
                             sequences_suite)
from stats import (plain_flights_loop, plain_grouped_loop,
                   stats_suite)
from tfrecord_suite import tf_copy_loop, tf_parse_loop, tfrecord_suite
from tft_suite import hand_written_tft, tft_suite
from transform_suite import transform_suite
from view_suite import view_suite

BASELINES = {"examples": plain_loop, "sequences": plain_sequence_loop,
             "write-dataset-parquet": write_dataset_from_parquet,
             "beam-rows": beam_row_by_row, "parquet": write_parquet,
             "limits": write_limit_steps,
             "make-csv": lambda path, rows: make_csv(path, int(rows)),
             "make-events": lambda path, rows, per_user="10": make_events_csv(
                 path, int(rows), int(per_user)),
             "make-images": make_images, "plain-images": plain_image_loop,
             "plain-pixels": plain_pixels_loop, "tf-copy": tf_copy_loop,
             "tf-parse": tf_parse_loop, "flights-loop": plain_flights_loop,
             "tft-hand": hand_written_tft,
             "flights-grouped-loop": plain_grouped_loop,
             "native-stages": stage_cpu, "beam-expert": beam_expert,
             "tfx-bsl-loop": tfx_bsl_loop}


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--suite", choices=["examples", "sequences", "accounting",
                                     "scale", "images", "transform", "portable",
                                     "tfrecord", "cli", "cluster", "nested",
                                     "checks", "stats", "tft", "read",
                                     "members", "access", "native",
                                     "published", "engines", "resume", "view",
                                     "peers", "docs", "all"],
                 default="all")
  p.add_argument("--rows", type=int, default=1_000_000)
  p.add_argument("--resume-files", type=int, default=10,
                 help="the resume suite's input files")
  p.add_argument("--resume-rows", type=int, default=1_000_000,
                 help="flight rows per file in the resume suite")
  p.add_argument("--window-days", type=int, default=30,
                 help="the resume suite's scheduled window, in daily files")
  p.add_argument("--window-rows", type=int, default=100_000,
                 help="flight rows per day of the resume suite's window")
  p.add_argument("--scale-rows", default="10000000,40000000,100000000",
                 help="row counts for the scale suite, comma-separated "
                 "(multiples of --scale-file-rows)")
  p.add_argument("--scale-file-rows", type=int, default=10_000_000,
                 help="rows per input file in the scale suite")
  p.add_argument("--scale-formats", default="jsonl,parquet",
                 help="formats also built at the first --scale-rows")
  p.add_argument("--scale-kinds", default="examples",
                 help="builds measured at each --scale-rows: examples (the "
                 "flights; and --scale-formats at the first size), grouped "
                 "(SequenceExamples by user), tft (4 analyzers)")
  p.add_argument("--scale-engines", default="",
                 help="instead: the flights at each --scale-rows on local "
                 "clusters (dask, portable), with each process's peak")
  p.add_argument("--skip-row-by-row", action="store_true",
                 help="leave out the row-by-row Beam baseline (slowest)")
  p.add_argument("--transform-rows", type=int, default=100_000,
                 help="rows for the transform suite")
  p.add_argument("--portable-rows", default="100000,1000000",
                 help="row counts for the portable suite, comma-separated")
  p.add_argument("--sequence-memory-rows", type=int, default=0,
                 help="sequences suite: also build this many rows (e.g. "
                 "10000000) and show peak memory; 0: skip")
  p.add_argument("--images", type=int, default=3000,
                 help="image files for the images suite")
  p.add_argument("--nested-rows", type=int, default=300_000,
                 help="rows for the nested suite")
  p.add_argument("--check-rounds", type=int, default=3,
                 help="rounds of each measurement, alternating, the best "
                 "counting (checks, stats, native, published, tft, read, "
                 "access, cli)")
  p.add_argument("--stats-rows", default="1000000,10000000",
                 help="stats suite: flight rows, comma-separated")
  p.add_argument("--stats-plain-max-rows", type=int, default=0,
                 help="stats suite: run the plain loop (the slowest: it "
                 "encodes in Python) only at sizes up to this; 0: at "
                 "every size")
  p.add_argument("--read-rows", type=int, default=1000000,
                 help="read suite: flight records")
  p.add_argument("--view-rows", type=int, default=10_000_000,
                 help="view suite: the split's records")
  p.add_argument("--view-requests", type=int, default=100,
                 help="view suite: random records asked for, warm")
  p.add_argument("--read-shards", type=int, default=8,
                 help="read suite: shards they are built into")
  p.add_argument("--native-rows", default="1000000,10000000",
                 help="native suite: flight rows, comma-separated")
  p.add_argument("--native-before", default="a8b0e9f",
                 help="native suite: the git revision to build with as "
                 "'before' (the tree before the native core); '' to skip")
  p.add_argument("--published-rows", default="1000000,10000000",
                 help="published suite: flight rows, comma-separated")
  p.add_argument("--published-before", default="9623429",
                 help="published suite: the git revision to build with as "
                 "'before' (the tree before checksums and croissant.json); "
                 "'' to skip")
  p.add_argument("--quick", action="store_true",
                 help="docs suite: every suite at tiny sizes (a smoke test "
                 "of the run, minutes), the page written as a copy")
  p.add_argument("--docs-suites", default="",
                 help="docs suite: only these suites, comma-separated (a "
                 "smoke test: the page written as a copy)")
  p.add_argument("--docs-page", default="",
                 help="docs suite: the page to write (default: "
                 "docs/performance.md; with --quick or --docs-suites, "
                 "WORKDIR/performance.md)")
  p.add_argument("--tables-out", default="",
                 help="write the tables the run showed to this file, as "
                 "JSON (the docs suite collects them so)")
  p.add_argument("--workdir", default="/tmp/btr-bench")
  p.add_argument("--run-baseline", nargs="+", metavar="ARG",
                 help=argparse.SUPPRESS)
  args = p.parse_args()
  if args.run_baseline:
    kind, *rest = args.run_baseline
    BASELINES[kind](*rest)
    return
  # (absolute: a tree before runs its builds from its own folder)
  args.workdir = os.path.abspath(args.workdir)
  os.makedirs(args.workdir, exist_ok=True)
  if args.suite == "docs":
    docs_suite(args)
    return
  for name, suite in (("examples", examples_suite),
                      ("sequences", sequences_suite),
                      ("accounting", accounting_suite),
                      ("scale", scale_suite),
                      ("images", images_suite),
                      ("transform", transform_suite),
                      ("portable", portable_suite),
                      ("tfrecord", tfrecord_suite),
                      ("cli", cli_suite),
                      ("cluster", cluster_suite),
                      ("nested", nested_suite),
                      ("checks", checks_suite),
                      ("stats", stats_suite),
                      ("tft", tft_suite),
                      ("read", read_suite),
                      ("members", members_suite),
                      ("access", access_suite),
                      ("native", native_suite),
                      ("published", published_suite),
                      ("engines", engines_suite),
                      ("resume", resume_suite),
                      ("view", view_suite),
                      ("peers", peers_suite)):
    # (engines: by name only; it needs Java and Maven, and 10 minutes)
    if args.suite == name or (args.suite == "all" and name != "engines"):
      suite(args)
  if args.tables_out:
    with open(args.tables_out, "w") as f:
      json.dump([t.to_json() for t in SHOWN], f, indent=1)


if __name__ == "__main__":
  main()

"""The accounting suite: the 12-column CSV (--rows) built clean, with 1% and
with 10% bad rows (a `score` that is not a number; each bad row goes to
errors/ with its reason and is counted), and clean with Beam's
WriteToTFRecord sink (--sink beam); each against the clean build."""

import csv
import os

from common import cli, examples_input, table


def _with_bad_rows(src: str, dst: str, every: int) -> None:
  """A copy of the CSV whose `score` is not a number on every `every`th row."""
  with open(src, newline="") as f, open(dst, "w", newline="") as out:
    r, w = csv.reader(f), csv.writer(out)
    w.writerow(next(r))
    for i, row in enumerate(r):
      if i % every == every - 1:
        row[2] = "n/a"
      w.writerow(row)


def accounting_suite(args) -> None:
  src, schema = examples_input(args.workdir, args.rows)
  variants = {}
  for every in (100, 10):
    variants[every] = os.path.join(args.workdir,
                                   f"input-{args.rows}-bad{every}.csv")
    if not os.path.exists(variants[every]):
      _with_bad_rows(src, variants[every], every)
  results = []
  cli(results, "build, clean input", args.workdir, schema, src)
  # Bad rows are expected here: allow them (the default fails above 1%).
  allow = ["--max-bad-fraction", "1"]
  cli(results, "build, 1% bad rows (to errors/)", args.workdir, schema,
      variants[100], allow)
  cli(results, "build, 10% bad rows (to errors/)", args.workdir, schema,
      variants[10], allow)
  cli(results, "build, clean input, --sink beam (WriteToTFRecord)",
      args.workdir, schema, src, ["--sink", "beam"])
  table("accounting", "accounting (12 columns; DirectRunner defaults; one "
        "run of each)", args.rows, src,
        results, [("clean build", results[0].seconds)])

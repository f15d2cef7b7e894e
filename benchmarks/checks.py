"""The checks suite: what expectations cost a build (issue 32).

The generated 12-column CSV, built three ways in the same run, each the
best of --check-rounds alternating rounds (one whole `beam-tfrecords build`
process each):
  - no expect: blocks;
  - an expect: block on every feature (presence, min / max, values,
    length, drift) and on the dataset (records, records_change), against
    a baseline (the same data, built once before the timed runs);
  - the same plus disjoint_splits (every record digested and compared
    across splits).
All three have the same hash split (train 90%, eval 10%), so the records
and shards are the same; the ratio column is each against the first.
"""

import os
import shutil
from typing import List

import yaml

from common import Result, cli_cmd, examples_input, run, table

SPLITS = {"hash": "user_id", "weights": {"train": 0.9, "eval": 0.1}}
EXPECT = {
    "user_id": {"presence": 1.0, "min": 0},
    "age": {"presence": 1.0, "min": 0, "max": 120, "drift": 0.1},
    "score": {"presence": 0.99, "min": 0, "max": 100, "drift": 0.1},
    "ratio": {"presence": 0.99, "min": 0, "max": 1, "drift": 0.1},
    "country": {"presence": 0.99, "values": ["de", "fr", "us", "jp"],
                "drift": 0.1},
    "city": {"presence": 0.99, "drift": 0.1},
    "tags": {"presence": 0.99, "length": {"min": 1, "max": 5}, "drift": 0.1},
    "ratings": {"presence": 0.99, "length": {"min": 1, "max": 8},
                "min": 0, "max": 5, "drift": 0.1},
    "clicks": {"presence": 0.99, "length": {"max": 8}, "min": 0,
               "drift": 0.1},
    "label": {"presence": 1.0, "values": [0, 1], "drift": 0.1},
    "payload": {"presence": 0.99},
    "day": {"presence": 0.99, "drift": 0.1},
}


def _schemas(workdir: str, base_schema: str) -> List[str]:
  with open(base_schema) as f:
    plain = yaml.safe_load(f)
  plain["splits"] = SPLITS
  checked = dict(plain, features={
      name: dict(spec, expect=EXPECT[name])
      for name, spec in plain["features"].items()},
                 expect={"records": {"min": 1}, "records_change": 0.5})
  disjoint = dict(checked, expect=dict(checked["expect"],
                                       disjoint_splits=True))
  paths = []
  for name, schema in (("plain", plain), ("checked", checked),
                       ("disjoint", disjoint)):
    path = os.path.join(workdir, f"checks-{name}.yaml")
    with open(path, "w") as f:
      yaml.safe_dump(schema, f, sort_keys=False)
    paths.append(path)
  return paths


def checks_suite(args) -> None:
  src, base_schema = examples_input(args.workdir, args.rows)
  plain, checked, disjoint = _schemas(args.workdir, base_schema)
  baseline = os.path.join(args.workdir, "checks-baseline")
  shutil.rmtree(baseline, ignore_errors=True)
  run(cli_cmd(args.workdir, checked, src, ["--output", baseline, "-q"]))
  runs = {"no expectations": (plain, []),
          "expect: on every feature, with a baseline": (
              checked, ["--baseline", baseline]),
          "+ disjoint_splits": (disjoint, ["--baseline", baseline])}
  best = {name: None for name in runs}
  for _ in range(args.check_rounds):
    for name, (schema, extra) in runs.items():
      seconds, peak = run(cli_cmd(args.workdir, schema, src,
                                  extra + ["-q", "--force", "--overwrite"]))
      if best[name] is None or seconds < best[name][0]:
        best[name] = (seconds, peak)
  results = [Result(name, *best[name]) for name in runs]
  table("checks", f"checks (12 columns, hash split; best of "
        f"{args.check_rounds} alternating rounds)", args.rows, src, results,
        [], [("no expectations", results[0].seconds)])

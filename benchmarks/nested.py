"""The nested suite of benchmarks/run.py: the same values as nested JSON
lines (objects and a list of objects, read with paths) and as flat JSON
lines (one key per feature, lists as JSON arrays), built into the same
Examples. Goal: nested within 1.5x of flat."""

import json
import os
import random

from common import cli_cmd, same_records, table, timed_cmd


def _rows(n: int):
  rng = random.Random(21)
  cities = ["Oslo", "Rome", "Lima", "Pune", "Kyiv"]
  for i in range(n):
    k = rng.randint(0, 6)
    ratings = [{"movie_id": rng.randint(1, 5000),
                "score": round(rng.uniform(0, 5), 1)} for _ in range(k)]
    yield i, f"user{i % 9973}", rng.choice(cities), ratings


def _write(workdir: str, rows: int):
  nested = os.path.join(workdir, f"nested-{rows}.jsonl")
  flat = os.path.join(workdir, f"flat-{rows}.jsonl")
  if not (os.path.exists(nested) and os.path.exists(flat)):
    with open(nested, "w") as n, open(flat, "w") as f:
      for i, name, city, ratings in _rows(rows):
        n.write(json.dumps({"id": i, "user": {"name": name, "address": {
            "city": city}}, "ratings": ratings}) + "\n")
        f.write(json.dumps({
            "id": i, "name": name, "city": city,
            "movies": [r["movie_id"] for r in ratings],
            "scores": [r["score"] for r in ratings]}) + "\n")
  return nested, flat


NESTED_SCHEMA = """name: nested
features:
  id: {type: int64, required: true}
  name: {type: string, source: user.name, required: true}
  city: {type: string, source: user.address.city, required: true}
  movies: {type: int64, shape: [-1], source: "ratings[].movie_id"}
  scores: {type: float, shape: [-1], source: "ratings[].score"}
"""
FLAT_SCHEMA = """name: nested
features:
  id: {type: int64, required: true}
  name: {type: string, required: true}
  city: {type: string, required: true}
  movies: {type: int64, shape: [-1]}
  scores: {type: float, shape: [-1]}
"""


def nested_suite(args) -> None:
  rows = args.nested_rows
  nested, flat = _write(args.workdir, rows)
  schemas = {}
  for name, text in (("nested", NESTED_SCHEMA), ("flat", FLAT_SCHEMA)):
    schemas[name] = os.path.join(args.workdir, f"{name}-schema.yaml")
    with open(schemas[name], "w") as f:
      f.write(text)
  results, outs = [], []
  for name, src in (("flat JSON lines (one key per feature)", flat),
                    ("nested JSON lines (paths)", nested)):
    kind = "nested" if src == nested else "flat"
    out = os.path.join(args.workdir, f"out-{kind}")
    cmd = cli_cmd(args.workdir, schemas[kind], src, [])
    cmd[cmd.index("--output") + 1] = out
    timed_cmd(results, name, cmd)
    outs.append(out)
  table("nested", "nested (the same values, flat and nested JSON lines)",
        rows, nested, results, [("flat", results[0].seconds)])
  print(f"\nrecords: {same_records(*outs)}; nested / flat: "
        f"{results[1].seconds / results[0].seconds:.2f}x (goal: at most "
        "1.5x)")

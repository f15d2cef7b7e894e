"""Times `beam-tfrecords build` on generated CSVs against the seeds' loops.

    python benchmarks/run.py [--suite examples|sequences|all] [--rows 100000]
        [--workdir /tmp/btr-bench]

Prints one table per suite: wall seconds, rows/s and the ratio against the
seeds' way (csv module + tf.train protos built in Python + one
tf.io.TFRecordWriter(GZIP)), measured in the same run on the same file. The
data is generated deterministically.

* examples: a 12-column CSV, one Example per row.
* sequences: an event log (users x events, rows shuffled); one Example per
  row vs one SequenceExample per user (group_by user, order_by ts).
* accounting: the 12-column CSV clean, with 1% and with 10% bad rows (each
  bad row goes to errors/ with its reason and is counted); the same build
  with Beam's WriteToTFRecord sink for comparison.
"""

import argparse
import csv
import os
import random
import shutil
import subprocess
import sys
import time

SCHEMA = """name: bench
features:
  user_id: {type: int64, required: true}
  age: {type: int64, default: 0}
  score: {type: float}
  ratio: {type: float}
  country: {type: string}
  city: {type: string}
  tags: {type: string, shape: [-1], separator: "|"}
  ratings: {type: float, shape: [-1], separator: "|"}
  clicks: {type: int64, shape: [-1], separator: "|"}
  label: {type: int64, required: true}
  payload: {type: bytes}
  day: {type: string}
"""
COLUMNS = ["user_id", "age", "score", "ratio", "country", "city", "tags",
           "ratings", "clicks", "label", "payload", "day"]


def make_csv(path: str, rows: int) -> None:
  rng = random.Random(0)
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(COLUMNS)
    for i in range(rows):
      w.writerow([i, rng.randint(18, 90), f"{rng.random() * 100:.4f}",
                  f"{rng.random():.6f}", rng.choice(["de", "fr", "us", "jp"]),
                  f"city{rng.randint(0, 500)}",
                  "|".join(rng.sample(["a", "b", "c", "d", "e"], 3)),
                  "|".join(f"{rng.random() * 5:.2f}" for _ in range(4)),
                  "|".join(str(rng.randint(0, 999)) for _ in range(5)),
                  rng.randint(0, 1), f"blob-{rng.getrandbits(64):x}",
                  f"2026-11-{rng.randint(1, 28):02d}"])


def seed_loop(src: str, dst: str) -> None:
  """The seeds' way: one proto per row in Python, one GZIP writer."""
  import tensorflow as tf
  floats = {"score", "ratio"}
  ints = {"user_id", "age", "label"}
  lists = {"tags": bytes, "ratings": float, "clicks": int}
  with tf.io.TFRecordWriter(dst, options="GZIP") as writer, \
      open(src, newline="") as f:
    for row in csv.DictReader(f):
      feature = {}
      for k, v in row.items():
        if k in ints:
          feature[k] = tf.train.Feature(int64_list=tf.train.Int64List(
              value=[int(v)]))
        elif k in floats:
          feature[k] = tf.train.Feature(float_list=tf.train.FloatList(
              value=[float(v)]))
        elif k in lists:
          parts = v.split("|")
          kind = lists[k]
          if kind is float:
            feature[k] = tf.train.Feature(float_list=tf.train.FloatList(
                value=[float(p) for p in parts]))
          elif kind is int:
            feature[k] = tf.train.Feature(int64_list=tf.train.Int64List(
                value=[int(p) for p in parts]))
          else:
            feature[k] = tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[p.encode() for p in parts]))
        else:
          feature[k] = tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[v.encode()]))
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())


EVENT_COLUMNS = ["user", "ts", "item", "rating", "event", "tags"]
EVENTS_AS_EXAMPLES = """name: events_rows
features:
  user: {type: int64, required: true}
  ts: {type: int64, required: true}
  item: {type: int64, required: true}
  rating: {type: float, required: true}
  event: {type: string, required: true}
  tags: {type: string, shape: [-1], separator: "|"}
"""
EVENTS_AS_SEQUENCES = """name: events_by_user
record: sequence_example
group_by: user
order_by: ts
context:
  user: {type: int64}
  length: {derive: length}
  first_ts: {type: int64, source: ts, derive: first}
sequence:
  ts: {type: int64, required: true}
  item: {type: int64, required: true}
  rating: {type: float, required: true}
  event: {type: string, required: true}
  tags: {type: string, shape: [-1], separator: "|"}
"""


def make_events_csv(path: str, rows: int, per_user: int = 10) -> None:
  rng = random.Random(1)
  users = max(1, rows // per_user)
  data = []
  for i in range(rows):
    data.append([rng.randrange(users), 1_700_000_000 + rng.randrange(10**6),
                 rng.randint(1, 5000), f"{rng.random() * 5:.1f}",
                 rng.choice(["view", "click", "buy"]),
                 "|".join(rng.sample(["a", "b", "c", "d"], 2))])
  rng.shuffle(data)
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(EVENT_COLUMNS)
    w.writerows(data)


def seed_sequence_loop(src: str, dst: str) -> None:
  """Seed 000's way, grouped by hand: dict of lists, sort, protos, writer."""
  import tensorflow as tf
  users = {}
  with open(src, newline="") as f:
    for row in csv.DictReader(f):
      users.setdefault(int(row["user"]), []).append(row)
  with tf.io.TFRecordWriter(dst, options="GZIP") as writer:
    for user, rows in users.items():
      rows.sort(key=lambda r: int(r["ts"]))
      ex = tf.train.SequenceExample()
      ex.context.feature["user"].int64_list.value.append(user)
      ex.context.feature["length"].int64_list.value.append(len(rows))
      ex.context.feature["first_ts"].int64_list.value.append(
          int(rows[0]["ts"]))
      fl = ex.feature_lists.feature_list
      for r in rows:
        fl["ts"].feature.add().int64_list.value.append(int(r["ts"]))
        fl["item"].feature.add().int64_list.value.append(int(r["item"]))
        fl["rating"].feature.add().float_list.value.append(float(r["rating"]))
        fl["event"].feature.add().bytes_list.value.append(r["event"].encode())
        fl["tags"].feature.add().bytes_list.value.extend(
            t.encode() for t in r["tags"].split("|"))
      writer.write(ex.SerializeToString())


def _cli(workdir: str, schema: str, src: str, extra):
  out = os.path.join(workdir, "out")
  shutil.rmtree(out, ignore_errors=True)
  subprocess.run([sys.executable, "-m", "beam_tfrecords", "build",
                  "--schema", schema, "--input", src, "--output", out]
                 + extra, check=True, stdout=subprocess.DEVNULL)


def _table(title: str, rows: int, src: str, results) -> None:
  base = results[0][1]
  mb = os.path.getsize(src) / 1e6
  print(f"\n{title}: {rows:,} rows, {mb:.1f} MB CSV, {os.cpu_count()} cores\n")
  print("| approach | wall s | rows/s | vs first row |")
  print("|---|---|---|---|")
  for name, secs in results:
    print(f"| {name} | {secs:.1f} | {rows / secs:,.0f} | "
          f"{base / secs:.2f}x |")


def _seed_in_subprocess(kind: str, src: str, dst: str):
  """Runs a seed loop in a fresh interpreter: it pays its own imports, as
  the `build` runs do."""
  return lambda: subprocess.run([sys.executable, os.path.abspath(__file__),
                                 "--run-seed", kind, src, dst], check=True)


def _timed(results, name, fn):
  start = time.perf_counter()
  fn()
  results.append((name, time.perf_counter() - start))


def sequences_suite(args) -> None:
  src = os.path.join(args.workdir, f"events-{args.rows}.csv")
  if not os.path.exists(src):
    make_events_csv(src, args.rows)
  schemas = {}
  for name, text in (("rows", EVENTS_AS_EXAMPLES),
                     ("seq", EVENTS_AS_SEQUENCES)):
    schemas[name] = os.path.join(args.workdir, f"events-{name}.yaml")
    with open(schemas[name], "w") as f:
      f.write(text)
  two = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
  results = []
  _timed(results, "seed-style loop: group in a dict, sort, SequenceExample "
         "protos, TFRecordWriter GZIP",
         _seed_in_subprocess("sequences", src, os.path.join(
             args.workdir, "seed-seq.tfrecord.gz")))
  _timed(results, "build, one Example per row (DirectRunner defaults)",
         lambda: _cli(args.workdir, schemas["rows"], src, []))
  _timed(results, "build, SequenceExample per user: group_by + order_by "
         "(DirectRunner defaults)",
         lambda: _cli(args.workdir, schemas["seq"], src, []))
  _timed(results, "build, SequenceExample per user, 2 worker processes",
         lambda: _cli(args.workdir, schemas["seq"], src, two))
  _table("sequences (10 events per user on average)", args.rows, src, results)


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--suite", choices=["examples", "sequences", "accounting",
                                     "all"],
                 default="all")
  p.add_argument("--rows", type=int, default=100_000)
  p.add_argument("--workdir", default="/tmp/btr-bench")
  p.add_argument("--run-seed", nargs=3, metavar=("KIND", "SRC", "DST"),
                 help=argparse.SUPPRESS)
  args = p.parse_args()
  if args.run_seed:
    kind, src, dst = args.run_seed
    (seed_loop if kind == "examples" else seed_sequence_loop)(src, dst)
    return
  os.makedirs(args.workdir, exist_ok=True)
  if args.suite in ("examples", "all"):
    examples_suite(args)
  if args.suite in ("sequences", "all"):
    sequences_suite(args)
  if args.suite in ("accounting", "all"):
    accounting_suite(args)


def _with_bad_rows(src: str, dst: str, every: int) -> None:
  """A copy of the CSV whose `score` is not a number on every `every`th row."""
  with open(src, newline="") as f, open(dst, "w", newline="") as out:
    r, w = csv.reader(f), csv.writer(out)
    w.writerow(next(r))
    for i, row in enumerate(r):
      if i % every == every - 1:
        row[2] = "n/a"
      w.writerow(row)


def _examples_input(args):
  """The generated 12-column CSV and its schema file (made once)."""
  src = os.path.join(args.workdir, f"input-{args.rows}.csv")
  if not os.path.exists(src):
    make_csv(src, args.rows)
  schema = os.path.join(args.workdir, "schema.yaml")
  with open(schema, "w") as f:
    f.write(SCHEMA)
  return src, schema


def accounting_suite(args) -> None:
  src, schema = _examples_input(args)
  variants = {}
  for every in (100, 10):
    variants[every] = os.path.join(args.workdir,
                                   f"input-{args.rows}-bad{every}.csv")
    if not os.path.exists(variants[every]):
      _with_bad_rows(src, variants[every], every)
  results = []
  _timed(results, "build, clean input",
         lambda: _cli(args.workdir, schema, src, []))
  _timed(results, "build, 1% bad rows (to errors/)",
         lambda: _cli(args.workdir, schema, variants[100], []))
  _timed(results, "build, 10% bad rows (to errors/)",
         lambda: _cli(args.workdir, schema, variants[10], []))
  _timed(results, "build, clean input, --sink beam (WriteToTFRecord)",
         lambda: _cli(args.workdir, schema, src, ["--sink", "beam"]))
  _table("accounting (12 columns)", args.rows, src, results)


def examples_suite(args) -> None:
  src, schema = _examples_input(args)
  results = []
  _timed(results, "seed loop (csv + tf.train.Example + TFRecordWriter GZIP)",
         _seed_in_subprocess("examples", src, os.path.join(
             args.workdir, "seed.tfrecord.gz")))
  _timed(results, "beam-tfrecords build (DirectRunner defaults)",
         lambda: _cli(args.workdir, schema, src, []))
  _timed(results, "beam-tfrecords build (--direct_num_workers 2, "
         "multi_processing)",
         lambda: _cli(args.workdir, schema, src,
                      ["--direct_num_workers=2",
                       "--direct_running_mode=multi_processing"]))
  _table("examples (12 columns)", args.rows, src, results)


if __name__ == "__main__":
  main()

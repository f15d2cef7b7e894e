"""Times `beam-tfrecords build` on a generated CSV against the seeds' loop.

    python benchmarks/run.py [--rows 100000] [--workdir /tmp/btr-bench]

Prints a table: wall seconds, rows/s and the ratio against the seeds' loop
(csv module + tf.train.Example + tf.io.TFRecordWriter(GZIP)) measured in the
same run on the same file. The data is generated deterministically.
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


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--rows", type=int, default=100_000)
  p.add_argument("--workdir", default="/tmp/btr-bench")
  args = p.parse_args()
  os.makedirs(args.workdir, exist_ok=True)
  src = os.path.join(args.workdir, f"input-{args.rows}.csv")
  if not os.path.exists(src):
    make_csv(src, args.rows)
  schema = os.path.join(args.workdir, "schema.yaml")
  with open(schema, "w") as f:
    f.write(SCHEMA)
  results = []

  def timed(name, fn):
    start = time.perf_counter()
    fn()
    results.append((name, time.perf_counter() - start))

  def cli(extra):
    out = os.path.join(args.workdir, "out")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "beam_tfrecords", "build",
                    "--schema", schema, "--input", src, "--output", out]
                   + extra, check=True, stdout=subprocess.DEVNULL)

  timed("seed loop (csv + tf.train.Example + TFRecordWriter GZIP)",
        lambda: seed_loop(src, os.path.join(args.workdir, "seed.tfrecord.gz")))
  timed("beam-tfrecords build (DirectRunner defaults)", lambda: cli([]))
  timed("beam-tfrecords build (--direct_num_workers 2, multi_processing)",
        lambda: cli(["--direct_num_workers=2",
                     "--direct_running_mode=multi_processing"]))
  base = results[0][1]
  mb = os.path.getsize(src) / 1e6
  print(f"\n{args.rows:,} rows, {mb:.1f} MB CSV, {os.cpu_count()} cores\n")
  print(f"| approach | wall s | rows/s | vs seed loop |")
  print(f"|---|---|---|---|")
  for name, secs in results:
    print(f"| {name} | {secs:.1f} | {args.rows / secs:,.0f} | "
          f"{base / secs:.2f}x |")


if __name__ == "__main__":
  main()

"""The sequences suite: an event log (users x events, rows shuffled)
built as one Example per row and as one SequenceExample per user
(group_by user, order_by ts; also with 2 worker processes), with 10 events
per user on average (against a plain Python loop that groups in a dict)
and with 1,000 (long groups); every build also against the Example build.
With --sequence-memory-rows N, the same builds at N rows, for peak memory
(the plain loop cannot hold 10M rows' groups: it is not run there). One
table.
"""

import csv
import os
import random

from common import baseline_cmd, cli, run, show, timed_cmd


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


def plain_sequence_loop(src: str, dst: str) -> None:
  """A plain loop for sequences, grouped by hand: dict of lists, sort, protos, writer."""
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


def _events(args, rows: int, per_user: int) -> str:
  src = os.path.join(args.workdir, f"events-{rows}" + (
      f"-per{per_user}" if per_user != 10 else "") + ".csv")
  if not os.path.exists(src):
    run(baseline_cmd("make-events", src, str(rows), str(per_user)))
  return src


def _builds(results, workdir: str, schemas: dict, src: str) -> float:
  """The event log built as Examples and as SequenceExamples (also with 2
  worker processes), into `results`; the Example build's seconds."""
  cli(results, "build, one Example per row", workdir, schemas["rows"], src)
  example = results[-1].seconds
  cli(results, "build, SequenceExample per user: group_by + order_by",
      workdir, schemas["seq"], src)
  cli(results, "build, SequenceExample per user, 2 worker processes",
      workdir, schemas["seq"], src, ["--direct_num_workers=2",
                                     "--direct_running_mode=multi_processing"])
  return example


def sequences_suite(args) -> None:
  schemas = {}
  for name, text in (("rows", EVENTS_AS_EXAMPLES),
                     ("seq", EVENTS_AS_SEQUENCES)):
    schemas[name] = os.path.join(args.workdir, f"events-{name}.yaml")
    with open(schemas[name], "w") as f:
      f.write(text)
  inputs = [(args.rows, 10), (args.rows, 1000)]
  if args.sequence_memory_rows:
    inputs.append((args.sequence_memory_rows, 10))
  lines, plain = [], None
  for rows, per_user in inputs:
    src = _events(args, rows, per_user)
    results = []
    # The plain loop holds every group in memory: at the first input only.
    if plain is None:
      timed_cmd(results, "plain Python loop: group in a dict, sort, "
                "SequenceExample protos, TFRecordWriter GZIP",
                baseline_cmd("sequences", src, os.path.join(
                    args.workdir, "plain-seq.tfrecord.gz")))
      plain = results[0].seconds
    first = (rows, per_user) == inputs[0]
    example = _builds(results, args.workdir, schemas, src)
    what = f"{rows:,} rows, {max(1, rows // per_user):,} users"
    for r in results:
      lines.append((what, r.name, f"{r.seconds:.1f}", f"{r.peak_mb:,.0f}",
                    f"{plain / r.seconds:.2f}x" if first else "",
                    "" if r.name.startswith("plain") else
                    f"{r.seconds / example:.2f}x"))
      what = ""
  show("sequences", f"sequences (an event log, rows shuffled; one run of "
       f"each; build = DirectRunner defaults unless said; {os.cpu_count()} "
       "cores)", ["input", "approach", "wall s", "peak RSS MB",
                  "speed-up vs the plain loop", "wall / the Example build"],
       lines)

"""SequenceExamples end to end: real Beam pipelines, read back by TensorFlow."""

import json
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli

from tests.helpers.records import shard_paths, tf_records
EVENTS_SCHEMA = {
    "name": "events", "record": "sequence_example",
    "group_by": "user", "order_by": ["ts", {"item": "desc"}],
    "context": {"user": {"type": "int64"},
                "length": {"derive": "length"},
                "first_ts": {"type": "int64", "source": "ts",
                             "derive": "first"}},
    "sequence": {"ts": {"type": "int64", "required": True},
                 "item": {"type": "int64", "required": True},
                 "rating": {"type": "float", "required": True},
                 "tags": {"type": "string", "shape": [-1],
                          "separator": "|"}},
}


def event_rows(users=30, seed=0, big_user=None, big_rows=0):
  rng = random.Random(seed)
  rows = []
  for user in range(users):
    n = big_rows if user == big_user else rng.randint(1, 12)
    for i in range(n):
      # Timestamps tie often; item (descending) breaks most ties.
      rows.append({"user": user, "ts": rng.randint(0, n // 2 + 1),
                   "item": rng.randint(1, 50),
                   "rating": rng.choice([0.5, 1.0, 4.5]),
                   "tags": rng.sample(["a", "b", "c", "dé"],
                                      rng.randint(0, 2))})
  rng.shuffle(rows)
  return rows


def write_events_csv(path, rows):
  with open(path, "w", encoding="utf-8") as f:
    f.write("user,ts,item,rating,tags\n")
    for r in rows:
      f.write(f'{r["user"]},{r["ts"]},{r["item"]},{r["rating"]},'
              f'"{"|".join(r["tags"])}"\n')
  return str(path)


def hand_specs(tf):
  # Written by hand, as a user of the files would.
  context = {"user": tf.io.FixedLenFeature([], tf.int64),
             "length": tf.io.FixedLenFeature([], tf.int64),
             "first_ts": tf.io.FixedLenFeature([], tf.int64)}
  sequence = {"ts": tf.io.FixedLenSequenceFeature([], tf.int64),
              "item": tf.io.FixedLenSequenceFeature([], tf.int64),
              "rating": tf.io.FixedLenSequenceFeature([], tf.float32),
              "tags": tf.io.RaggedFeature(tf.string)}
  return context, sequence


def parse_all(tf, out):
  """Every record parsed with tf.io.parse_sequence_example, by user."""
  records = tf_records(tf, out)
  context, sequence, lengths = tf.io.parse_sequence_example(
      records, *hand_specs(tf))
  got = {}
  for i in range(len(records)):
    n = int(lengths["ts"][i])
    user = int(context["user"][i])
    got.setdefault(user, []).append({
        "length": int(context["length"][i]),
        "first_ts": int(context["first_ts"][i]),
        "ts": sequence["ts"][i][:n].numpy().tolist(),
        "item": sequence["item"][i][:n].numpy().tolist(),
        "rating": sequence["rating"][i][:n].numpy().tolist(),
        "tags": [[t.decode() for t in step]
                 for step in sequence["tags"][i].to_list()]})
  return got


def expected_steps(rows, user):
  mine = [r for r in rows if r["user"] == user]
  # ts ascending, then item descending; full ties broken by the values.
  return sorted(mine, key=lambda r: (r["ts"], -r["item"]))


def assert_user_sequence(seq, mine):
  assert seq["ts"] == [r["ts"] for r in mine]
  assert seq["item"] == [r["item"] for r in mine]
  # Rows tied on (ts, item) may come in either order, but as whole steps.
  assert sorted(zip(seq["ts"], seq["item"], seq["rating"],
                    map(tuple, seq["tags"]))) == sorted(
      (r["ts"], r["item"], r["rating"], tuple(r["tags"])) for r in mine)
  assert seq["length"] == len(mine)
  assert seq["first_ts"] == mine[0]["ts"]


def test_grouped_csv_rows_come_out_in_order(tf, tmp_path):
  rows = event_rows()
  src = write_events_csv(tmp_path / "events.csv", rows)
  out = str(tmp_path / "out")
  result = btr.build(EVENTS_SCHEMA, src, out)
  got = parse_all(tf, out)
  assert sorted(got) == list(range(30))
  for user, (seq,) in got.items():
    assert_user_sequence(seq, expected_steps(rows, user))
  counts = result.info.counts
  assert counts.to_json() == {"rows_read": len(rows), "rows_written": len(rows),
                    "rows_rejected": 0, "rows_dropped": 0,
                    "records_written": 30, "steps_written": len(rows),
                    "steps_dropped": 0}
  assert result.info.feature_spec["sequence"]["tags"] == {
      "kind": "RaggedFeature", "dtype": "string"}


@pytest.mark.slow
def test_records_are_the_same_with_two_worker_processes(tf, tmp_path):
  rows = event_rows(seed=5)
  src = write_events_csv(tmp_path / "events.csv", rows)
  one = btr.build(EVENTS_SCHEMA, src, str(tmp_path / "one"))
  # Other row order in the file, and two worker processes.
  random.Random(9).shuffle(rows)
  src2 = write_events_csv(tmp_path / "events2.csv", rows)
  two = btr.build(EVENTS_SCHEMA, src2, str(tmp_path / "two"), beam_args=[
      "--direct_num_workers=2", "--direct_running_mode=multi_processing"])
  assert sorted(tf_records(tf, one.output)) == sorted(
      tf_records(tf, two.output))
  # Records sort by group key inside a shard: the files are byte-identical
  # although the input rows came in another order.
  for a, b in zip(shard_paths(one.output), shard_paths(two.output)):
    with open(a, "rb") as fa, open(b, "rb") as fb:
      assert fa.read() == fb.read()


SEED_004_ROWS = [
    {"id": 1, "my_bytes": "data", "my_ints": [[5, 6], [7, 8, 9]],
     "tokens": [1, 2, 3], "labels": [0, 1, 0]},
    {"id": 2, "my_bytes": "more", "my_ints": [[], [1], [-2, 3]],
     "tokens": [4, 5, 1], "labels": [1, 0, 0]},
    {"id": 3, "my_bytes": None, "my_ints": [[9223372036854775807]],
     "tokens": [1], "labels": [1]},
]

LISTS_SCHEMA = {
    "name": "lists", "record": "sequence_example", "ragged": True,
    "context": {"id": {"type": "int64", "required": True},
                "my_bytes": {"type": "bytes"},
                "length": {"derive": "length", "of": "tokens"}},
    "sequence": {"my_ints": {"type": "int64", "shape": [-1]},
                 "tokens": {"type": "int64", "required": True},
                 "labels": {"type": "int64", "required": True}},
}


def _write_lists(fmt, path):
  if fmt == "jsonl":
    with open(path, "w") as f:
      for r in SEED_004_ROWS:
        f.write(json.dumps(r) + "\n")
  else:
    pq.write_table(pa.Table.from_pylist(SEED_004_ROWS), path)
  return str(path)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_list_columns_jsonl_and_parquet(tf, tmp_path, fmt):
  src = _write_lists(fmt, tmp_path / f"in.{fmt}")
  out = str(tmp_path / "out")
  result = btr.build(LISTS_SCHEMA, src, out)
  context_spec = {"id": tf.io.FixedLenFeature([], tf.int64),
                  "my_bytes": tf.io.VarLenFeature(tf.string),
                  "length": tf.io.FixedLenFeature([], tf.int64)}
  sequence_spec = {"my_ints": tf.io.RaggedFeature(tf.int64),
                   "tokens": tf.io.FixedLenSequenceFeature([], tf.int64),
                   "labels": tf.io.FixedLenSequenceFeature([], tf.int64)}
  records = tf_records(tf, out)
  assert len(records) == 3
  by_id = {}
  for r in records:
    ctx, seq = tf.io.parse_single_sequence_example(r, context_spec,
                                                   sequence_spec)
    by_id[int(ctx["id"])] = (ctx, seq)
  for row in SEED_004_ROWS:
    ctx, seq = by_id[row["id"]]
    assert seq["my_ints"].to_list() == row["my_ints"]
    assert seq["tokens"].numpy().tolist() == row["tokens"]
    assert seq["labels"].numpy().tolist() == row["labels"]
    assert int(ctx["length"]) == len(row["tokens"])
    assert ctx["my_bytes"].values.numpy().tolist() == (
        [] if row["my_bytes"] is None else [row["my_bytes"].encode()])
  assert result.info.counts.steps_written == 3 + 3 + 1
  # Plain Python, no TensorFlow.
  plain = {r["context"]["id"]: r for r in btr.iter_records(out)}
  assert plain[1] == {
      "context": {"id": 1, "my_bytes": b"data", "length": 3},
      "feature_lists": {"my_ints": [[5, 6], [7, 8, 9]], "tokens": [1, 2, 3],
                        "labels": [0, 1, 0]}}


def test_jsonl_and_parquet_give_identical_records(tf, tmp_path):
  outs = []
  for fmt in ("jsonl", "parquet"):
    src = _write_lists(fmt, tmp_path / f"in.{fmt}")
    outs.append(btr.build(LISTS_SCHEMA, src, str(tmp_path / fmt)).output)
  assert tf_records(tf, outs[0]) == tf_records(tf, outs[1])


def test_oversized_group_is_split_and_counts_add_up(tf, tmp_path):
  """One user with 2,000 rows among users with at most 12: 20 parts of
  max_length. (The group's size is not what is tested: 20,000 rows cost
  4 s more for the same 20 parts.)"""
  rows = event_rows(users=40, seed=2, big_user=17, big_rows=2_000)
  src = write_events_csv(tmp_path / "events.csv", rows)
  schema = {**EVENTS_SCHEMA, "max_length": 100, "overflow": "split",
            "context": {**EVENTS_SCHEMA["context"],
                        "part": {"derive": "part"}}}
  out = str(tmp_path / "out")
  result = btr.build(schema, src, out)
  counts = result.info.counts
  assert counts.rows_read == len(rows) == 2_000 + sum(
      1 for r in rows if r["user"] != 17)
  assert counts.steps_written == counts.rows_written == len(rows)
  assert counts.records_written == 39 + 20
  assert counts.rows_rejected == counts.rows_dropped == 0
  parts = {}
  for context, sequence in btr.load(out):
    if int(context["user"]) == 17:
      parts[int(context["part"])] = sequence["ts"].numpy().tolist()
      assert int(context["length"]) == 100
  assert sorted(parts) == list(range(20))
  joined = [t for p in sorted(parts) for t in parts[p]]
  assert joined == [r["ts"] for r in expected_steps(rows, 17)]


def test_oversized_group_rejected_goes_to_errors(tmp_path):
  rows = event_rows(users=10, seed=3, big_user=4, big_rows=3_000)
  src = write_events_csv(tmp_path / "events.csv", rows)
  schema = {**EVENTS_SCHEMA, "max_length": 500}
  out = str(tmp_path / "out")
  result = btr.build(schema, src, out, max_bad_fraction=1.0)
  counts = result.info.counts
  assert counts.rows_rejected == 3_000
  assert counts.records_written == 9
  assert counts.rows_read == counts.rows_written + 3_000
  (line,) = _error_lines(out)
  assert line["group"] == {"user": 4}
  assert line["rows"] == 3_000 and line["kind"] == "rejected"
  assert "3,000 rows, more than max_length 500 (overflow: reject)" in \
      line["reason"]
  assert line["examples"][0]["source"] == src
  assert isinstance(line["examples"][0]["row"], int)
  assert result.info.errors.rows == 3_000


def _error_lines(out):
  errors_dir = os.path.join(out, "errors")
  return [json.loads(line) for name in sorted(os.listdir(errors_dir))
          for line in open(os.path.join(errors_dir, name))]


def test_context_conflict_and_bad_rows_in_errors(tf, tmp_path):
  path = tmp_path / "e.csv"
  path.write_text("user,ts,item,rating,tags,country\n"
                  "1,1,10,1.0,,DE\n"
                  "1,2,11,1.0,,FR\n"          # country differs: group 1 out
                  "2,1,12,1.0,,DE\n"
                  "2,x,13,1.0,,DE\n"          # bad ts: this row only
                  ",3,14,1.0,,DE\n")          # no user: this row only
  # drop_step: a bad row leaves its group (the default rejects the group
  # whole: tests/e2e/test_group_rejection.py).
  schema = {**EVENTS_SCHEMA, "on_bad_step": "drop_step",
            "context": {**EVENTS_SCHEMA["context"], "country": "string"}}
  out = str(tmp_path / "out")
  result = btr.build(schema, str(path), out, max_bad_fraction=1.0)
  assert result.info.counts.to_json() == {
      "rows_read": 5, "rows_written": 1, "rows_rejected": 4,
      "rows_dropped": 0, "records_written": 1, "steps_written": 1,
      "steps_dropped": 0}
  lines = sorted(_error_lines(out), key=lambda e: (e["rows"], e["row"] or 0))
  assert [(e["row"], e["rows"]) for e in lines] == [(4, 1), (5, 1), (None, 2)]
  group = lines[-1]
  assert group["group"] == {"user": 1}
  assert "context feature \"country\" differs inside the group: 'DE'" in \
      group["reason"]
  assert [e["row"] for e in group["examples"]] == [1, 2]
  by_row = {e["row"]: e for e in lines[:2]}
  assert "could not parse 'x' as int64" in by_row[4]["reason"]
  assert by_row[4]["raw"]["ts"] == "x"
  assert 'column "user" has no value' in by_row[5]["reason"]
  (ctx, seq) = next(iter(btr.load(out)))
  assert int(ctx["user"]) == 2 and seq["item"].numpy().tolist() == [12]


def test_load_feature_spec_and_inspect(tf, tmp_path, capsys):
  src = _write_lists("jsonl", tmp_path / "in.jsonl")
  out = str(tmp_path / "out")
  btr.build(LISTS_SCHEMA, src, out)
  spec = btr.feature_spec(out)
  assert isinstance(spec.context_features["length"], tf.io.FixedLenFeature)
  assert isinstance(spec.context_features["my_bytes"], tf.io.VarLenFeature)
  assert isinstance(spec.sequence_features["tokens"],
                    tf.io.FixedLenSequenceFeature)
  assert isinstance(spec.sequence_features["my_ints"], tf.io.RaggedFeature)
  batched = list(btr.load(out, batch_size=8))
  assert len(batched) == 1
  context, sequence = batched[0]
  assert sorted(context["id"].numpy().tolist()) == [1, 2, 3]
  # Padded to the longest sequence of the batch.
  assert sequence["tokens"].shape == (3, 3)
  # The command's main() here: a child process costs 2 s of imports.
  capsys.readouterr()
  assert cli.main(["inspect", out, "--records", "1"]) == cli.EXIT_OK
  shown = capsys.readouterr().out
  assert "records 3 (7 steps)" in shown
  assert "sequence features (per step):" in shown
  assert "my_ints: RaggedFeature int64" in shown
  assert '"feature_lists": {"labels": [0, 1, 0], "my_ints": [[5, 6], ' \
      '[7, 8, 9]], "tokens": [1, 2, 3]}' in shown

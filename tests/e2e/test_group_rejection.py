"""Grouped SequenceExamples keep whole sequences: a group with a rejected
row is rejected whole (on_bad_step: reject_group, the default), or written
without the row (on_bad_step: drop_step)."""

import json
import os
import random

import numpy as np
import pytest

import beam_tfrecords as btr

from tests.helpers.records import tf_records


STORMS = {
    "name": "storms", "record": "sequence_example",
    "group_by": "storm", "order_by": "t",
    "context": {"storm": {"type": "string"}, "length": {"derive": "length"}},
    "sequence": {"t": {"type": "int64", "required": True},
                 "speed": {"type": "float", "required": True},
                 "lat": {"type": "float"}},
}
# Track B's steps that have an unparsable speed.
BAD_STEPS = (3, 7, 8, 12, 19)


def storm_rows(seed=0):
  """Three 20-step tracks, shuffled; B has 5 bad speeds ('x3', 'x7', ...)."""
  rows = []
  for storm in "ABC":
    for t in range(20):
      bad = storm == "B" and t in BAD_STEPS
      rows.append({"storm": storm, "t": t,
                   "speed": f"x{t}" if bad else 10.5 + t + ord(storm),
                   "lat": round(0.25 * t + ord(storm), 2)})
  random.Random(seed).shuffle(rows)
  return rows


def write_csv(path, rows):
  with open(path, "w", encoding="utf-8") as f:
    f.write("storm,t,speed,lat\n")
    for r in rows:
      f.write(f'{r["storm"]},{r["t"]},{r["speed"]},{r["lat"]}\n')
  return str(path)


def error_lines(out):
  errors_dir = os.path.join(out, "errors")
  return [json.loads(line) for name in sorted(os.listdir(errors_dir))
          for line in open(os.path.join(errors_dir, name))]


def parse_tracks(tf, out):
  """storm -> {"length", "t", "speed", "lat"}, parsed by TensorFlow."""
  context = {"storm": tf.io.FixedLenFeature([], tf.string),
             "length": tf.io.FixedLenFeature([], tf.int64)}
  sequence = {"t": tf.io.FixedLenSequenceFeature([], tf.int64),
              "speed": tf.io.FixedLenSequenceFeature([], tf.float32),
              "lat": tf.io.FixedLenSequenceFeature([], tf.float32)}
  got = {}
  for record in tf_records(tf, out):
    ctx, seq = tf.io.parse_single_sequence_example(record, context, sequence)
    storm = ctx["storm"].numpy().decode()
    assert storm not in got
    got[storm] = {"length": int(ctx["length"]),
                  "t": seq["t"].numpy().tolist(),
                  "speed": seq["speed"].numpy().tolist(),
                  "lat": seq["lat"].numpy().tolist()}
  return got


def expected_track(rows, storm, skip=()):
  mine = sorted((r for r in rows if r["storm"] == storm
                 and r["t"] not in skip), key=lambda r: r["t"])
  return {"length": len(mine), "t": [r["t"] for r in mine],
          "speed": np.float32([r["speed"] for r in mine]).tolist(),
          "lat": np.float32([r["lat"] for r in mine]).tolist()}


def bad_row_numbers(rows):
  """t -> the CSV data row (1-based) of track B's bad rows."""
  return {r["t"]: i + 1 for i, r in enumerate(rows)
          if r["storm"] == "B" and r["t"] in BAD_STEPS}


def records_by_storm(tf, out):
  context = {"storm": tf.io.FixedLenFeature([], tf.string)}
  return {tf.io.parse_single_sequence_example(r, context)[0]["storm"]
          .numpy().decode(): r for r in tf_records(tf, out)}


def test_group_with_bad_rows_is_rejected_whole(tf, tmp_path):
  rows = storm_rows()
  src = write_csv(tmp_path / "storms.csv", rows)
  out = str(tmp_path / "out")
  result = btr.build(STORMS, src, out, max_bad_fraction=1.0)

  got = parse_tracks(tf, out)
  assert sorted(got) == ["A", "C"]
  for storm in "AC":
    assert got[storm] == expected_track(rows, storm)
    assert got[storm]["length"] == 20

  assert result.info.counts.to_json() == {
      "rows_read": 60, "rows_written": 40, "rows_rejected": 20,
      "rows_dropped": 0, "records_written": 2, "steps_written": 40,
      "steps_dropped": 0}
  assert result.info.errors.rows == 20

  lines = error_lines(out)
  row_lines = [e for e in lines if e.get("group") is None]
  (group,) = [e for e in lines if e.get("group") is not None]
  bad_rows = bad_row_numbers(rows)
  # The bad rows, each with its raw row and its own reason.
  assert sorted((e["row"], e["rows"]) for e in row_lines) == sorted(
      (r, 1) for r in bad_rows.values())
  for e in row_lines:
    (t,) = [t for t, r in bad_rows.items() if r == e["row"]]
    assert e["source"] == src
    assert e["reason"] == (f'In feature "speed": could not parse \'x{t}\' '
                           "as float")
    assert e["raw"]["speed"] == f"x{t}" and e["raw"]["storm"] == "B"
  # One entry for the group's 15 good rows, naming its first bad row.
  first_row = min(bad_rows.values())
  first_t = [t for t, r in bad_rows.items() if r == first_row][0]
  assert group["group"] == {"storm": "B"}
  assert group["rows"] == 15 and group["kind"] == "rejected"
  assert group["row"] is None and group["source"] == src
  assert group["reason"].startswith(
      f"group_rejected_because_of_row: {src} row {first_row}: "
      f'In feature "speed": could not parse \'x{first_t}\' as float (')
  assert "5 of its rows were rejected" in group["reason"]
  assert "on_bad_step: drop_step" in group["reason"]
  good_rows = {i + 1 for i, r in enumerate(rows)
               if r["storm"] == "B" and r["t"] not in BAD_STEPS}
  assert len(group["examples"]) == 3
  assert all(x["source"] == src and x["row"] in good_rows
             for x in group["examples"])
  # The first steps of the track (t = 0, 1, 2) are the examples.
  assert [x["row"] for x in group["examples"]] == [
      i + 1 for t in (0, 1, 2) for i, r in enumerate(rows)
      if r["storm"] == "B" and r["t"] == t]


def test_drop_step_writes_the_track_without_its_bad_rows(tf, tmp_path):
  rows = storm_rows()
  src = write_csv(tmp_path / "storms.csv", rows)
  out = str(tmp_path / "out")
  result = btr.build({**STORMS, "on_bad_step": "drop_step"}, src, out,
                     max_bad_fraction=1.0)
  got = parse_tracks(tf, out)
  assert sorted(got) == ["A", "B", "C"]
  assert got["B"] == expected_track(rows, "B", skip=BAD_STEPS)
  assert got["B"]["length"] == 15
  for storm in "AC":
    assert got[storm] == expected_track(rows, storm)
  assert result.info.counts.to_json() == {
      "rows_read": 60, "rows_written": 55, "rows_rejected": 5,
      "rows_dropped": 0, "records_written": 3, "steps_written": 55,
      "steps_dropped": 0}
  lines = error_lines(out)
  assert sorted(e["row"] for e in lines) == sorted(
      bad_row_numbers(rows).values())
  assert all(e.get("group") is None for e in lines)
  assert result.info.schema["on_bad_step"] == "drop_step"


def test_good_groups_are_byte_identical_whatever_the_policy(tf, tmp_path):
  rows = storm_rows(seed=1)
  src = write_csv(tmp_path / "storms.csv", rows)
  clean = write_csv(tmp_path / "clean.csv",
                    [r for r in rows if r["storm"] != "B"])
  reject = btr.build(STORMS, src, str(tmp_path / "reject"),
                     max_bad_fraction=1.0)
  drop = btr.build({**STORMS, "on_bad_step": "drop_step"}, src,
                   str(tmp_path / "drop"), max_bad_fraction=1.0)
  only_good = btr.build(STORMS, clean, str(tmp_path / "clean"))
  a = records_by_storm(tf, reject.output)
  b = records_by_storm(tf, drop.output)
  c = records_by_storm(tf, only_good.output)
  assert sorted(a) == sorted(c) == ["A", "C"]
  assert a == c == {k: v for k, v in b.items() if k != "B"}
  # A clean input does not depend on the policy at all (the schema dict,
  # hence dataset.json, only names a policy that is not the default).
  assert "on_bad_step" not in only_good.info.schema


@pytest.mark.slow
def test_first_bad_row_does_not_depend_on_batches_or_workers(tf, tmp_path):
  """Track B spread over two files and many small batches: some batches
  hold only bad B rows; the reason names the smallest (source, row)."""
  rows = storm_rows(seed=2)
  bad = [r for r in rows if r["storm"] == "B" and r["t"] in BAD_STEPS]
  good = [r for r in rows if r not in bad]
  rng = random.Random(3)
  a_rows = good[::2] + bad[1:3]
  rng.shuffle(a_rows)
  b_rows = good[1::2] + bad[3:]
  rng.shuffle(b_rows)
  # b.csv starts with a bad B row: its row number (1) is the smallest, but
  # a.csv sorts first.
  a = write_csv(tmp_path / "a.csv", a_rows)
  b = write_csv(tmp_path / "b.csv", bad[:1] + b_rows)
  in_a = [i + 1 for i, r in enumerate(a_rows) if r in bad]
  one = btr.build(STORMS, [a, b], str(tmp_path / "one"),
                  max_bad_fraction=1.0)
  many = btr.build(STORMS, [b, a], str(tmp_path / "many"),
                   max_bad_fraction=1.0, format_options={"block_size": 64},
                   beam_args=["--direct_num_workers=2",
                              "--direct_running_mode=multi_processing"])
  for result in (one, many):
    (group,) = [e for e in error_lines(result.output)
                if e.get("group") is not None]
    assert group["rows"] == 15
    assert group["reason"].startswith(
        f"group_rejected_because_of_row: {a} row {min(in_a)}: ")
    assert result.info.counts.rows_rejected == 20
    assert result.info.counts.records_written == 2
  assert sorted(tf_records(tf, one.output)) == sorted(
      tf_records(tf, many.output))
  lines = [sorted(json.dumps(e, sort_keys=True)
                  for e in error_lines(r.output)) for r in (one, many)]
  assert lines[0] == lines[1]


def test_unreadable_keys_and_all_bad_groups(tmp_path):
  path = tmp_path / "e.csv"
  path.write_text("storm,t,speed,lat\n"
                  "A,1,1.0,0\n"
                  ",2,2.0,0\n"        # no key: a row error, no group
                  "A,2,2.0,0\n"
                  "D,1,bad,0\n"       # D has only bad rows: nothing more
                  "D,2,,0\n"          # missing required speed
                  "E,1,1.0,0\n"
                  "E,x,1.0,0\n")      # bad order_by value: E rejected
  out = str(tmp_path / "out")
  result = btr.build(STORMS, str(path), out, max_bad_fraction=1.0)
  assert result.info.counts.to_json() == {
      "rows_read": 7, "rows_written": 2, "rows_rejected": 5,
      "rows_dropped": 0, "records_written": 1, "steps_written": 2,
      "steps_dropped": 0}
  lines = error_lines(out)
  assert sorted(e["row"] for e in lines if e.get("group") is None) == [
      2, 4, 5, 7]
  (group,) = [e for e in lines if e.get("group") is not None]
  assert group["group"] == {"storm": "E"} and group["rows"] == 1
  assert group["reason"].startswith(
      f"group_rejected_because_of_row: {path} row 7: "
      "In feature \"order_by t\": could not parse 'x' as int64; "
      "In feature \"t\": could not parse 'x' as int64 (on_bad_step: "
      "drop_step writes the sequence without it)")
  assert "of its rows were rejected" not in group["reason"]
  assert group["examples"] == [{"source": str(path), "row": 6}]
  ((ctx, seq),) = list(btr.load(out))
  assert ctx["storm"].numpy() == b"A" and seq["t"].numpy().tolist() == [1, 2]


def test_context_conflict_input_under_both_policies(tmp_path):
  """The input of test_sequence_build's context-conflict test: group 2's
  bad ts row now takes its good row along (unless drop_step)."""
  path = tmp_path / "e.csv"
  path.write_text("user,ts,item,rating,tags,country\n"
                  "1,1,10,1.0,,DE\n"
                  "1,2,11,1.0,,FR\n"
                  "2,1,12,1.0,,DE\n"
                  "2,x,13,1.0,,DE\n"
                  ",3,14,1.0,,DE\n")
  schema = {"name": "events", "record": "sequence_example",
            "group_by": "user", "order_by": "ts",
            "context": {"user": {"type": "int64"}, "country": "string"},
            "sequence": {"ts": {"type": "int64", "required": True},
                         "item": {"type": "int64", "required": True}}}
  out = str(tmp_path / "reject")
  result = btr.build(schema, str(path), out, max_bad_fraction=1.0)
  assert result.info.counts.to_json() == {
      "rows_read": 5, "rows_written": 0, "rows_rejected": 5,
      "rows_dropped": 0, "records_written": 0, "steps_written": 0,
      "steps_dropped": 0}
  groups = {e["group"]["user"]: e for e in error_lines(out)
            if e.get("group") is not None}
  assert groups[1]["rows"] == 2 and "differs inside the group" in \
      groups[1]["reason"]
  assert groups[2]["rows"] == 1 and groups[2]["reason"].startswith(
      f"group_rejected_because_of_row: {path} row 4: ")
  out = str(tmp_path / "drop")
  result = btr.build({**schema, "on_bad_step": "drop_step"}, str(path), out,
                     max_bad_fraction=1.0)
  assert result.info.counts.rows_written == 1
  assert result.info.counts.rows_rejected == 4
  ((ctx, seq),) = list(btr.load(out))
  assert int(ctx["user"]) == 2 and seq["item"].numpy().tolist() == [12]

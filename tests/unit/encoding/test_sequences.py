"""SequenceExample encoders (no Beam): bytes, order, context, max_length."""

import pickle
import random

import numpy as np
import pytest

from beam_tfrecords.core.tfrecord_files import decode_sequence_example
from beam_tfrecords.encoding import (SequenceAssembler, SequenceEncoder,
                                     StepEncoder)
from beam_tfrecords.schema import load_schema

SEED_000 = {
    "name": "tokens_labels", "record": "sequence_example",
    "context": {"length": {"derive": "length"}},
    "sequence": {"tokens": {"type": "int64", "required": True},
                 "labels": {"type": "int64", "required": True}},
}


def seed_000_make_example(tf, sequence, labels):
  """Seed 000's own make_example, verbatim but for the TF 2 names."""
  ex = tf.train.SequenceExample()
  ex.context.feature["length"].int64_list.value.append(len(sequence))
  fl_tokens = ex.feature_lists.feature_list["tokens"]
  fl_labels = ex.feature_lists.feature_list["labels"]
  for token, label in zip(sequence, labels):
    fl_tokens.feature.add().int64_list.value.append(token)
    fl_labels.feature.add().int64_list.value.append(label)
  return ex


def test_seed_000_records_are_byte_identical(tf):
  sequences = [[1, 2, 3], [4, 5, 1], [1, 2]]
  labels = [[0, 1, 0], [1, 0, 0], [1, 1]]
  result = SequenceEncoder(SEED_000).encode_rows(
      [{"tokens": s, "labels": l} for s, l in zip(sequences, labels)])
  assert result.errors == []
  assert result.steps.tolist() == [3, 3, 2]
  expected = [seed_000_make_example(tf, s, l).SerializeToString(
      deterministic=True) for s, l in zip(sequences, labels)]
  assert result.record_list() == expected


def test_seed_004_lists_of_lists_are_byte_identical(tf):
  schema = {"name": "s", "record": "sequence_example",
            "context": {"my_bytes": {"type": "bytes"}},
            "sequence": {"my_ints": {"type": "int64", "shape": [-1]}}}
  result = SequenceEncoder(schema).encode_rows(
      [{"my_bytes": "data", "my_ints": [[5, 6], [7, 8, 9]]}])
  expected = tf.train.SequenceExample(
      context=tf.train.Features(feature={
          "my_bytes": tf.train.Feature(
              bytes_list=tf.train.BytesList(value=[b"data"]))}),
      feature_lists=tf.train.FeatureLists(feature_list={
          "my_ints": tf.train.FeatureList(feature=[
              tf.train.Feature(int64_list=tf.train.Int64List(value=[5, 6])),
              tf.train.Feature(int64_list=tf.train.Int64List(
                  value=[7, 8, 9]))])}))
  assert result.record_list() == [expected.SerializeToString(
      deterministic=True)]


LIST_SCHEMA = {
    "name": "l", "record": "sequence_example",
    "context": {"id": {"type": "string", "required": True},
                "n": {"derive": "length"}},
    "sequence": {"tok": {"type": "string", "separator": " "},
                 "pos": {"type": "float", "default": -1.0}},
}

LIST_CASES = [
    # (id, row, expected context, expected lists) or (id, row, error text)
    ("json_lists", {"id": "a", "tok": ["x", "y"], "pos": [0.5, 1.5]},
     {"n": 2}, {"tok": ["x", "y"], "pos": [0.5, 1.5]}),
    ("csv_separator", {"id": "b", "tok": "x y z", "pos": "[1, 2, 3]"},
     {"n": 3}, {"tok": ["x", "y", "z"], "pos": [1.0, 2.0, 3.0]}),
    ("null_step_takes_default", {"id": "c", "tok": ["x", "y"],
                                 "pos": [None, 2]},
     {"n": 2}, {"tok": ["x", "y"], "pos": [-1.0, 2.0]}),
    ("null_step_without_default_is_empty",
     {"id": "d", "tok": ["x", None], "pos": [1, 2]},
     {"n": 2}, {"tok": ["x", None], "pos": [1.0, 2.0]}),
    ("missing_list_is_absent", {"id": "e", "tok": None, "pos": [1, 2]},
     {"n": 2}, {"tok": None, "pos": [1.0, 2.0]}),
    ("empty_lists", {"id": "f", "tok": "", "pos": []},
     {"n": 0}, {"tok": [], "pos": []}),
    ("lengths_differ", {"id": "g", "tok": ["x"], "pos": [1, 2]},
     "the feature lists differ in length: pos has 2 steps, tok has 1 steps"),
    ("bad_step_value", {"id": "h", "tok": ["x", "y"], "pos": [1, "two"]},
     "at step 1: could not parse 'two' as float"),
    ("not_a_list", {"id": "i", "tok": ["x"], "pos": 5},
     "expected a list of steps"),
    ("bad_json", {"id": "j", "tok": ["x"], "pos": "[1, 2"},
     "as a JSON list of steps"),
    # (issue 60) A step float64 reads as inf is refused as 3.4e39 is; a
    # list too deep for json is a reason, not a RecursionError.
    ("step_past_float64", {"id": "k", "tok": ["x", "y"],
                           "pos": "[1.5, 1e309]"},
     "at step 1: 1E+309 is outside the float32 range (+-3.402823e+38); it "
     "would be stored as inf"),
    ("too_deep_to_parse", {"id": "l", "tok": ["x"],
                           "pos": "[" * 10_000 + "]" * 10_000},
     "as a JSON list of steps: it is nested too deep to read"),
    ("required_context_missing", {"id": None, "tok": ["x"], "pos": [1]},
     'required value is missing (column "id" has no value)'),
]


def _decode(schema, record):
  s = load_schema(schema)
  context, lists = decode_sequence_example(record)
  ctx = {k: (v[0] if len(v) == 1 else v) for k, (_, v) in context.items()}
  out = {}
  for f in s.sequence:
    steps = lists.get(f.name)
    out[f.name] = None if steps is None else [
        (v[0].decode() if isinstance(v[0], bytes) else v[0]) if v else None
        for _, v in steps]
  return ctx, out


@pytest.mark.parametrize("case", LIST_CASES, ids=[c[0] for c in LIST_CASES])
def test_list_columns(case):
  row = case[1]
  result = SequenceEncoder(LIST_SCHEMA).encode_rows([row])
  if len(case) == 3:
    assert result.record_list() == []
    assert len(result.errors) == 1
    assert case[2] in result.errors[0].reason
    return
  assert result.errors == []
  ctx, lists = _decode(LIST_SCHEMA, result.record_list()[0])
  assert ctx == {"id": row["id"].encode(), **case[2]}
  assert lists == case[3]


def test_ragged_feature_lists_need_the_declaration():
  schema = {**LIST_SCHEMA, "ragged": True,
            "context": {"n": {"derive": "length"},
                        "n_tok": {"derive": "length", "of": "tok"}}}
  result = SequenceEncoder(schema).encode_rows(
      [{"tok": ["x"], "pos": [1, 2, 3]}])
  assert result.errors == []
  ctx, lists = _decode(schema, result.record_list()[0])
  assert ctx == {"n": 3, "n_tok": 1}
  assert lists == {"tok": ["x"], "pos": [1.0, 2.0, 3.0]}


@pytest.mark.parametrize("overflow,expected", [
    ("keep_first", [[0, 1, 2]]),
    ("keep_last", [[4, 5, 6]]),
    ("split", [[0, 1, 2], [3, 4, 5], [6]]),
], ids=["keep_first", "keep_last", "split"])
def test_list_max_length(overflow, expected):
  schema = {"name": "m", "record": "sequence_example", "max_length": 3,
            "overflow": overflow,
            "context": {"n": {"derive": "length"}, "part": {"derive": "part"}},
            "sequence": {"v": {"type": "int64"}, "w": {"type": "int64"}}}
  rows = [{"v": list(range(7)), "w": [10 * i for i in range(7)]},
          {"v": [9], "w": [90]}]
  result = SequenceEncoder(schema).encode_rows(rows)
  decoded = [_decode(schema, r) for r in result.record_list()]
  assert [d[1]["v"] for d in decoded] == expected + [[9]]
  assert [d[1]["w"] for d in decoded] == [[10 * v for v in e]
                                          for e in expected] + [[90]]
  assert [d[0]["n"] for d in decoded] == [len(e) for e in expected] + [1]
  assert [d[0]["part"] for d in decoded] == list(range(len(expected))) + [0]
  assert result.rows.tolist() == [0] * len(expected) + [1]
  assert result.rows_written == 2
  assert result.dropped_steps == (0 if overflow == "split" else 4)


def test_list_max_length_reject_and_record_size_guard():
  schema = {"name": "m", "record": "sequence_example", "max_length": 3,
            "sequence": {"v": {"type": "bytes"}}}
  result = SequenceEncoder(schema).encode_rows(
      [{"v": ["a"] * 4}, {"v": ["b"] * 3}])
  assert result.rows.tolist() == [1]
  assert "4 steps, more than max_length 3 (overflow: reject)" in \
      result.errors[0].reason
  big = {**schema, "max_record_bytes": "1KiB"}
  del big["max_length"]
  result = SequenceEncoder(big).encode_rows(
      [{"v": ["x" * 600, "y" * 600]}, {"v": ["small"]}])
  assert result.rows.tolist() == [1]
  assert "over max_record_bytes 1,024; set max_length" in \
      result.errors[0].reason


GROUPED = {
    "name": "g", "record": "sequence_example", "group_by": "user",
    "order_by": ["ts", {"score": "desc"}],
    "context": {"user": {"type": "int64"}, "country": "string",
                "length": {"derive": "length"},
                "first_ts": {"type": "int64", "source": "ts",
                             "derive": "first"},
                "last_item": {"type": "string", "source": "item",
                              "derive": "last"}},
    "sequence": {"ts": {"type": "int64"}, "score": {"type": "float"},
                 "item": {"type": "string", "required": True}},
}


def _rows(n_users=6, seed=0):
  rng = random.Random(seed)
  rows = []
  for u in range(n_users):
    for i in range(rng.randint(1, 8)):
      rows.append({"user": str(u), "ts": str(rng.randint(0, 3)),
                   "score": str(rng.choice([0.5, 1.5, 2.5])),
                   "item": f"i{rng.randint(0, 3)}", "country": f"c{u}"})
  return rows


def _assemble(schema, rows, chunk_size, row_numbers=None):
  """Encode rows in chunks, group them like GroupByKey, assemble each group."""
  encoder, assembler = StepEncoder(schema), SequenceAssembler(schema)
  groups = {}
  for start in range(0, len(rows), chunk_size):
    batch = encoder.encode_rows(rows[start:start + chunk_size])
    for key, steps in batch.groups:
      groups.setdefault(key, []).append((f"part{start}", steps))
  return {key: assembler.assemble(chunks) for key, chunks in groups.items()}


def _expected_order(rows):
  # ts ascending, score descending; ties keep any order (checked as sets).
  return sorted(rows, key=lambda r: (int(r["ts"]), -float(r["score"])))


def test_grouped_order_values_and_derived_context():
  rows = _rows()
  results = _assemble(GROUPED, rows, chunk_size=5)
  assert sorted(results) == [(u,) for u in range(6)]
  for (user,), result in results.items():
    assert result.errors == []
    (record,) = result.records
    ctx, lists = _decode(GROUPED, record)
    mine = _expected_order([r for r in rows if r["user"] == str(user)])
    keys = [(int(r["ts"]), -float(r["score"])) for r in mine]
    assert list(zip(lists["ts"], [-s for s in lists["score"]])) == keys
    assert sorted(lists["item"]) == sorted(r["item"] for r in mine)
    assert ctx == {"user": user, "country": f"c{user}".encode(),
                   "length": len(mine), "first_ts": int(mine[0]["ts"]),
                   "last_item": lists["item"][-1].encode()}


def test_grouped_bytes_do_not_depend_on_row_order_or_batching():
  rows = _rows(seed=3)
  reference = {k: r.records for k, r in _assemble(GROUPED, rows, 1000).items()}
  for seed in range(5):
    shuffled = list(rows)
    random.Random(seed).shuffle(shuffled)
    got = _assemble(GROUPED, shuffled, chunk_size=seed + 1)
    assert {k: r.records for k, r in got.items()} == reference


def test_grouped_context_conflict_rejects_the_group_with_both_values():
  rows = [{"user": "1", "ts": "1", "score": "1", "item": "a", "country": "DE"},
          {"user": "1", "ts": "2", "score": "1", "item": "b", "country": "FR"},
          {"user": "2", "ts": "1", "score": "1", "item": "c", "country": "DE"}]
  results = _assemble(GROUPED, rows, chunk_size=10)
  assert len(results[(2,)].records) == 1
  conflict = results[(1,)]
  assert conflict.records == []
  (error,) = conflict.errors
  assert error.rows == 2 and not error.dropped
  assert "context feature \"country\" differs inside the group: 'DE' " \
      "(part0) vs 'FR' (part0)" in error.reason
  assert "declare derive: first / last" in error.reason


def test_grouped_bad_rows_are_row_errors():
  rows = [{"user": None, "ts": "1", "item": "a", "country": "x"},
          {"user": "1", "ts": "soon", "item": "a", "country": "x"},
          {"user": "1", "ts": "1", "score": "nan", "item": "a",
           "country": "x"},
          {"user": "1", "ts": "1", "item": None, "country": "x"},
          {"user": "1", "ts": "1", "score": "2", "item": "ok",
           "country": "x"},
          {"user": "1", "ts": "1", "item": "no score", "country": "x"}]
  batch = StepEncoder(GROUPED).encode_rows(rows)
  reasons = {e.row: e.reason for e in batch.errors}
  assert sorted(reasons) == [0, 1, 2, 3, 5]
  assert 'column "user" has no value' in reasons[0]
  assert "could not parse 'soon' as int64" in reasons[1]
  assert "NaN cannot be ordered" in reasons[2]
  assert 'required value is missing (column "item"' in reasons[3]
  assert 'In feature "order_by score": required value is missing' in \
      reasons[5]
  assert [(k, len(s)) for k, s in batch.groups] == [((1,), 1)]


@pytest.mark.parametrize("overflow", ["reject", "keep_first", "keep_last",
                                      "split"])
def test_grouped_max_length(overflow):
  schema = {**GROUPED, "max_length": 4, "overflow": overflow,
            "order_by": "ts", "context": {"part": {"derive": "part"},
                                          "length": {"derive": "length"}}}
  rows = [{"user": "1", "ts": str(t), "item": f"i{t}"} for t in range(10)]
  random.Random(1).shuffle(rows)
  (result,) = _assemble(schema, rows, chunk_size=3).values()
  decoded = [_decode(schema, r) for r in result.records]
  items = [d[1]["item"] for d in decoded]
  expected = {"reject": [], "keep_first": [["i0", "i1", "i2", "i3"]],
              "keep_last": [["i6", "i7", "i8", "i9"]],
              "split": [["i0", "i1", "i2", "i3"], ["i4", "i5", "i6", "i7"],
                        ["i8", "i9"]]}[overflow]
  assert items == expected
  assert [d[0]["part"] for d in decoded] == list(range(len(expected)))
  assert [d[0]["length"] for d in decoded] == [len(e) for e in expected]
  assert result.rows_written + sum(e.rows for e in result.errors) == 10
  if overflow in ("keep_first", "keep_last"):
    (error,) = result.errors
    assert error.dropped and error.rows == 6
  if overflow == "reject":
    (error,) = result.errors
    assert not error.dropped and "10 rows, more than max_length 4" in \
        error.reason


def test_grouped_record_size_guard():
  schema = {**GROUPED, "order_by": "ts", "max_record_bytes": 70_000,
            "context": {}}
  rows = [{"user": "1", "ts": str(t), "item": "x" * 1000} for t in range(80)]
  rows += [{"user": "2", "ts": "1", "item": "small"}]
  results = _assemble(schema, rows, chunk_size=50)
  # No feature reads "user" now, so the key is its text.
  assert len(results[(b"2",)].records) == 1
  assert results[(b"1",)].records == []
  (error,) = results[(b"1",)].errors
  assert error.rows == 80
  assert "over max_record_bytes 70,000" in error.reason


@pytest.mark.parametrize("encoder", [SequenceEncoder, StepEncoder,
                                     SequenceAssembler])
def test_encoders_pickle_as_their_schema(encoder):
  schema = GROUPED if encoder is not SequenceEncoder else LIST_SCHEMA
  enc = encoder(schema)
  again = pickle.loads(pickle.dumps(enc))
  assert type(again) is encoder
  assert again._schema == load_schema(schema)


def test_wire_helpers_agree_with_protobuf(tf):
  """The vectorized and the one-record writers give protobuf's bytes."""
  from beam_tfrecords.encoding import record_bytes, wire
  from beam_tfrecords.encoding.ragged import Ragged
  f1 = tf.train.Feature(int64_list=tf.train.Int64List(value=[1, -2]))
  f2 = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"", b"z"]))
  expected = tf.train.SequenceExample(
      context=tf.train.Features(feature={"a": f1}),
      feature_lists=tf.train.FeatureLists(feature_list={
          "b": tf.train.FeatureList(feature=[f2, f2]),
          "c": tf.train.FeatureList(feature=[])})).SerializeToString(
              deterministic=True)
  got = record_bytes.sequence_example_bytes(
      [("a", f1.SerializeToString())],
      [("b", [f2.SerializeToString()] * 2), ("c", [])])
  assert got == expected
  steps = Ragged(np.frombuffer(f2.SerializeToString() * 2, np.uint8),
                 np.array([0, len(f2.SerializeToString()),
                           2 * len(f2.SerializeToString())]))
  ctx = Ragged(np.frombuffer(f1.SerializeToString(), np.uint8),
               np.array([0, len(f1.SerializeToString())]))
  lists_b = wire.feature_lists(steps, np.array([0, 2]))
  lists_c = wire.feature_lists(steps, np.array([0, 0]))
  one = np.ones(1, dtype=bool)
  vec = wire.sequence_example_message(
      [wire.Entry("a", ctx, one)],
      [wire.Entry("b", lists_b, one), wire.Entry("c", lists_c, one)], 1)
  assert vec.to_list() == [expected]


def test_grouped_descending_text_order_and_ties():
  schema = {**GROUPED, "order_by": [{"item": "desc"}, "ts"],
            "context": {}}
  rows = [{"user": "1", "ts": "2", "item": "b", "score": "1"},
          {"user": "1", "ts": "1", "item": "b", "score": "2"},
          {"user": "1", "ts": "1", "item": "b", "score": "0"},
          {"user": "1", "ts": "9", "item": "a"},
          {"user": "1", "ts": "0", "item": "c"}]
  for seed in range(4):
    random.Random(seed).shuffle(rows)
    (result,) = _assemble(schema, rows, chunk_size=2).values()
    _, lists = _decode(schema, result.records[0])
    assert lists["item"] == ["c", "b", "b", "b", "a"]
    assert lists["ts"] == [0, 1, 1, 2, 9]
    # (b, 1) ties: broken by the steps' serialized values, the same each run.
    assert lists["score"] == [None, 0.0, 2.0, 1.0, None]


# Regressions found in review.

@pytest.mark.parametrize("cells", [[b"\xff|\xfe", b"ab"], [b"\xff|\xfe", b""]],
                         ids=["arrow_path", "python_path"])
def test_bytes_steps_split_as_bytes(cells):
  import pyarrow as pa
  schema = {"name": "b", "record": "sequence_example",
            "sequence": {"v": {"type": "bytes", "separator": "|"}}}
  result = SequenceEncoder(schema).encode_columns(
      {"v": pa.array(cells, pa.binary())}, 2)
  assert result.errors == []
  _, lists = decode_sequence_example(result.record_list()[0])
  assert [v for _, v in lists["v"]] == [[b"\xff"], [b"\xfe"]]


@pytest.mark.parametrize("cells", [[b"a|b", b"\xff|c"], [b"a|b", b"\xff|c", b""]],
                         ids=["arrow_path", "python_path"])
def test_invalid_utf8_string_step_is_a_row_error(cells):
  import pyarrow as pa
  schema = {"name": "s", "record": "sequence_example",
            "sequence": {"v": {"type": "string", "separator": "|"}}}
  result = SequenceEncoder(schema).encode_columns(
      {"v": pa.array(cells, pa.binary())}, len(cells))
  assert [e.row for e in result.errors] == [1]
  assert "at step 0: b'\\xff' is not valid UTF-8" in result.errors[0].reason
  assert result.rows.tolist() == [0] + ([2] if len(cells) == 3 else [])


def test_ties_do_not_let_input_order_pick_context_values():
  schema = {"name": "t", "record": "sequence_example", "group_by": "u",
            "order_by": {"column": "ts", "type": "int64"},
            "context": {"last_c": {"type": "string", "source": "c",
                                   "derive": "last"}},
            "sequence": {"one": {"type": "int64", "default": 1}}}
  rows = [{"u": "1", "ts": "1", "c": "A"}, {"u": "1", "ts": "1", "c": "B"}]
  a = _assemble(schema, rows, 1)
  b = _assemble(schema, rows[::-1], 1)
  assert a[(b"1",)].records == b[(b"1",)].records
  assert _decode(schema, a[(b"1",)].records[0])[0] == {"last_c": b"B"}


def test_float_keys_minus_zero_is_zero_and_nan_is_rejected():
  schema = {"name": "f", "record": "sequence_example",
            "group_by": {"column": "k", "type": "float"},
            "sequence": {"v": "int64"}}
  rows = [{"k": "-0.0", "v": "1"}, {"k": "0.0", "v": "2"},
          {"k": "nan", "v": "3"}]
  batches = [StepEncoder(schema).encode_rows([r]) for r in rows]
  assert [k for b in batches for k, _ in b.groups] == [(0.0,), (0.0,)]
  assert repr(batches[0].groups[0][0][0]) == "0.0"
  assert "NaN cannot be grouped" in batches[2].errors[0].reason


def test_small_max_record_bytes_still_writes_small_groups():
  schema = {**GROUPED, "order_by": "ts", "context": {},
            "max_record_bytes": "2KiB"}
  rows = [{"user": "1", "ts": "1", "item": "a"},
          {"user": "2", "ts": "1", "item": "b" * 3000}]
  results = _assemble(schema, rows, 10)
  assert len(results[(b"1",)].records) == 1
  assert results[(b"2",)].records == []


def test_rejected_rows_do_not_count_dropped_steps():
  schema = {"name": "m", "record": "sequence_example", "max_length": 2,
            "overflow": "keep_last", "max_record_bytes": "1KiB",
            "sequence": {"v": {"type": "bytes"}}}
  result = SequenceEncoder(schema).encode_rows(
      [{"v": ["x" * 700] * 4}, {"v": ["y"] * 3}])
  assert result.rows.tolist() == [1]
  assert result.dropped_steps == 1


def test_keep_last_names_dropped_rows_even_when_keys_tie():
  schema = {**GROUPED, "order_by": "ts", "context": {}, "max_length": 1,
            "overflow": "keep_last"}
  rows = [{"user": "1", "ts": "1", "item": "a"},
          {"user": "1", "ts": "1", "item": "a"}]
  encoder, assembler = StepEncoder(schema), SequenceAssembler(schema)
  batch = encoder.encode_columns(
      {c: [r.get(c) for r in rows] for c in ("user", "ts", "item")}, 2,
      row_numbers=[7, 8])
  result = assembler.assemble([("f.csv", batch.groups[0][1])])
  (error,) = result.errors
  assert error.dropped and error.rows == 1
  assert error.examples == (("f.csv", 7),)

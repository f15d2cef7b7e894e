"""The vectorized group assembly (encoding.groups) against the reference
(encoding.assembler.SequenceAssembler, one group at a time): the same
records, byte for byte, the same steps and the same errors, for every
policy and kind of key, over random data."""

import random

import pytest

from beam_tfrecords.encoding import SequenceAssembler, StepEncoder
from beam_tfrecords.encoding.groups import GroupAssembler
from beam_tfrecords.encoding.steps import key_hash

BASE = {
    "name": "g", "record": "sequence_example", "group_by": "user",
    "order_by": ["ts", {"score": "desc"}],
    "context": {"user": {"type": "int64"}, "country": "string",
                "length": {"derive": "length"},
                "first_ts": {"type": "int64", "source": "ts",
                             "derive": "first"},
                "last_item": {"type": "string", "source": "item",
                              "derive": "last"}},
    "sequence": {"ts": {"type": "int64"}, "score": {"type": "float"},
                 "item": {"type": "string", "required": True},
                 "tags": {"type": "string", "shape": [-1],
                          "separator": "|"}},
}


def _variant(**changes):
  schema = dict(BASE, **{k: v for k, v in changes.items()
                         if k not in ("context", "sequence")})
  schema["context"] = dict(BASE["context"], **changes.get("context", {}))
  schema["sequence"] = dict(BASE["sequence"], **changes.get("sequence", {}))
  return schema


def _rows(rng, users, conflicts=0.0, bad=0.0, key=str):
  rows = []
  for u in range(users):
    for _ in range(rng.choice([1, 1, 2, 3, 5, 9, 14, 30])):
      row = {"user": key(u), "ts": str(rng.randint(0, 4)),
             "score": rng.choice(["0.5", "1.5", "-0.0", "0.0", ""]),
             "item": f"i{rng.randint(0, 3)}",
             "tags": rng.choice(["", "a", "a|b", "b|a|c"]),
             "country": f"c{u}"}
      if rng.random() < conflicts:
        row["country"] = rng.choice(["zz", ""])
      if rng.random() < bad:
        row["ts"] = "oops"
      rows.append(row)
  rng.shuffle(rows)
  return rows


def _reference(schema, batches):
  """key -> GroupResult, grouped like GroupByKey."""
  encoder, assembler = StepEncoder(schema), SequenceAssembler(schema)
  groups, bad = {}, {}
  for path, rows, numbers in batches:
    batch = encoder.encode_columns(
        {c: [r.get(c) for r in rows] for c in encoder.schema.columns},
        len(rows), numbers)
    for key, steps in batch.groups:
      groups.setdefault(key, []).append((path, steps))
    for key, row, reason in batch.bad:
      bad.setdefault(key, []).append((path, numbers[row], reason, 1))
  return {key: assembler.assemble(batches, bad.get(key, ()))
          for key, batches in groups.items()}, bad


def _fast(schema, batches, buckets=1):
  encoder = StepEncoder(schema)
  blocks, bad = [], {}
  for path, rows, numbers in batches:
    steps = encoder.encode_table(
        {c: [r.get(c) for r in rows] for c in encoder.schema.columns},
        len(rows), numbers)
    blocks.append((path, steps.table))
    for key, row, reason in steps.bad:
      bad.setdefault(key, []).append((path, numbers[row], reason, 1))
  assembler = GroupAssembler(schema)
  out = []
  for b in range(buckets):
    mine = [(p, t.filter(key_hash(t) % buckets == b)) for p, t in blocks]
    out.append(assembler.assemble(mine, bad))
  return out


def _batches(rng, rows, paths=("b.csv", "a.csv")):
  out, start = [], 0
  while start < len(rows):
    size = rng.randint(1, 40)
    part = rows[start:start + size]
    path = rng.choice(paths)
    numbers = (None if rng.random() < 0.3 else
               [start + i + 2 for i in range(len(part))])
    out.append((path, part, numbers or [None] * len(part)))
    start += size
  return out


CASES = {
    "plain": {},
    "split": {"max_length": 3, "overflow": "split",
              "context": {"part": {"derive": "part"}}},
    "keep_first": {"max_length": 4, "overflow": "keep_first"},
    "keep_last": {"max_length": 4, "overflow": "keep_last"},
    "reject": {"max_length": 6, "overflow": "reject"},
    "small_records": {"max_record_bytes": 1024},
    "small_split": {"max_record_bytes": 1024, "max_length": 13,
                    "overflow": "split"},
    "drop_step": {"on_bad_step": "drop_step"},
    "float_key": {"group_by": {"column": "user", "type": "float"},
                  "context": {"user": {"type": "float"}}},
    "string_key_desc": {"group_by": {"column": "user", "type": "string"},
                        "order_by": [{"item": "desc"}],
                        "context": {"user": {"type": "string"}}},
    "two_keys": {"group_by": ["user", "country"], "order_by": "ts"},
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_same_records_and_errors_as_the_reference(case, seed):
  schema = _variant(**CASES[case])
  rng = random.Random(seed)
  key = {"float_key": lambda u: f"{u / 4}" if u % 5 else "-0.0",
         "string_key_desc": lambda u: f"u{u}" if u % 3 else ""}.get(
             case, str)
  rows = _rows(rng, 60, conflicts=0.05, bad=0.04, key=key)
  batches = _batches(rng, rows)
  expected, _ = _reference(schema, batches)
  for buckets in (1, 3):
    got = {}
    errors = {}
    for result in _fast(schema, batches, buckets):
      assert result.keys == sorted(result.keys)
      for k, records in result.batches():
        got[k] = records
      steps = iter(result.steps.tolist())
      for k, records in result.batches():
        assert [next(steps) for _ in records] == expected[k].steps
      for k, error in result.errors:
        errors.setdefault(k, []).append(error)
    assert got == {k: r.records for k, r in expected.items() if r.records}
    assert errors == {k: r.errors for k, r in expected.items() if r.errors}
  # The case is not empty: records, and errors where the policy makes them.
  assert got
  if case in ("keep_first", "keep_last", "reject", "small_records",
              "small_split", "plain"):
    assert errors


def test_records_read_back_in_order(tf):
  schema = _variant()
  rows = [{"user": "7", "ts": "2", "score": "1.5", "item": "b", "tags": "x",
           "country": "fr"},
          {"user": "7", "ts": "1", "score": "0.5", "item": "a", "tags": "",
           "country": "fr"},
          {"user": "3", "ts": "5", "score": "2.5", "item": "c", "tags": "p|q",
           "country": "de"}]
  (result,) = _fast(schema, [("x.csv", rows, [2, 3, 4])])
  assert result.keys == [(3,), (7,)]
  assert result.steps.tolist() == [1, 2]
  records = dict(result.batches())
  context_spec = {"user": tf.io.FixedLenFeature([], tf.int64),
                  "country": tf.io.FixedLenFeature([], tf.string),
                  "length": tf.io.FixedLenFeature([], tf.int64),
                  "first_ts": tf.io.FixedLenFeature([], tf.int64),
                  "last_item": tf.io.FixedLenFeature([], tf.string)}
  list_spec = {"ts": tf.io.FixedLenSequenceFeature([], tf.int64),
               "score": tf.io.FixedLenSequenceFeature([], tf.float32),
               "item": tf.io.FixedLenSequenceFeature([], tf.string),
               "tags": tf.io.RaggedFeature(tf.string)}
  ctx, lists = tf.io.parse_single_sequence_example(
      records[(7,)][0], context_spec, list_spec)
  assert {k: v.numpy().tolist() if k != "country" and k != "last_item"
          else v.numpy() for k, v in ctx.items()} == {
      "user": 7, "country": b"fr", "length": 2, "first_ts": 1,
      "last_item": b"b"}
  assert lists["ts"].numpy().tolist() == [1, 2]
  assert lists["score"].numpy().tolist() == [0.5, 1.5]
  assert lists["item"].numpy().tolist() == [b"a", b"b"]
  assert lists["tags"].to_list() == [[], [b"x"]]
  ctx, lists = tf.io.parse_single_sequence_example(
      records[(3,)][0], context_spec, list_spec)
  assert ctx["country"].numpy() == b"de"
  assert lists["tags"].to_list() == [[b"p", b"q"]]


def test_key_hash_is_the_same_for_equal_keys_of_any_batch():
  encoder = StepEncoder(_variant(group_by={"column": "user",
                                           "type": "string"},
                                 context={"user": {"type": "string"}}))

  def hashes(users):
    n = len(users)
    steps = encoder.encode_table({"user": users, "ts": ["1"] * n,
                                  "score": ["1"] * n, "item": ["x"] * n}, n)
    assert steps.errors == []
    return key_hash(steps.table).tolist()

  a = hashes(["alpha", "y", "b", "alpha", "\u00df", "ab"])
  b = hashes(["\u00df", "b", "alpha", "y", "ba"])
  assert a[0] == a[3] == b[2] and a[1] == b[3] and a[4] == b[0]
  assert a[2] == b[1]
  assert len(set(a + b)) == 6  # alpha, y, b, ß, ab, ba


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("repeats", [1, 3])
def test_the_order_is_the_full_sorts(case, repeats):
  """GroupAssembler._in_order (the steps sorted by group and order_by
  first, only runs that tie there and differ in content sorted again)
  gives the full sort's order: over random steps with ties, and with
  every row repeated (ties of equal content, as a year repeated)."""
  import pyarrow as pa
  import pyarrow.compute as pc
  schema = _variant(**CASES[case])
  rng = random.Random(repeats)
  rows = _rows(rng, 40, conflicts=0.2) * repeats
  encoder = StepEncoder(schema)
  tables = [(path, encoder.encode_table(
      {c: [r.get(c) for r in part] for c in encoder.schema.columns},
      len(part), numbers).table)
      for path, part, numbers in _batches(rng, rows)]
  assembler = GroupAssembler(schema)
  got = assembler._sorted(tables)
  # The full sort, on the same table before any order.
  t = got.take(pc.sort_indices(got, sort_keys=[("path", "ascending"),
                                                 ("row_sort", "ascending")]))
  want = t.take(pc.sort_indices(assembler._keys(t),
                                sort_keys=assembler._sort_keys))
  assert got.drop_columns([]).to_pylist() == pa.Table.from_batches(
      want.to_batches()).to_pylist()


def _column_strategy(st, kind, n):
  """n values of one kind, with ties, extremes and (maybe) nulls."""
  pick = {
      "int_narrow": st.integers(-3, 5),
      "int_wide": st.sampled_from([-2**63, 2**63 - 1, 0, -1, 1, 2**40,
                                   -2**40, 7]),
      "int8": st.sampled_from([-128, 127, 0, -1, 5]),
      "uint64": st.sampled_from([0, 2**64 - 1, 2**63, 2**63 - 1, 3]),
      "uint64_narrow": st.sampled_from([2**64 - 1, 2**64 - 3, 2**64 - 2]),
      "float": st.sampled_from([0.0, -0.0, 1.5, -1.5, 1e300, -1e300,
                                float("inf"), float("-inf"), 2.0]),
      "binary": st.sampled_from([b"", b"\x00", b"a", b"a\x00", b"ab", b"b",
                                 b"\xff", b"\xff\x00", b"ba"]),
      "string": st.sampled_from(["", "a", "ab", "\u00df", "z", "\u00e9a",
                                 "a\u00e9"]),
  }[kind]
  return st.lists(pick, min_size=n, max_size=n)


@pytest.mark.parametrize("seed", range(1))
def test_first_order_is_arrows_stable_sort(seed):
  """encoding.groups._first_order (numpy over ranks packed into words)
  gives pc.sort_indices's order (stable) and its ties, over every kind of
  key in both directions; a column with nulls or NaN is left to Arrow
  (None)."""
  import numpy as np
  import pyarrow as pa
  import pyarrow.compute as pc
  from hypothesis import given, settings, strategies as st
  from beam_tfrecords.encoding import groups

  types = {"int_narrow": pa.int64(), "int_wide": pa.int64(),
           "int8": pa.int8(), "uint64": pa.uint64(),
           "uint64_narrow": pa.uint64(),
           "float": pa.float64(), "binary": pa.large_binary(),
           "string": pa.string()}

  @settings(max_examples=300, deadline=None)
  @given(st.data())
  def check(data):
    n = data.draw(st.integers(0, 40))
    kinds = data.draw(st.lists(st.sampled_from(sorted(types)), min_size=1,
                               max_size=5))
    columns, leading = {}, []
    for i, kind in enumerate(kinds):
      columns[f"k{i}"] = pa.array(data.draw(_column_strategy(st, kind, n)),
                                  types[kind])
      leading.append((f"k{i}", data.draw(st.sampled_from(
          ["ascending", "descending"]))))
    columns["path"] = pa.array(data.draw(st.lists(
        st.integers(0, 2), min_size=n, max_size=n)), pa.int32())
    columns["row_sort"] = pa.array(data.draw(st.lists(
        st.integers(-1, 3), min_size=n, max_size=n)), pa.int64())
    t = pa.table(columns)
    got = groups._first_order(t, leading)
    assert got is not None
    order, tie = got
    want = pc.sort_indices(t, sort_keys=leading + [
        ("path", "ascending"), ("row_sort", "ascending")]).to_numpy()
    assert order.tolist() == want.tolist()
    sorted_t = t.take(pa.array(want))
    assert tie.tolist() == groups._same_as_previous(
        sorted_t, [name for name, _ in leading]).tolist()

  check()  # pylint: disable=no-value-for-parameter
  # Nulls and NaN: Arrow's own sort.
  for values, kind in (([1, None], pa.int64()), ([1.0, float("nan")],
                                                   pa.float64()),
                       ([b"a", None], pa.large_binary())):
    t = pa.table({"k0": pa.array(values, kind),
                  "path": pa.array([0, 0], pa.int32()),
                  "row_sort": pa.array([0, 1], pa.int64())})
    assert groups._first_order(t, [("k0", "ascending")]) is None
  # Words: ranks that do not fit one int64 are sorted as several.
  wide = [(np.arange(4, dtype=np.int64) % 3, 2**40),
          (np.array([3, 2, 1, 0], np.int64), 2**40)]
  assert len(groups._packed(wide)) == 2
  assert len(groups._packed([(np.zeros(2, np.int64), 3)] * 3)) == 1

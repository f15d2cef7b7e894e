"""Property tests: random values round-trip through our encoders and
TensorFlow's parsers; random garbage never crashes an encoder."""

import math

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_tfrecords.encoding import ExampleEncoder, SequenceEncoder

INT64 = st.integers(min_value=-2**63, max_value=2**63 - 1)
FLOAT32 = st.floats(width=32, allow_nan=True, allow_infinity=True)
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)),
               max_size=20)
BYTES = st.binary(max_size=20)

SCHEMA = {
    "name": "p",
    "features": {
        "i": {"type": "int64"},
        "f": {"type": "float"},
        "s": {"type": "string"},
        "b": {"type": "bytes"},
        "il": {"type": "int64", "shape": [-1]},
        "fl": {"type": "float", "shape": [-1]},
        "sl": {"type": "string", "shape": [-1]},
        "f3": {"type": "float", "shape": [3]},
    },
}

ROW = st.fixed_dictionaries({}, optional={
    "i": INT64, "f": FLOAT32, "s": TEXT, "b": BYTES,
    "il": st.lists(INT64, max_size=5), "fl": st.lists(FLOAT32, max_size=5),
    "sl": st.lists(TEXT, max_size=5),
    "f3": st.lists(FLOAT32, min_size=3, max_size=3),
})


def _same_float(a, b):
  return (math.isnan(a) and math.isnan(b)) or (
      a == b and math.copysign(1, a) == math.copysign(1, b))


def _spec(tf):
  return {"i": tf.io.VarLenFeature(tf.int64),
          "f": tf.io.VarLenFeature(tf.float32),
          "s": tf.io.VarLenFeature(tf.string),
          "b": tf.io.VarLenFeature(tf.string),
          "il": tf.io.VarLenFeature(tf.int64),
          "fl": tf.io.VarLenFeature(tf.float32),
          "sl": tf.io.VarLenFeature(tf.string),
          "f3": tf.io.VarLenFeature(tf.float32)}


def _expected(row, name):
  value = row.get(name)
  if value is None:
    return []
  values = value if isinstance(value, list) else [value]
  return [v.encode("utf-8") if isinstance(v, str) else v for v in values]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=1, max_size=8), arrow=st.booleans())
def test_examples_round_trip_through_tensorflow(tf, rows, arrow):
  encoder = ExampleEncoder(SCHEMA)
  if arrow:  # the vectorized Arrow path, as Parquet / JSON give it
    columns = {}
    for name in SCHEMA["features"]:
      cells = [r.get(name) for r in rows]
      try:
        columns[name] = pa.array(cells)
      except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        columns[name] = cells
    result = encoder.encode_columns(columns, len(rows))
  else:  # the per-value reference path
    result = encoder.encode_rows(rows)
  assert result.errors == []
  parsed = tf.io.parse_example(result.record_list(), _spec(tf))
  for name in SCHEMA["features"]:
    indices = parsed[name].indices.numpy()
    values = parsed[name].values.numpy().tolist()
    for r, row in enumerate(rows):
      got = [values[k] for k in range(len(values)) if indices[k][0] == r]
      want = _expected(row, name)
      if name in ("f", "fl", "f3"):
        assert len(got) == len(want)
        assert all(_same_float(g, float(np.float32(w)))
                   for g, w in zip(got, want))
      else:
        assert got == want, (name, row)


GARBAGE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT | BYTES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        TEXT, inner, max_size=3),
    max_leaves=10)


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.dictionaries(
    st.sampled_from(["i", "f", "s", "b", "il", "fl", "sl", "f3"]), GARBAGE),
    min_size=1, max_size=6))
def test_garbage_never_crashes_the_example_encoder(rows):
  result = ExampleEncoder(SCHEMA).encode_rows(rows)
  # Every row is accounted for: a record or an error with a reason.
  assert len(result.rows) + len(result.errors) == len(rows)
  assert sorted(list(result.rows) + [e.row for e in result.errors]) == list(
      range(len(rows)))
  assert all(e.reason for e in result.errors)


SEQ_SCHEMA = {
    "name": "q", "record": "sequence_example",
    "context": {"n": {"derive": "length"}, "c": "string"},
    "sequence": {"a": {"type": "int64"}, "v": {"type": "float",
                                               "shape": [-1]}},
    "ragged": True, "max_length": 3, "overflow": "split",
}


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.dictionaries(st.sampled_from(["a", "v", "c"]),
                                     GARBAGE), min_size=1, max_size=6))
def test_garbage_never_crashes_the_sequence_encoder(rows):
  result = SequenceEncoder(SEQ_SCHEMA).encode_rows(rows)
  assert sorted(set(result.rows.tolist()) | {e.row for e in result.errors}
                ) == list(range(len(rows)))
  assert not set(result.rows.tolist()) & {e.row for e in result.errors}


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seqs=st.lists(st.tuples(
    st.lists(INT64, max_size=6), st.lists(st.lists(FLOAT32, max_size=3),
                                          max_size=6)), min_size=1,
    max_size=5))
def test_sequences_round_trip_through_tensorflow(tf, seqs):
  schema = {"name": "r", "record": "sequence_example", "ragged": True,
            "context": {"n": {"derive": "length", "of": "a"}},
            "sequence": {"a": {"type": "int64"},
                         "v": {"type": "float", "shape": [-1]}}}
  rows = [{"a": a, "v": v} for a, v in seqs]
  result = SequenceEncoder(schema).encode_rows(rows)
  assert result.errors == []
  for record, (a, v) in zip(result.record_list(), seqs):
    context, sequence = tf.io.parse_single_sequence_example(
        record, {"n": tf.io.FixedLenFeature([], tf.int64)},
        {"a": tf.io.RaggedFeature(tf.int64),
         "v": tf.io.RaggedFeature(tf.float32)})
    assert int(context["n"]) == len(a)
    assert [x[0] for x in sequence["a"].to_list()] == a
    got_v = sequence["v"].to_list()
    assert len(got_v) == len(v)
    for g, w in zip(got_v, v):
      assert len(g) == len(w) and all(
          _same_float(x, float(np.float32(y))) for x, y in zip(g, w))


DEFAULTS_SCHEMA = {
    "name": "d",
    "features": {
        "i": {"type": "int64", "default": -7},
        "f": {"type": "float", "required": True},
        "s": {"type": "string", "default": "none"},
        "b": {"type": "bytes"},
        "il": {"type": "int64", "shape": [-1], "default": [1, 2]},
        "fl": {"type": "float", "shape": [-1]},
        "sl": {"type": "string", "shape": [-1]},
        "f3": {"type": "float", "shape": [3], "default": [0.5, 0.5, 0.5]},
    },
}


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(ROW, min_size=1, max_size=8))
def test_vectorized_and_row_wise_paths_give_identical_bytes(rows):
  """Same rows, as Arrow columns (fast path) and as Python values
  (reference path): the same records, byte for byte, and the same errors."""
  for schema in (SCHEMA, DEFAULTS_SCHEMA):
    encoder = ExampleEncoder(schema)
    columns = {}
    for name in schema["features"]:
      cells = [r.get(name) for r in rows]
      try:
        columns[name] = pa.array(cells)
      except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        columns[name] = cells
    fast = encoder.encode_columns(columns, len(rows))
    slow = encoder.encode_rows(rows)
    assert fast.record_list() == slow.record_list()
    assert fast.rows.tolist() == slow.rows.tolist()
    assert [(e.row, e.reason) for e in fast.errors] == [
        (e.row, e.reason) for e in slow.errors]

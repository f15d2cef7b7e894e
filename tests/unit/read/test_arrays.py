"""beam_tfrecords/read/arrays.py, its records: a Row from the native core's
columns holds no values until it is read (`_Pending`); every way of
reading or changing a dict gives the record's values, as tfx-bsl's
decoder gives them, and rows only collated never make theirs."""

import copy
import json
import pickle

import numpy as np
import pytest
import tensorflow as tf

import beam_tfrecords as btr
from beam_tfrecords.read.arrays import (_NOT_READ, RecordDecoder, Row,
                                        _Pending, _rows, cut, run_of)
from beam_tfrecords.read.wire_columns import Text

from tests.helpers.native_paths import NATIVE

SCHEMA = btr.load_schema({"name": "rows", "record": "example", "features": {
    "n": {"type": "int64", "required": True},
    "score": {"type": "float", "shape": [2], "required": True},
    "label": {"type": "string", "required": True},
    "words": {"type": "string", "shape": [-1]},
    "maybe": {"type": "int64"},
}})
DECODER = RecordDecoder(SCHEMA)


def _example(i: int, scalars: bool = False) -> bytes:
  e = tf.train.Example()
  f = e.features.feature
  f["n"].int64_list.value.append(i)
  f["label"].bytes_list.value.append(f"label {i}".encode())
  if not scalars:
    f["score"].float_list.value.extend([i / 2, -i])
    f["words"].bytes_list.value.extend(f"w{j}".encode()
                                       for j in range(i % 3))
  if i % 2:
    f["maybe"].int64_list.value.append(i * 10)
  return e.SerializeToString()


RECORDS = [_example(i) for i in range(7)]
# Scalars only: rows that == compares value by value.
SCALARS = RecordDecoder(btr.load_schema({
    "name": "scalars", "record": "example", "features": {
        k: v for k, v in SCHEMA.to_dict()["features"].items()
        if k in ("n", "label", "maybe")}}))
SCALAR_RECORDS = [_example(i, scalars=True) for i in range(3)]


@pytest.fixture(autouse=True)
def _core(monkeypatch):
  if NATIVE is None:
    pytest.skip("the native core is not built: records are plain dicts")
  monkeypatch.setenv("BTR_NATIVE", "1")


def _reference():
  """The records as tfx-bsl's decoder gives them, plain dicts."""
  batch = DECODER._decoder.DecodeBatch(RECORDS)
  columns = {f.name: _rows(f, batch.column(f.name)) for f in SCHEMA.features}
  return [{k: v[i] for k, v in columns.items()} for i in range(len(RECORDS))]


def _plain(value):
  """Values comparable with ==: arrays as (dtype, shape, list)."""
  if isinstance(value, dict):
    return {k: _plain(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return type(value)(_plain(v) for v in value)
  if isinstance(value, Text):
    value = value.numpy()
  if isinstance(value, (np.ndarray, np.generic)):
    return (str(value.dtype), np.shape(value), np.asarray(value).tolist())
  return value


def _json(value):
  return json.dumps(value, default=lambda v: np.asarray(v).tolist())


def _keywords(**kwargs):
  return kwargs


# What each way of reading gives, on a row and on the reference dict.
READS = {
    "[]": lambda r: r["words"],
    "in": lambda r: ("maybe" in r, "x" in r),
    "iter": list,
    "len": len,
    "bool": bool,
    "repr": lambda r: repr(dict(r)) if type(r) is Row else repr(r),
    "reversed": lambda r: list(reversed(r)),
    "|": lambda r: r | {"x": 1},
    "| (right)": lambda r: {"x": 1} | r,
    "get": lambda r: (r.get("label"), r.get("x", 5)),
    "keys": lambda r: list(r.keys()),
    "values": lambda r: list(r.values()),
    "items": lambda r: list(r.items()),
    "copy": lambda r: r.copy(),
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
    "pickle": lambda r: pickle.loads(pickle.dumps(r)),
    "dict()": dict,
    "{**}": lambda r: {**r},
    "f(**)": lambda r: _keywords(**r),
    "dict.copy unbound": dict.copy,
    "json (C encoder)": _json,
    "sizeof": lambda r: r.__sizeof__() > 0,
}


@pytest.mark.parametrize("how", list(READS))
def test_every_way_of_reading_gives_the_values(how):
  """A fresh row read any way gives what the plain dict gives, and is
  a Row after, still tagged with its batch."""
  read = READS[how]
  for i, want in enumerate(_reference()):
    row = DECODER.decode(RECORDS)[i]
    assert type(row) is _Pending
    assert _plain(read(row)) == _plain(read(want)), (how, i)
    assert type(row) is Row and row.batch is not None and row.at == i
    assert _plain(dict(row)) == _plain(want)


def test_equality_reads_both_sides():
  """r == s with both pending: dict's == reads s's storage, so s's
  values are made too (a row and a plain dict: either order)."""
  x, y, z, other = (SCALARS.decode(SCALAR_RECORDS)[i] for i in (1, 1, 1, 2))
  assert type(x) is _Pending and type(y) is _Pending
  assert x == y and not x != y and type(y) is Row
  want = {"n": np.int64(1), "label": "label 1",
          "maybe": np.array([10], np.int64)}
  assert want == z and type(z) is Row and z == want
  assert x != other and type(other) is Row


# Each change, on a row and on the reference dict.
CHANGES = {
    "[]=": lambda r: r.__setitem__("n", np.int64(-1)),
    "del": lambda r: r.__delitem__("label"),
    "|=": lambda r: r.__ior__({"x": 1}),
    "update": lambda r: r.update(x=2),
    "pop": lambda r: r.pop("words"),
    "popitem": lambda r: r.popitem(),
    "clear": lambda r: r.clear(),
    "setdefault": lambda r: r.setdefault("n", 9),
}


@pytest.mark.parametrize("how", list(CHANGES))
def test_a_change_holds_the_values_and_drops_the_tag(how):
  want = _reference()[5]
  row = DECODER.decode(RECORDS)[5]
  got_result, want_result = CHANGES[how](row), CHANGES[how](want)
  assert _plain(got_result) == _plain(want_result)
  assert _plain(dict(row)) == _plain(want)
  assert type(row) is Row and row.batch is None


def test_rows_only_collated_never_make_their_values():
  """A run of rows cut from their columns: no row made its values, and
  the batch never split its columns per record; reading one row splits
  them once, and the others stay pending with the right values."""
  rows = DECODER.decode(RECORDS)
  batch, start = run_of(rows[2:6], DECODER.fixed)
  assert start == 2
  got = batch.cut(2, 6)
  assert _plain(got) == _plain(cut(DECODER.decode_batch(RECORDS, text=True),
                                    2, 6))
  assert all(type(r) is _Pending for r in rows)
  assert batch._split is None
  assert rows[4]["n"] == 4
  assert batch._split is not None
  assert [type(r) for r in rows].count(_Pending) == len(rows) - 1
  assert _plain([dict(r) for r in rows]) == _plain(_reference())


def test_a_pending_rows_storage_holds_not_read_not_nothing():
  """C code that reads the dict's storage directly (dict.values called
  unbound) finds the keys, each holding _NOT_READ, whose repr says what
  to do; C json's shortcut for {} does not apply."""
  row = DECODER.decode(RECORDS)[0]
  assert list(dict.values(row)) == [_NOT_READ] * 5
  assert "dict(record)" in repr(_NOT_READ)
  assert type(row) is _Pending


def test_rows_made_without_a_batch_read_as_dicts():
  """fromkeys and type(row)(...) make rows with no batch: they hold what
  they were given, are never cut from columns, and change as dicts."""
  row = DECODER.decode(RECORDS)[2]
  made = row.fromkeys(["a", "b"], 1)
  assert dict(made) == {"a": 1, "b": 1} and type(made) is Row
  again = type(row)({"n": 5})
  assert again["n"] == 5 and dict(again) == {"n": 5}
  assert run_of([again], DECODER.fixed) is None
  again["n"] = 6
  assert dict(again) == {"n": 6} and again.batch is None
  assert _plain(dict(row)) == _plain(_reference()[2])  # (row untouched)

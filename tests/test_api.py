"""The public API, and the reader without TensorFlow."""

import numpy as np

import beam_tfrecords as btr

from conftest import ROWS, SCHEMA, tf_records


def test_every_public_name_imports():
  for name in btr.__all__:
    assert getattr(btr, name) is not None, name


def test_docs_api_lists_exactly_the_public_names():
  """docs/api.md's tables name every public name and nothing else; each
  has a docstring."""
  import pathlib
  import re
  page = (pathlib.Path(__file__).resolve().parent.parent / "docs" /
          "api.md").read_text()
  listed = set(re.findall(r"^\| `btr\.(\w+)`", page, re.M))
  assert listed == set(btr.__all__) - {"__version__"}
  assert len(listed) <= 26  # the trimmed API: about 20 names and errors
  for name in listed:
    assert (getattr(btr, name).__doc__ or "").strip(), name


def test_iter_records_equals_tensorflow_parse(tf, tmp_path):
  import pyarrow as pa
  import pyarrow.parquet as pq
  src = tmp_path / "in.parquet"
  pq.write_table(pa.Table.from_pylist(ROWS), str(src))
  out = str(tmp_path / "out")
  btr.build(SCHEMA, str(src), out)
  plain = sorted(btr.iter_records(out), key=lambda r: r["age"])
  assert [r["age"] for r in plain] == sorted(r["Age"] for r in ROWS)
  by_age = {r["Age"]: r for r in ROWS}
  for r in plain:
    src_row = by_age[r["age"]]
    assert r["movies"] == src_row["Movie"]
    assert r["suggestion"] == src_row["Suggestion"]
    assert r["code"] == (None if src_row["Code"] is None
                         else src_row["Code"].encode())
    np.testing.assert_array_equal(np.array(r["ratings"], np.float32),
                                  np.array(src_row["Movie Ratings"], np.float32))
  # btr.load gives the same values as parsing by hand.
  loaded = list(btr.load(out, batch_size=10))[0]
  assert sorted(loaded["age"].numpy().tolist()) == [r["age"] for r in plain]
  assert len(tf_records(tf, out)) == len(ROWS)

"""The public API, and the reader without TensorFlow."""

import numpy as np

import beam_tfrecords as btr

from tests.helpers.movies import ROWS, SCHEMA
from tests.helpers.records import tf_records


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

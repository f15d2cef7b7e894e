"""Per-feature statistics in dataset.json, from the same pass."""

import random

import pytest

import beam_tfrecords as btr
from beam_tfrecords.encoding import stats as st


def test_statistics_match_values_computed_here(tmp_path):
  rng = random.Random(5)
  rows = []
  for i in range(5000):
    rows.append({"n": rng.randint(-50, 50) if i % 10 else None,
                 "x": rng.random() * 10,
                 "c": rng.choice(["a", "b", "b", "c", "c", "c"]),
                 "l": [rng.randint(0, 9) for _ in range(rng.randint(0, 4))]})
  src = tmp_path / "s.csv"
  src.write_text("n,x,c,l,split\n" + "".join(
      f"{'' if r['n'] is None else r['n']},{r['x']!r},{r['c']},"
      f"{'|'.join(map(str, r['l']))},{'train' if i % 4 else 'eval'}\n"
      for i, r in enumerate(rows)))
  schema = {"name": "s", "splits": {"column": "split",
                                    "values": ["train", "eval"]},
            "features": {"n": "int64", "x": "float", "c": "string",
                         "l": {"type": "int64", "shape": [-1],
                               "separator": "|"}}}
  result = btr.build(schema, str(src), str(tmp_path / "out"))
  got = result.metadata["statistics"]["train"]
  train = [r for i, r in enumerate(rows) if i % 4]
  ns = [r["n"] for r in train if r["n"] is not None]
  assert got["n"]["present"] == len(ns)
  assert got["n"]["missing"] == len(train) - len(ns)
  assert (got["n"]["min"], got["n"]["max"]) == (min(ns), max(ns))
  assert got["n"]["mean"] == pytest.approx(sum(ns) / len(ns))
  import numpy as np
  xs = np.array([r["x"] for r in train], dtype=np.float32).astype(float)
  assert got["x"]["mean"] == pytest.approx(xs.mean())
  assert got["x"]["max"] == float(xs.max())
  import collections
  top = collections.Counter(r["c"] for r in train).most_common()
  assert got["c"]["top"] == [[v, n] for v, n in top]
  assert got["c"]["top_exact"] is True
  # An empty unquoted CSV cell is missing, not an empty list.
  lengths = [len(r["l"]) for r in train if r["l"]]
  assert got["l"]["list_length"] == {"min": min(lengths), "max": max(lengths)}
  assert got["l"]["values"] == sum(lengths)
  assert got["l"]["missing"] == len(train) - len(lengths)
  assert result.metadata["statistics"]["eval"]["c"]["present"] == 1250


def test_top_values_are_marked_inexact_past_the_kept_set(monkeypatch):
  monkeypatch.setattr(st, "TOP_KEPT", 2)
  a = {"present": 3, "missing": 0, "values": 3, "top": {b"x": 2, b"y": 1},
       "top_exact": True}
  b = {"present": 2, "missing": 1, "values": 2, "top": {b"z": 2},
       "top_exact": True}
  merged = st.merge(a, b)
  assert merged["top_exact"] is False and len(merged["top"]) == 2
  assert st.finish(merged)["top"] == [["x", 2], ["z", 2]]
  assert st.merge(a, None) is a

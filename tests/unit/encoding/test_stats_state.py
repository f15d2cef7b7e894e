"""beam_tfrecords/encoding/stats_state.py: the statistics' merge state as
JSON, read back value for value."""

import numpy as np
import pyarrow as pa
import pytest

from beam_tfrecords.core.errors import MalformedFileError
from beam_tfrecords.encoding import stats
from beam_tfrecords.encoding.stats_state import from_state_json, state_json
from beam_tfrecords.schema.model import Feature, FeatureType


def _described():
  ints = stats.column_stats(
      Feature("n", FeatureType.INT64, shape=(-1,)),
      pa.array([[1, 2**62], None, [-(2**63)], [0, 0, 7]],
               pa.large_list(pa.int64())))
  floats = stats.column_stats(
      Feature("x", FeatureType.FLOAT, shape=(-1,)),
      pa.array([[0.1, -2.5e30], [float("nan"), 1e-40], None],
               pa.large_list(pa.float32())))
  text = stats.column_stats(
      Feature("t", FeatureType.STRING),
      pa.array([["a"], ["\u00e9\"\n"], ["a"], None],
               pa.large_list(pa.string())))
  raw = stats.column_stats(
      Feature("b", FeatureType.BYTES),
      pa.array([[b"\x00\xff"], [b"k"]], pa.large_list(pa.binary())))
  raw["expected_counts"] = {b"\x00\xff": 1, "k": 2, 3: 4, 2.5: 1}
  return {"train": {"n": ints, "x": floats, "t": text, "b": raw},
          "test": {}}


def test_the_state_reads_back_value_for_value():
  described = _described()
  # Sums past 4,300 decimal digits are no problem (hex text).
  described["train"]["n"]["sumsq"] = 3 ** 20000
  text = state_json(described)
  back = from_state_json(text)
  assert back == described
  assert state_json(back) == text
  n = back["train"]["n"]
  assert n["sumsq"] == 3 ** 20000 and n["min"] == -(2**63)
  assert isinstance(n["hist"].keys, np.ndarray)
  assert back["train"]["b"]["top"] == {b"\x00\xff": 1, b"k": 1}
  assert back["train"]["t"]["top"] == {"a": 2, "\u00e9\"\n": 1}
  # And merges as the original does.
  assert stats.merge(back["train"]["x"], described["train"]["x"]) == \
      stats.merge(described["train"]["x"], described["train"]["x"])


@pytest.mark.parametrize("text", [
    "[]", "{}", '{"version": 9, "splits": {}}', "not json",
    '{"version": 1, "splits": {"train": {"n": {"sum": "zz"}}}}',
    '{"version": 1, "splits": {"train": {"n": {"hist": {"level": 1}}}}}',
])
def test_a_state_of_another_shape_is_refused_naming_the_file(text):
  with pytest.raises(MalformedFileError, match="^out/statistics.state.json: "
                     "not a statistics state") as e:
    from_state_json(text, "out/statistics.state.json")
  assert e.value.file == "out/statistics.state.json"


def test_an_inexact_top_keeps_only_the_values_the_statistics_show():
  """Past TOP_KEPT distinct values the kept set depends on the grouping
  of the partials (other runners): the state keeps what finish shows."""
  top = {f"v{i:04d}": 1 + i % 7 for i in range(1000)}
  described = {"train": {"t": {"present": 9, "missing": 0, "values": 9,
                               "top": top, "top_exact": False}}}
  back = from_state_json(state_json(described))["train"]["t"]
  shown = stats.finish(described["train"]["t"])["top"]
  assert len(back["top"]) == stats.TOP_SHOWN
  assert sorted(back["top"].items()) == sorted(
      (value, count) for value, count in shown)
  assert stats.finish(back)["top"] == shown
  assert back["top_exact"] is False

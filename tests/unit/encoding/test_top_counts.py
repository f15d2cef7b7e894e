"""beam_tfrecords/encoding/top_counts.py, on values: a feature's top values
as the native core counts them, added up by it as the reference adds up
dicts (encoding.stats' merges)."""

import pickle

from hypothesis import HealthCheck, given, settings, strategies as st
import numpy as np
import pyarrow as pa
import pytest

from beam_tfrecords.encoding import stats
from beam_tfrecords.encoding.top_counts import TopCounts, summed
from beam_tfrecords.schema.model import Feature, FeatureType

from tests.helpers.native_paths import NATIVE

pytestmark = pytest.mark.skipif(NATIVE is None,
                                reason="the native core is not built")


def _top(counts: dict, text: bool) -> TopCounts:
  """A TopCounts of {value: count}, as the core lays one out."""
  values = [v.encode("utf-8") if text else v for v in counts]
  offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int64)
  return TopCounts(b"".join(values), offsets.tobytes(),
                   np.array(list(counts.values()), np.int64).tobytes(), text)


def _described(top) -> dict:
  return {"present": 1, "missing": 0, "values": 1, "top": top,
          "top_exact": True}


# Values around the core's key sizes: under 16 bytes (one word), 16 to 31
# (two), 32 and more (hashed as bytes); the empty value; and few distinct
# ones, so that parts share values and counts tie at the cut.
_VALUE = st.one_of(st.sampled_from(["", "a", "b", "é", "\x00"]),
                   st.text(max_size=3),
                   st.sampled_from([n * "x" for n in (15, 16, 31, 32, 40)]),
                   st.text(min_size=14, max_size=34))


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.dictionaries(_VALUE, st.integers(1, 4),
                                      max_size=10), min_size=1, max_size=8),
       kept=st.integers(1, 12), text=st.booleans())
def test_the_core_adds_top_values_as_the_reference_adds_dicts(
    parts, kept, text):
  if not text:
    parts = [{v.encode("utf-8"): c for v, c in p.items()} for p in parts]
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(stats, "TOP_KEPT", kept)
    native = stats.merge_all([_described(_top(p, text)) for p in parts])
    reference = stats.merge_all([_described(dict(p)) for p in parts])
    mixed = stats.merge_all([_described(_top(p, text) if i % 2 else dict(p))
                             for i, p in enumerate(parts)])
  if len(parts) == 1:
    assert native["top"].to_dict() == reference["top"]
    return
  assert isinstance(native["top"], TopCounts)
  assert stats.plain(native) == reference
  # A mix of the two is added as dicts: the same again.
  assert mixed == reference


def test_a_sum_past_the_kept_values_keeps_the_most_frequent_then_smallest():
  a = _top({"b": 2, "a": 1, "c": 1}, True)
  b = _top({"c": 1, "a": 1, "d": 5}, True)
  got, exact = summed(NATIVE, [a, b], 3)
  assert got.to_dict() == {"d": 5, "a": 2, "b": 2} and exact is False
  got, exact = summed(NATIVE, [a, b], 4)
  assert got.to_dict() == {"b": 2, "a": 2, "c": 2, "d": 5} and exact is True
  # Text and bytes are not added together (the caller's dict path).
  assert summed(NATIVE, [a, _top({b"a": 1}, False)], 3) is None


def test_a_column_s_top_values_leave_as_dicts_and_pickle_as_buffers():
  feature = Feature("t", FeatureType.STRING)
  lists = pa.array([["N1"], ["é"], ["N1"], None],
                   pa.large_list(pa.large_string()))
  got = stats.column_stats(feature, lists)
  assert isinstance(got["top"], TopCounts)
  back = pickle.loads(pickle.dumps(got))
  assert back["top"].to_dict() == {"N1": 2, "é": 1}
  assert stats.plain(back)["top"] == {"N1": 2, "é": 1}
  assert stats.finish(got)["top"] == [["N1", 2], ["é", 1]]
  assert stats.plain(stats.plain(got)) == stats.plain(got)
  raw = stats.column_stats(Feature("b", FeatureType.BYTES),
                           pa.array([[b"\xff"], [b"\xff"]],
                                    pa.large_list(pa.large_binary())))
  assert stats.plain(raw)["top"] == {b"\xff": 2}
  # Counts past 32 bits and no values at all come back as they were.
  big = _top({"": 2**33, "ab": 3}, True)
  assert pickle.loads(pickle.dumps(big)).to_dict() == {"": 2**33, "ab": 3}
  none = pickle.loads(pickle.dumps(_top({}, False)))
  assert none.to_dict() == {} and none.offsets == _top({}, False).offsets


@pytest.mark.parametrize("parts, message", [
    ([(b"ab", np.array([0, 3]), np.array([1]))], "past the data"),
    ([(b"ab", np.array([1, 0]), np.array([1]))], "out of order"),
    ([(b"ab", np.array([0, 1, 2]), np.array([1]))], "a count per value"),
])
def test_the_core_refuses_counts_that_do_not_fit_their_values(parts,
                                                               message):
  with pytest.raises(ValueError, match=message):
    NATIVE.counts_summed(parts, 10)

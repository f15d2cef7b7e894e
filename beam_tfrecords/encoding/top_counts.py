"""A text or bytes feature's top values as the native core counts them:
three buffers, not a Python object per value.

A batch's statistics (encoding.stats) keep its most frequent values and
their counts. Kept as a dict, each batch made a str or bytes object per
kept value (1,000 of them for a feature like a plane's tail number) and
each merge added them one by one in Python. A `TopCounts` holds the
values back to back, their offsets and their counts, as the core's
`value_counts` gives them; `summed` adds many in one native call, cut as
a dict's merge is cut (encoding.stats._most_frequent: the TOP_KEPT most
frequent, ties by the smaller value), so both give the same values and
counts (tests/unit/encoding/test_top_counts.py compares them).

    top = TopCounts(data, offsets, counts, text=True)
    top.to_dict()                      # {"N14228": 12, ...}

A description's "top" is a dict on the pure-Python path and in every
merged statistic that leaves a build's encoding (stats.plain, after the
combine of the bundles' statistics); a TopCounts from a batch through
the merges of its bundle and that combine (pickled between workers as
its three buffers), and in the units a build keeps.
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

__all__ = ["TopCounts", "summed"]


class TopCounts:
  """Values (value i = data[offsets[i]:offsets[i + 1]], str when `text`,
  else bytes) and their counts (int64 bytes)."""

  __slots__ = ("data", "offsets", "counts", "text")

  def __init__(self, data: bytes, offsets: bytes, counts: bytes,
               text: bool):
    self.data, self.offsets, self.counts, self.text = (data, offsets,
                                                       counts, text)

  def __reduce__(self):
    return (TopCounts, (self.data, self.offsets, self.counts, self.text))

  def __len__(self) -> int:
    return len(self.counts) // 8

  def __repr__(self) -> str:
    return f"TopCounts({len(self)} values)"

  def values(self) -> List[Any]:
    n = len(self)
    kind = pa.large_string() if self.text else pa.large_binary()
    return pa.Array.from_buffers(kind, n, [
        None, pa.py_buffer(self.offsets), pa.py_buffer(self.data)
    ]).to_pylist()

  def to_dict(self) -> Dict[Any, int]:
    return dict(zip(self.values(),
                    np.frombuffer(self.counts, dtype=np.int64).tolist()))


def summed(module, tops: Sequence[TopCounts], kept: int
           ) -> Optional[Tuple[TopCounts, bool]]:
  """The tops added up by the native `module`, cut to the `kept` most
  frequent: (the sum, whether nothing was cut); None where the tops are
  not all of one kind (text or bytes), for the caller's dict path."""
  if len({t.text for t in tops}) != 1:
    return None
  (data, offsets, counts), exact = module.counts_summed(
      [(t.data, np.frombuffer(t.offsets, dtype=np.int64),
        np.frombuffer(t.counts, dtype=np.int64)) for t in tops], kept)
  return TopCounts(data, offsets, counts, tops[0].text), exact

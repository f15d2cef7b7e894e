"""The SequenceExample wire layout for one record at a time: sequences
assembled from grouped rows (one group per call; the steps are already
serialized Features). The vectorized layout for whole batches is `wire`.
"""

from typing import List, Sequence, Tuple

from beam_tfrecords.encoding.wire import varint_bytes

__all__ = ["frame", "map_entries", "sequence_example_bytes"]


def frame(tag: int, payload: bytes) -> bytes:
  """tag + varint(len) + payload."""
  return bytes([tag]) + varint_bytes(len(payload)) + payload


# 0x0A + one-byte length: the header of most steps, precomputed.
_STEP_HEADERS = [bytes([0x0A, n]) for n in range(128)]


def _feature_list(steps: Sequence[bytes]) -> bytes:
  """FeatureList body: each step's Feature as repeated field 1."""
  out: List[bytes] = []
  for f in steps:
    n = len(f)
    out.append(_STEP_HEADERS[n] if n < 128 else b"\x0a" + varint_bytes(n))
    out.append(f)
  return b"".join(out)


def map_entries(entries: Sequence[Tuple[str, bytes]]) -> bytes:
  """Features / FeatureLists body from (name, value bytes), sorted by name."""
  out: List[bytes] = []
  for name, value in entries:
    key = name.encode("utf-8")
    out.append(frame(0x0A, frame(0x0A, key) + frame(0x12, value)))
  return b"".join(out)


def sequence_example_bytes(context: Sequence[Tuple[str, bytes]],
                           lists: Sequence[Tuple[str, Sequence[bytes]]]
                           ) -> bytes:
  """One SequenceExample from (name, Feature bytes) context entries and
  (name, [step Feature bytes]) feature lists, each sorted by name."""
  body = map_entries(context)
  out = [frame(0x0A, body)] if body else []
  fl = map_entries([(name, _feature_list(steps)) for name, steps in lists])
  if fl:
    out.append(frame(0x12, fl))
  return b"".join(out)

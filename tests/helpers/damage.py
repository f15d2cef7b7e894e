"""Records damaged at random, for the decoders' properties
(tests/unit/read/test_wire_columns*.py)."""

from hypothesis import strategies as st


def damaged(data, record: bytes) -> bytes:
  """`record` with one byte changed, dropped or inserted, or cut there
  (drawn from Hypothesis' `data`); an empty record as it is."""
  out = bytearray(record)
  if not out:
    return record
  at = data.draw(st.integers(0, len(out) - 1))
  how = data.draw(st.sampled_from(["set", "drop", "insert", "cut"]))
  byte = data.draw(st.sampled_from([0x00, 0x01, 0x0A, 0x12, 0x1A, 0x7F,
                                    0x80, 0xFF]) | st.integers(0, 255))
  if how == "set":
    out[at] = byte
  elif how == "drop":
    del out[at]
  elif how == "insert":
    out.insert(at, byte)
  else:
    del out[at:]
  return bytes(out)

"""Sizes written as bytes or as text such as 256MB, 1.5GiB or 64KiB.

The schema's `max_record_bytes:` uses them, and so do command-line options
(shard sizes), which is why the parser is public.
"""

import re
from typing import Any, Optional

from beam_tfrecords.core.errors import preview
from beam_tfrecords.schema.checking import Checker

__all__ = ["parse_size", "record_bytes"]

_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B|B)?\s*$",
                      re.I)
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
# Protobuf's hard limit is 2 GiB; leave room for framing and parsing.
_MAX_RECORD_BYTES_LIMIT = 1536 * 2**20


def parse_size(raw: Any) -> Optional[int]:
  """Bytes from an int or text such as 256MB, 1.5GiB, 64KiB, 1000 (None if
  it is neither)."""
  if isinstance(raw, int) and not isinstance(raw, bool):
    return raw
  if isinstance(raw, str):
    m = _SIZE_RE.match(raw)
    if m:
      return int(float(m.group(1)) * _SIZE_UNITS[(m.group(2) or "b").lower()])
  return None


def record_bytes(check: Checker, key: str, raw: Any) -> Optional[int]:
  """A record size limit (None when not given): at least 1KiB, and below
  what protobuf can parse."""
  if raw is None:
    return None
  value = parse_size(raw)
  if value is None or not 1024 <= value <= _MAX_RECORD_BYTES_LIMIT:
    check.fail(key, f"must be a size between 1KiB and 1536MiB, as bytes or "
               f"text such as 64MiB; got {preview(raw)}")
  return value

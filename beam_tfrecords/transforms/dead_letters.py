"""Dead-letter entries: a batch's rejected rows as JSON-able dicts.

Each entry says where the row came from (source, row), why it was
rejected (reason, per-feature problems) and the row itself (raw, long
cells cut), so errors/*.jsonl can be read and the rows fixed and re-run.
"""

import base64
import json
from typing import Any, Dict, List

from beam_tfrecords.encoding.example import RowError
from beam_tfrecords.sources import SourceBatch

__all__ = ["MAX_RAW_CHARS", "dead_letter_json", "remapped", "row_errors"]

# Raw cells longer than this are cut in the dead-letter row (the reason still
# says what was wrong with the whole value).
MAX_RAW_CHARS = 10_000


def _jsonable(value: Any) -> Any:
  if isinstance(value, bytes):
    try:
      value = value.decode("utf-8")
    except UnicodeDecodeError:
      return {"base64": base64.b64encode(value[:MAX_RAW_CHARS]).decode("ascii")}
  if isinstance(value, str):
    return value if len(value) <= MAX_RAW_CHARS else \
        value[:MAX_RAW_CHARS] + f"... ({len(value)} characters)"
  if isinstance(value, dict):
    return {str(k): _jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_jsonable(v) for v in value]
  if isinstance(value, float) and value != value:
    return "NaN"
  if value is None or isinstance(value, (bool, int, float)):
    return value
  return str(value)


def _plain(value: Any) -> bool:
  """Whether _jsonable(value) is value (the common cells, checked fast)."""
  kind = type(value)
  return value is None or kind is int or kind is bool or (
      kind is float and value == value) or (
          kind is str and len(value) <= MAX_RAW_CHARS)


def dead_letter_json(record: Dict[str, Any]) -> str:
  raw = record.get("raw")
  if not isinstance(raw, dict):
    return json.dumps(_jsonable(record), sort_keys=True, ensure_ascii=False)
  # The usual dead-letter row: most raw cells need no change (checked fast).
  out = _jsonable({k: v for k, v in record.items() if k != "raw"})
  out["raw"] = {str(k): v if _plain(v) else _jsonable(v)
                for k, v in raw.items()}
  return json.dumps(out, sort_keys=True, ensure_ascii=False)


def row_errors(batch: SourceBatch, encode_errors) -> List[Dict[str, Any]]:
  """Dead-letter dicts of a batch's unreadable and unencodable rows, in
  row order."""
  errors = list(_unsorted_row_errors(batch, encode_errors))
  errors.sort(key=lambda e: (e["row"] is None, e["row"] or 0,
                             e.get("element") or ""))
  return errors


def _unsorted_row_errors(batch: SourceBatch, encode_errors):
  for err in batch.errors:
    yield {"source": batch.path, "row": err.row, "rows": 1,
           "reason": err.reason, "problems": [], "raw": err.raw}
  raws = batch.raw_rows([err.row for err in encode_errors])
  for err, raw in zip(encode_errors, raws):
    error = {"source": batch.path, "row": batch.row_number(err.row),
             "rows": 1, "reason": err.reason,
             "problems": [{"feature": f, "reason": r}
                          for f, r in err.problems],
             "raw": raw}
    if batch.elements is not None:  # a PCollection's row: its digest
      error["element"] = batch.elements[err.row]
    yield error


def remapped(errors, index) -> list:
  """A slice's RowErrors with the rows of the whole batch (`index`: the
  slice's row numbers in the batch; None: the slice is the batch)."""
  if index is None:
    return list(errors)
  return [RowError(row=int(index[e.row]), problems=e.problems)
          for e in errors]

"""The rejection thresholds, applied by the finish step before it
publishes (--max-bad-rows, --max-bad-fraction and the default), and the
lines that say why a build was refused."""

import json
from typing import List, Optional, Sequence

from beam_tfrecords.core.errors import BadRowsError
from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.core.layout import ERRORS_DIR

__all__ = ["check_thresholds", "rejection_lines", "DEFAULT_MAX_BAD_FRACTION"]

# With no threshold given (flag, build() argument or schema key), a build
# fails when more than this share of the rows read is rejected.
DEFAULT_MAX_BAD_FRACTION = 0.01


def check_thresholds(info: DatasetInfo, max_bad_rows: Optional[int],
                     max_bad_fraction: Optional[float], where: str,
                     producible: Sequence[str] = ()) -> None:
  """Raises BadRowsError when more rows were rejected than allowed.

  With neither threshold given, the default applies: at most
  DEFAULT_MAX_BAD_FRACTION of the rows read, and no split of `producible`
  (the splits the rule can give rows to) left empty while rows were
  rejected. Rows dropped by a declared max_length policy do not count as
  bad.
  """
  bad, read = info.counts.rows_rejected, info.counts.rows_read
  if not bad:
    return
  default = max_bad_rows is None and max_bad_fraction is None
  over = []
  if default:
    max_bad_fraction = DEFAULT_MAX_BAD_FRACTION
  if max_bad_rows is not None and bad > max_bad_rows:
    over.append(f"--max-bad-rows {max_bad_rows}")
  if max_bad_fraction is not None and read and bad / read > max_bad_fraction:
    over.append(f"--max-bad-fraction {max_bad_fraction:g}"
                + (" (the default)" if default else ""))
  empty = [n for n in producible if n not in info.splits
           or not info.splits[n].num_records] if default else []
  if not over and not empty:
    return
  why = []
  if over:
    why.append(f"more than {' and '.join(over)} allow")
  if empty:
    why.append(f"the split{'s' if len(empty) > 1 else ''} "
               f"{', '.join(empty)} got no records")
  lines = [f"{bad:,} of {read:,} rows ({bad / max(read, 1):.2%}) were "
           f"rejected: {'; '.join(why)}; the dataset was not published "
           f"(the rejected rows are in {where}/{ERRORS_DIR}/). "
           + ("To publish anyway, allow it: --max-bad-fraction F / "
              "--max-bad-rows N, or the schema's max_bad_fraction / "
              "max_bad_rows. " if default else "") + "Top reasons:"]
  lines += rejection_lines(info)
  raise BadRowsError("\n".join(lines))


def rejection_lines(info: DatasetInfo, top: int = 5) -> List[str]:
  """The top rejection reasons of a dataset.json, with counts and one
  example each, as indented lines."""
  lines = []
  bad_reasons = [r for r in info.errors.reasons
                 if not r.reason.startswith("dropped: ")]
  for r in bad_reasons[:top]:
    ex = r.example or {}
    at = (f"{ex.get('source')} row {ex['row']}" if ex.get("row") is not None
          else f"{ex.get('source')} group {json.dumps(ex.get('group'))}")
    lines.append(f"  {r.rows:,} rows: {r.reason}\n    e.g. {at}: "
                 f"{ex.get('reason')}")
  return lines

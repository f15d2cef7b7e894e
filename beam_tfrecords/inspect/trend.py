"""A window's trend: one HTML page over several datasets (daily builds),
in reading order, from their dataset.json alone.

    beam-tfrecords report "out/events/2026-11-*" -o trend.html

Per split, the records of each dataset; per feature, the share of records
that hold it (presence) and its mean (numeric features), each drawn as a
line over the datasets with the values in a table beside it, so that a
day whose data drifted stands out. A dataset built without statistics
shows records only.
"""

import html
import os
from typing import Any, List, Optional, Sequence, Tuple


from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.read.window import Datasets, window

__all__ = ["render_trend", "write_trend"]

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h2{margin:28px 0 6px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px;
border:1px solid #e3e3e3;text-align:right}td:first-child,th:first-child
{text-align:left}.muted{color:#777}svg{display:block}
"""


def _e(value: Any) -> str:
  return html.escape(str(value), quote=True)


def _line(values: Sequence[Optional[float]], what: str) -> str:
  """An SVG line of the values over the datasets (None: a gap)."""
  known = [v for v in values if v is not None]
  if len(known) < 1:
    return ""
  low, high = min(known), max(known)
  width, height = 240, 48
  step = width / max(1, len(values) - 1)
  points = []
  for i, v in enumerate(values):
    if v is None:
      continue
    y = height / 2 if high == low else height - (v - low) / (high - low) \
        * height
    points.append(f"{i * step:.1f},{y:.1f}")
  dots = "".join(
      f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="2" '
      f'data-{what}="{v!r}"/>' for p, v in zip(points, known))
  return (f'<svg width="{width + 4}" height="{height + 4}" role="img">'
          f'<g transform="translate(2,2)"><polyline fill="none" '
          f'stroke="#4a78b5" points="{" ".join(points)}"/>{dots}</g></svg>')


def _feature_rows(found: List[Tuple[str, DatasetInfo]], split: str
                  ) -> List[str]:
  names = sorted({n for _, i in found
                  for n in (i.statistics or {}).get(split, {})})
  rows = []
  for name in names:
    presence: List[Optional[float]] = []
    means: List[Optional[float]] = []
    for _, info in found:
      s = (info.statistics or {}).get(split, {}).get(name)
      records = info.splits[split].num_records if split in info.splits \
          else 0
      presence.append(s.present / records if s and records else None)
      means.append(s.mean if s else None)
    cells = "".join(
        f"<td>{'' if p is None else f'{p:.3f}'}"
        f"{'' if m is None else f' / {m:.4g}'}</td>"
        for p, m in zip(presence, means))
    numeric = any(m is not None for m in means)
    rows.append(
        f"<tr><td>{_e(name)}</td>{cells}<td>{_line(presence, 'presence')}"
        f"</td><td>{_line(means, 'mean') if numeric else ''}</td></tr>")
  return rows


def render_trend(which: Datasets) -> str:
  """The page of a window (folders, a glob or a pin file)."""
  found = window(which)
  heads = "".join(f"<th>{_e(os.path.basename(p.rstrip('/')) or p)}</th>"
                  for p, _ in found)
  out = [f"<!doctype html><html><head><meta charset='utf-8'><title>"
         f"{_e(found[0][1].name)}: {len(found)} datasets</title>"
         f"<style>{_CSS}</style></head><body>",
         f"<h1>{_e(found[0][1].name)}: {len(found)} datasets</h1>",
         "<p class='muted'>In reading order: " + ", ".join(
             _e(p) for p, _ in found) + "</p>"]
  for split in sorted({k for _, i in found for k in i.splits}):
    counts = [i.splits[split].num_records if split in i.splits else None
              for _, i in found]
    out.append(f"<h2>split {_e(split)}</h2><table><tr><th>records</th>"
               + "".join(f"<td data-records='{c}'>"
                         f"{'' if c is None else f'{c:,}'}</td>"
                         for c in counts)
               + f"<td>{_line(counts, 'records')}</td></tr></table>")
    rows = _feature_rows(found, split)
    if rows:
      out.append("<table><tr><th>feature: presence / mean</th>" + heads
                 + "<th>presence</th><th>mean</th></tr>" + "".join(rows)
                 + "</table>")
  out.append("</body></html>")
  return "\n".join(out)


def write_trend(which: Datasets, target: str) -> str:
  """Writes the window's page to `target`; returns it."""
  text = render_trend(which)
  if "://" not in target:
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
  with FileSystems.create(target) as f:
    f.write(text.encode("utf-8"))
  return target

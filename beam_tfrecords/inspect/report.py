"""A dataset's report: one self-contained HTML page (inline CSS and SVG, no
scripts, nothing fetched) from its dataset.json and statistics.pb.

    beam-tfrecords report out/movies -o report.html

Header: name, record kind, splits (records, bytes, shards), inputs, tool
version, rows rejected with the top reasons and links to errors/. Then a
section per feature (id "feature-<name>") with one column per split: type
and spec, present / missing, values per record, for numbers the moments
and a histogram (statistics.pb's standard one: bars of a round width drawn
where they lie on a linear axis with round labels; every bar carries its
range and exact count as data- attributes),
for text the top values as bars, for image features a strip of thumbnails
from the first records. Where a feature's distribution differs between a
split and the first split, the section is flagged with the distance
(over DIFFERENCE_FLAG), and with a baseline the training split is drawn
beside the baseline's: beam_tfrecords.inspect.drift measures both, from
dataset.json's exact counts where the schema's expect: blocks kept them
(the number the publish gate judged), else from statistics.pb.
"""

import base64
import html
import math
import os
from typing import Any, Dict, List, Optional, Tuple

from apache_beam.io.filesystems import FileSystems

from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.encoding import histogram
from beam_tfrecords.encoding.histogram import round_width
from beam_tfrecords.encoding.stats import STEPS_STAT, TOP_SHOWN
from beam_tfrecords.inspect import drift
from beam_tfrecords.schema.split_rule import training_split

__all__ = ["render_report", "write_report", "DIFFERENCE_FLAG", "REPORT_FILE"]

REPORT_FILE = "report.html"
DIFFERENCE_FLAG = 0.1
THUMBNAILS = 8

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{margin:0 0 4px}h2{margin:28px 0 6px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px;
border:1px solid #e3e3e3;text-align:left;vertical-align:top}
.splits{display:flex;gap:16px;flex-wrap:wrap}.split{flex:1;min-width:260px}
.flag{background:#fff3cd;border:1px solid #e0b000;padding:4px 8px}
.muted{color:#777}svg{display:block}img{margin:2px;image-rendering:pixelated}
"""


def _e(value: Any) -> str:
  return html.escape(str(value), quote=True)


def _load_statistics(path: str) -> Dict[str, Dict[str, Any]]:
  """{split: {feature: FeatureNameStatistics}} of statistics.pb."""
  from tensorflow_metadata.proto.v0 import statistics_pb2
  stats = statistics_pb2.DatasetFeatureStatisticsList()
  with FileSystems.open(path) as f:
    stats.ParseFromString(f.read())
  return {d.name: {".".join(f.path.step): f for f in d.features}
          for d in stats.datasets}


def _ticks(low: float, high: float) -> List[float]:
  """Round values (1, 2, 2.5 or 5 times a power of ten apart) within
  [low, high], 2 to 7 of them."""
  step = round_width(high - low, 6)
  if not step > 0 or math.isinf(step) or high <= low:
    return [low]
  first = math.ceil(low / step)
  return [float(f"{k * step:.12g}") for k in range(
      first, math.floor(high / step) + 1)]


def _axis(low: float, high: float, width: int, height: int) -> str:
  """The x axis's round labels, placed where their values lie."""
  out = []
  for tick in _ticks(low, high):
    x = 0.0 if high <= low else (tick - low) / (high - low) * width
    anchor = "start" if x < 12 else "end" if x > width - 12 else "middle"
    out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{height}" '
               f'y2="{height + 3}" stroke="#999"></line><text class="tick" '
               f'x="{x:.1f}" y="{height + 13}" font-size="10" '
               f'text-anchor="{anchor}">{tick:g}</text>')
  return "".join(out)


def _slots(bars: List[Tuple[float, float, float]]
           ) -> List[Tuple[float, float]]:
  """Where to draw each bar: the slot of the round width that
  histogram.bars cut (its bars are unions of fine buckets starting in
  [i * width, (i + 1) * width)); the exact ranges of other bars."""
  exact = [(b[0], b[1]) for b in bars]
  if not bars:
    return exact
  step = round_width(bars[-1][1] - bars[0][0], histogram.BARS)
  if not step > 0 or math.isinf(step):
    return exact
  index = [math.floor(b[0] / step) for b in bars]
  slots = [(i * step, (i + 1) * step) for i in index]
  # Each bar must lie in its slot, but for its last fine bucket, which
  # may pass the slot's edge (far less than half a slot): else the bars
  # were not cut so (an older statistics.pb, or fine buckets wider than
  # the round width) and are drawn where they lie.
  if any(a >= b for a, b in zip(index, index[1:])) or any(
      high > slot_high + step / 2
      for (_, high, _), (_, slot_high) in zip(bars, slots)):
    return exact
  return slots


def _linear_svg(series: List[Tuple[List[Tuple[float, float, float]], str,
                                   str]], what: str, snap: bool = False
                ) -> str:
  """Bars drawn where their ranges lie on a linear axis with round labels
  (snap: in their slots of a round width, see _slots); series: ([(low,
  high, height value)], class, style); what: the data- attribute of the
  height value ("count" or "share")."""
  every = [b for bars, _, _ in series for b in bars]
  if not every:
    return ""
  drawn = [_slots(bars) if snap else [(b[0], b[1]) for b in bars]
           for bars, _, _ in series]
  low = min(d[0] for ds in drawn for d in ds)
  high = max(d[1] for ds in drawn for d in ds)
  top = max(b[2] for b in every) or 1
  width, height = 320, 90
  scale = width / (high - low) if high > low else 0.0
  rects = []
  for (bars, kind, style), places in zip(series, drawn):
    for (b_low, b_high, value), (d_low, d_high) in zip(bars, places):
      x = (d_low - low) * scale
      w = max(1.0, (d_high - d_low) * scale - 1) if scale else width
      h = round(height * value / top)
      shown = f"{value:,}" if what == "count" else f"{value:.6f}"
      rects.append(
          f'<rect class="{kind}" x="{x:.1f}" y="{height - h}" '
          f'width="{w:.1f}" height="{h}" {style} data-low="{b_low!r}" '
          f'data-high="{b_high!r}" data-{what}="{shown.replace(",", "")}">'
          f'<title>[{b_low:.6g}, {b_high:.6g}): {shown}</title></rect>')
  return (f'<svg width="{width}" height="{height + 16}" role="img">'
          + "".join(rects) + _axis(low, high, width, height) + "</svg>")


def _histogram_svg(buckets) -> str:
  return _linear_svg([([(b.low_value, b.high_value, int(b.sample_count))
                        for b in buckets], "bar", 'fill="#4a7bd0"')],
                     "count", snap=True)


def _deciles(feature) -> str:
  """Where 10%, 50% and 90% of the values are reached: the fine bucket
  (statistics.pb's custom statistic) in which the running count reaches
  each share, as its edge nearer zero (a value of that bucket: for
  integers the value itself)."""
  kept = drift.from_proto(feature)
  fine = kept.fine if kept is not None else None
  if fine is None or not fine.total:
    return ""
  points: Dict[int, float] = {}
  running = 0
  for low, high, count in histogram.buckets(fine):
    running += count
    for share in (10, 50, 90):
      if share not in points and running * 100 >= share * fine.total:
        points[share] = low if low >= 0 else high
  return ("<div class='deciles muted'>10%: ~{:.4g}, median: ~{:.4g}, "
          "90%: ~{:.4g}</div>").format(points[10], points[50], points[90])


def _top_svg(values) -> str:
  if not values:
    return ""
  top = max(v.frequency for v in values) or 1
  rows = []
  for i, v in enumerate(values):
    w = round(180 * v.frequency / top)
    rows.append(f'<text x="0" y="{i * 16 + 11}" font-size="11">'
                f'{_e(v.value[:24])}</text><rect class="top" x="130" '
                f'y="{i * 16 + 2}" width="{w}" height="12" fill="#5aa469" '
                f'data-value="{_e(v.value)}" data-count="{int(v.frequency)}">'
                f'</rect><text x="{134 + w}" y="{i * 16 + 11}" '
                f'font-size="10">{int(v.frequency):,}</text>')
  return (f'<svg width="380" height="{len(values) * 16 + 4}" role="img">'
          + "".join(rows) + "</svg>")


def _cell(feature, spec: dict, image: bool = False) -> str:
  shape = f' shape {spec["shape"]}' if "shape" in spec else ""
  parts = [f'<div class="muted">{_e(spec.get("kind", ""))} '
           f'{_e(spec.get("dtype", ""))}{_e(shape)}</div>']
  stats = feature.num_stats if feature.HasField("num_stats") else \
      feature.string_stats
  common = stats.common_stats
  total = common.num_non_missing + common.num_missing
  present = 100 * common.num_non_missing / total if total else 0
  parts.append(f"<div>present {common.num_non_missing:,} ({present:.1f}%), "
               f"missing {common.num_missing:,}</div><div>values per record"
               f" {common.min_num_values}–{common.max_num_values} (avg "
               f"{common.avg_num_values:.2f})</div>")
  for custom in feature.custom_stats:
    if custom.name == STEPS_STAT and custom.histogram.buckets:
      parts.append("<div class='steps'>steps per record"
                   + _histogram_svg(custom.histogram.buckets) + "</div>")
  if common.num_values_histogram.buckets:
    parts.append("<div class='lengths'>list lengths"
                 + _histogram_svg(common.num_values_histogram.buckets)
                 + "</div>")
  if feature.HasField("num_stats"):
    n = feature.num_stats
    parts.append(f"<div>mean {n.mean:.4g}, std {n.std_dev:.4g}, min "
                 f"{n.min:.4g}, max {n.max:.4g}, zeros {n.num_zeros:,}"
                 "</div>")
    if n.histograms:
      parts.append(_histogram_svg(n.histograms[0].buckets))
    parts.append(_deciles(feature))
  else:
    s = feature.string_stats
    if s.unique:
      parts.append(f"<div>{s.unique:,} distinct values</div>")
    parts.append(f"<div>average length {s.avg_length:.1f}</div>")
    if not image:  # an image's bytes: thumbnails instead
      parts.append(_top_svg(list(s.top_values)))
  return "".join(parts)


def _thumbnails(path: str, info: DatasetInfo, split: str, name: str) -> str:
  from beam_tfrecords.read.reader import shard_files
  from beam_tfrecords.core.tfrecord_files import decode_example, iter_tfrecords
  images = []
  for shard in shard_files(path, split, info):
    for record in iter_tfrecords(shard):
      _, values = decode_example(record).get(name, (None, []))
      if values and isinstance(values[0], bytes):
        images.append(values[0])
      if len(images) >= THUMBNAILS:
        break
    if len(images) >= THUMBNAILS:
      break
  return "".join(
      f'<img class="thumb" width="48" height="48" alt="{_e(name)}" '
      f'src="data:image;base64,{base64.b64encode(v).decode()}">'
      for v in images)


def _anomalies_section(info: DatasetInfo) -> List[str]:
  """The expectations' outcome: every anomaly, the baseline, the notes."""
  checked = info.anomalies
  if checked is None:
    return []
  found = checked.found
  out = [f"<h2 id='anomalies'>anomalies: {len(found)}</h2>"]
  if checked.baseline:
    out.append(f"<p class='muted'>baseline: {_e(checked.baseline)}</p>")
  if found:
    out.append("<table id='anomaly-list'><tr><th>feature</th><th>check</th>"
               "<th>split</th><th>observed</th><th>expected</th></tr>")
    out += [f"<tr><td>{_e(a.feature or '(dataset)')}</td>"
            f"<td>{_e(a.check)}</td><td>{_e(a.split or '')}</td>"
            f"<td>{_e(a.observed)}</td><td>{_e(a.expected)}</td></tr>"
            for a in found]
    out.append("</table>")
  out += [f"<p class='muted'>{_e(n)}</p>" for n in checked.notes]
  return out


def _overlay_svg(new: Dict[Any, float], old: Dict[Any, float]) -> str:
  """Histogram shares of the new data (filled) and the baseline (outlined)
  on their common buckets ({(low, high): share})."""
  keys = sorted(set(new) | set(old))
  return _linear_svg([([k + (new.get(k, 0.0),) for k in keys], "new",
                       'fill="#4a7bd0"'),
                      ([k + (old.get(k, 0.0),) for k in keys], "baseline",
                       'fill="none" stroke="#d0782a"')], "share")


def _side_by_side_svg(new: Dict[Any, float], old: Dict[Any, float]) -> str:
  """Value shares of the new data and the baseline, bars side by side,
  the values most frequent in either first (at most TOP_SHOWN)."""
  values = sorted(set(new) | set(old),
                  key=lambda v: (-max(new.get(v, 0.0), old.get(v, 0.0)),
                                 v))[:TOP_SHOWN]
  if not values:
    return ""
  top = max(max(new.get(v, 0.0), old.get(v, 0.0)) for v in values) or 1
  rows = []
  for i, v in enumerate(values):
    for j, (share, colour, kind) in enumerate(
        ((new.get(v, 0.0), "#5aa469", "new"),
         (old.get(v, 0.0), "#d0782a", "baseline"))):
      w = round(180 * share / top)
      rows.append(f'<rect class="{kind}" x="130" y="{i * 22 + 2 + j * 9}" '
                  f'width="{w}" height="8" fill="{colour}" '
                  f'data-value="{_e(v)}" data-share="{share:.6f}"></rect>')
    rows.append(f'<text x="0" y="{i * 22 + 13}" font-size="11">'
                f'{_e(str(v)[:24])}</text>')
  return (f'<svg width="380" height="{len(values) * 22 + 4}" role="img">'
          + "".join(rows) + "</svg>")


def _baseline_section(info: DatasetInfo, stats: Dict[str, Dict[str, Any]]
                      ) -> List[str]:
  """The training split beside the baseline's, feature by feature: the
  new data's histogram with the baseline's outlined over it; value
  frequencies side by side."""
  baseline = info.anomalies.baseline if info.anomalies else None
  if not baseline or not stats:
    return []
  try:
    base_info = DatasetInfo.from_directory(baseline)
    base = _load_statistics(FileSystems.join(
        baseline, base_info.tfdv_statistics or "statistics.pb"))
  except Exception:  # pylint: disable=broad-except
    return [f"<p class='muted'>the baseline's statistics could not be read "
            f"({_e(baseline)})</p>"]
  split = training_split(stats) or ""
  base_split = split if split in base else (training_split(base) or "")
  out = [f"<h2 id='baseline'>{_e(split)} beside the baseline's "
         f"{_e(base_split)}</h2><p class='muted'>{_e(baseline)}; blue / "
         "green: this build, orange: the baseline</p><div class='splits'>"]
  mine = (info.statistics or {}).get(split, {})
  theirs = (base_info.statistics or {}).get(base_split, {})
  for name, feature in sorted(stats[split].items()):
    old = base.get(base_split, {}).get(name)
    # What the publish gate judged, where it measured this feature.
    d = drift.pick(mine.get(name), theirs.get(name), feature, old)
    if d is None:
      continue
    chart = _overlay_svg(d.new, d.old) if d.kind == drift.JENSEN_SHANNON \
        else _side_by_side_svg(d.new, d.old)
    out.append(f"<div class='split' data-feature='{_e(name)}'><h3>"
               f"{_e(name)}</h3><div class='muted' data-drift='{d.value!r}'>"
               f"{d.kind} {d.value:.3f}</div>{chart}</div>")
  out.append("</div>")
  return out


def render_report(path: str, info: Optional[DatasetInfo] = None) -> str:
  """The report of the dataset at `path` (`info`: its dataset.json, given
  while it is staged, before it is finished), as HTML text."""
  from beam_tfrecords.read.reader import dataset_info
  if info is None:
    info = dataset_info(path)
  stats = _load_statistics(FileSystems.join(
      path, info.tfdv_statistics)) if info.tfdv_statistics else {}
  # The record splits; a transformed-only dataset has none of its own:
  # the described ones.
  splits = sorted(info.splits) or sorted(stats)
  spec = info.feature_spec
  if info.record == "sequence_example":
    spec = dict(spec.get("context", {}), **spec.get("sequence", {}))
  images = {n for n, f in info.schema.get("features", {}).items()
            if isinstance(f, dict) and f.get("type") == "image"}
  counts = info.counts
  out = [f"<!doctype html><html><head><meta charset='utf-8'><title>"
         f"{_e(info.name)}</title><style>{_CSS}</style></head><body>",
         f"<h1>{_e(info.name)}</h1><div class='muted'>"
         f"{_e(info.record)} · {_e(info.tool.name)} "
         f"{_e(info.tool.version)} · inputs: "
         f"{_e(', '.join(info.inputs.patterns) or '-')}"
         "</div>", "<table><tr><th>split</th><th>records</th><th>bytes</th>"
         "<th>shards</th></tr>"]
  for split in sorted(info.splits):
    s = info.splits[split]
    out.append(f"<tr><td>{_e(split)}</td><td>{s.num_records:,}</td><td>"
               f"{s.num_bytes:,}</td><td>{s.num_shards}</td></tr>")
  out.append("</table>")
  out.append(f"<p>rows read {counts.rows_read:,}; in records "
             f"{counts.rows_written:,}; rejected "
             f"{counts.rows_rejected:,}; dropped "
             f"{counts.rows_dropped:,}</p>")
  reasons = info.errors.reasons
  if reasons:
    out.append("<table id='rejected'><tr><th>rows</th><th>reason</th></tr>")
    out += [f"<tr><td>{r.rows:,}</td><td>{_e(r.reason)}</td></tr>"
            for r in reasons[:10]]
    out.append("</table><p>" + " ".join(
        f"<a href='{_e(e.file)}'>{_e(e.file)}</a>"
        for e in info.errors.files) + "</p>")
  out += _anomalies_section(info)
  out += _baseline_section(info, stats)
  labels = list(info.label or [])
  for label in labels:
    out.append(f"<h2 id='label-balance'>label balance: {_e(label)}</h2>"
               "<div class='splits'>")
    for split in splits:
      feature = stats.get(split, {}).get(label)
      if feature is not None and feature.HasField("string_stats"):
        chart = _top_svg(list(feature.string_stats.top_values))
      elif feature is not None and feature.num_stats.histograms:
        chart = _histogram_svg(feature.num_stats.histograms[0].buckets)
      else:
        chart = "<div class='muted'>no statistics</div>"
      out.append(f"<div class='split'><h3>{_e(split)}</h3>{chart}</div>")
    out.append("</div>")
  out += _feature_sections(path, info, stats, splits, spec, labels, images)
  out.append("</body></html>\n")
  return "".join(out)


def _feature_sections(path: str, info: DatasetInfo,
                      stats: Dict[str, Dict[str, Any]], splits: List[str],
                      spec: Dict[str, Any], labels: List[str],
                      images: set) -> List[str]:
  """A section per feature: a column per split, flagged where a split
  differs from the first one (drift.pick: what the gate would judge)."""
  out: List[str] = []
  kept = info.statistics or {}
  for name in sorted(spec):
    flag = ""
    per_split = [stats.get(split, {}).get(name) for split in splits]
    base = per_split[0] if per_split else None
    for split, feature in zip(splits[1:], per_split[1:]):
      d = drift.pick(kept.get(split, {}).get(name),
                     kept.get(splits[0], {}).get(name), feature, base) \
          if base and feature else None
      if d and d.value > DIFFERENCE_FLAG:
        flag += (f"<div class='flag'>{_e(split)} differs from "
                 f"{_e(splits[0])}: {d.kind} {d.value:.3f} (flagged over "
                 f"{DIFFERENCE_FLAG})</div>")
    title = " (label)" if name in labels else ""
    out.append(f"<section id='feature-{_e(name)}'><h2>{_e(name)}{title}"
               f"</h2>{flag}<div class='splits'>")
    for split, feature in zip(splits, per_split):
      body = _cell(feature, spec[name], name in images) \
          if feature is not None else \
          "<div class='muted'>no statistics</div>"
      if name in images:
        body += _thumbnails(path, info, split, name)
      out.append(f"<div class='split' data-split='{_e(split)}'><h3>"
                 f"{_e(split)}</h3>{body}</div>")
    out.append("</div></section>")
  return out


def write_report(path: str, target: Optional[str] = None,
                 info: Optional[DatasetInfo] = None) -> str:
  """Writes the report (default: REPORT_FILE inside the dataset)."""
  target = target or FileSystems.join(path, REPORT_FILE)
  text = render_report(path, info)
  if "://" not in target:
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
  with FileSystems.create(target) as f:
    f.write(text.encode("utf-8"))
  return target

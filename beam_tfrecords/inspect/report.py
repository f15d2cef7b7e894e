"""A dataset's report: one self-contained HTML page (inline CSS and SVG, no
scripts, nothing fetched) from its dataset.json and statistics.pb.

    beam-tfrecords report out/movies -o report.html

Header: name, record kind, splits (records, bytes, shards), inputs, tool
version, rows rejected with the top reasons and links to errors/. Then an
overview (table id "overview", as TFDV's Facets Overview): a row per
feature (data-feature="<name>") with its name linking to its section, its
type as the schema declares it (int64, float, string, bytes, image,
tensor; its shape; for SequenceExamples context or sequence), and in the
training split (marked in the headers when there are several): missing
records, the mean (numbers) or the top value with its share of the values
(text and bytes), and a small chart, the histogram its section draws or
its top values' bars ("—" for images and raw tensors); every number is
exact in a data- attribute (data-missing, data-records, data-mean,
data-top, data-top-count, data-values), from dataset.json's statistics
(else statistics.pb's); without statistics a row has just the name and
type. Then a section per feature (id "feature-<name>") with one column per
split: type and spec, present / missing, values per record, for numbers
the moments and a histogram (statistics.pb's standard one: bars of a round
width drawn where they lie on a linear axis with round labels; every bar
carries its range and exact count as data- attributes), for text the top
values as bars, for image features a strip of thumbnails from the first
records. Where a feature's distribution differs between a split and the
first split, the section is flagged with the distance (over
DIFFERENCE_FLAG), and with a baseline the training split is drawn beside
the baseline's: beam_tfrecords.inspect.drift measures both, from
dataset.json's exact counts where the schema's expect: sections kept them
(the number the publish gate judged), else from statistics.pb.
"""

import base64
import html
import math
import os
from typing import Any, Dict, List, NamedTuple, Optional, Tuple


from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.info import DatasetInfo, FeatureStats
from beam_tfrecords.core.layout import REPORT_FILE, STATISTICS_FILE
from beam_tfrecords.encoding import histogram
from beam_tfrecords.encoding.histogram import round_width
from beam_tfrecords.encoding.stats import STEPS_STAT, TOP_SHOWN
from beam_tfrecords.inspect import drift
from beam_tfrecords.read.reader import load_statistics
from beam_tfrecords.schema.split_rule import training_split

__all__ = ["render_report", "write_report", "DIFFERENCE_FLAG"]
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
#overview td{vertical-align:middle}#overview .num{text-align:right}
"""
# The overview's charts: tiny bars, drawn as the sections' charts are.
SPARK_WIDTH, SPARK_HEIGHT = 100, 24
# The stored type of a parsing spec's dtype, for features the schema does
# not declare itself (an image's height, a vocabulary's index).
_DTYPES = {"float32": "float", "int64": "int64", "string": "string"}


def _e(value: Any) -> str:
  return html.escape(str(value), quote=True)


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
                                   str]], what: str, snap: bool = False,
                small: bool = False) -> str:
  """Bars drawn where their ranges lie on a linear axis with round labels
  (snap: in their slots of a round width, see _slots); series: ([(low,
  high, height value)], class, style); what: the data- attribute of the
  height value ("count" or "share"); small: the overview's tiny chart
  (SPARK_WIDTH x SPARK_HEIGHT, no axis)."""
  every = [b for bars, _, _ in series for b in bars]
  if not every:
    return ""
  drawn = [_slots(bars) if snap else [(b[0], b[1]) for b in bars]
           for bars, _, _ in series]
  low = min(d[0] for ds in drawn for d in ds)
  high = max(d[1] for ds in drawn for d in ds)
  top = max(b[2] for b in every) or 1
  width, height = (SPARK_WIDTH, SPARK_HEIGHT) if small else (320, 90)
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
  if small:
    return (f'<svg class="spark" width="{width}" height="{height}" '
            f'role="img">' + "".join(rects) + "</svg>")
  return (f'<svg width="{width}" height="{height + 16}" role="img">'
          + "".join(rects) + _axis(low, high, width, height) + "</svg>")


def _histogram_svg(buckets, small: bool = False) -> str:
  """statistics.pb's histogram (its buckets) as bars (small: the
  overview's tiny chart)."""
  return _linear_svg([([(b.low_value, b.high_value, int(b.sample_count))
                        for b in buckets], "bar", 'fill="#4a7bd0"')],
                     "count", snap=True, small=small)


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


def _top_rect(v, x: float, y: float, w: float, h: float) -> str:
  """A top value's bar (v: statistics.pb's FreqAndValue), its value and
  exact count as data- attributes."""
  return (f'<rect class="top" x="{x:g}" y="{y:g}" width="{w:g}" '
          f'height="{h:g}" fill="#5aa469" data-value="{_e(v.value)}" '
          f'data-count="{int(v.frequency)}"><title>{_e(v.value[:40])}: '
          f'{int(v.frequency):,}</title></rect>')


def _top_svg(values, small: bool = False) -> str:
  """The top values (statistics.pb's) as bars, labelled; small: the
  overview's tiny chart, a column per value, most frequent first."""
  if not values:
    return ""
  top = max(v.frequency for v in values) or 1
  if small:
    slot = SPARK_WIDTH / len(values)
    bars = []
    for i, v in enumerate(values):
      h = max(1, round(SPARK_HEIGHT * v.frequency / top))
      bars.append(_top_rect(v, round(i * slot, 1), SPARK_HEIGHT - h,
                            round(max(1.0, slot - 1), 1), h))
    return (f'<svg class="spark" width="{SPARK_WIDTH}" '
            f'height="{SPARK_HEIGHT}" role="img">' + "".join(bars)
            + "</svg>")
  rows = []
  for i, v in enumerate(values):
    w = round(180 * v.frequency / top)
    rows.append(f'<text x="0" y="{i * 16 + 11}" font-size="11">'
                f'{_e(v.value[:24])}</text>'
                + _top_rect(v, 130, i * 16 + 2, w, 12)
                + f'<text x="{134 + w}" y="{i * 16 + 11}" '
                f'font-size="10">{int(v.frequency):,}</text>')
  return (f'<svg width="380" height="{len(values) * 16 + 4}" role="img">'
          + "".join(rows) + "</svg>")


def _cell(feature, spec: dict, image: bool = False) -> str:
  shape = f' shape {spec["shape"]}' if "shape" in spec else ""
  pieces = [f'<div class="muted">{_e(spec.get("kind", ""))} '
           f'{_e(spec.get("dtype", ""))}{_e(shape)}</div>']
  stats = feature.num_stats if feature.HasField("num_stats") else \
      feature.string_stats
  common = stats.common_stats
  total = common.num_non_missing + common.num_missing
  present = 100 * common.num_non_missing / total if total else 0
  pieces.append(f"<div>present {common.num_non_missing:,} ({present:.1f}%), "
               f"missing {common.num_missing:,}</div><div>values per record"
               f" {common.min_num_values}–{common.max_num_values} (avg "
               f"{common.avg_num_values:.2f})</div>")
  for custom in feature.custom_stats:
    if custom.name == STEPS_STAT and custom.histogram.buckets:
      pieces.append("<div class='steps'>steps per record"
                   + _histogram_svg(custom.histogram.buckets) + "</div>")
  if common.num_values_histogram.buckets:
    pieces.append("<div class='lengths'>list lengths"
                 + _histogram_svg(common.num_values_histogram.buckets)
                 + "</div>")
  if feature.HasField("num_stats"):
    n = feature.num_stats
    pieces.append(f"<div>mean {n.mean:.4g}, std {n.std_dev:.4g}, min "
                 f"{n.min:.4g}, max {n.max:.4g}, zeros {n.num_zeros:,}"
                 "</div>")
    if n.histograms:
      pieces.append(_histogram_svg(n.histograms[0].buckets))
    pieces.append(_deciles(feature))
  else:
    s = feature.string_stats
    if s.unique:
      pieces.append(f"<div>{s.unique:,} distinct values</div>")
    pieces.append(f"<div>average length {s.avg_length:.1f}</div>")
    if not image:  # an image's bytes: thumbnails instead
      pieces.append(_top_svg(list(s.top_values)))
  return "".join(pieces)


def _thumbnails(path: str, info: DatasetInfo, split: str, name: str) -> str:
  from beam_tfrecords.read.reader import shard_files
  from beam_tfrecords.core.shard_reader import iter_tfrecords
  from beam_tfrecords.core.tfrecord_files import decode_example
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
    base = load_statistics(FileSystems.join(
        baseline, base_info.tfdv_statistics or STATISTICS_FILE))
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


class _Summary(NamedTuple):
  """A feature's overview numbers in one split: records with and without
  it, the mean of its numbers, its top value (value, count) and its
  values in all records."""
  records: int
  missing: int
  mean: Optional[float]
  top: Optional[Tuple[str, int]]
  values: int


def _summary(kept: Optional[FeatureStats], feature) -> Optional[_Summary]:
  """The overview's numbers: dataset.json's exact statistics (`kept`),
  else statistics.pb's (`feature`); None without either."""
  if kept is not None:
    top = (str(kept.top[0][0]), int(kept.top[0][1])) if kept.top else None
    return _Summary(kept.records, kept.missing, kept.mean, top, kept.values)
  if feature is None:
    return None
  numbers = feature.HasField("num_stats")
  common = feature.num_stats.common_stats if numbers else \
      feature.string_stats.common_stats
  first = None if numbers or not feature.string_stats.top_values else \
      feature.string_stats.top_values[0]
  return _Summary(
      common.num_non_missing + common.num_missing, common.num_missing,
      feature.num_stats.mean if numbers else None,
      (first.value, int(first.frequency)) if first is not None else None,
      common.tot_num_values)


def _feature_type(name: str, spec: Dict[str, Any],
                  declared: Dict[str, Dict[str, Any]]
                  ) -> Tuple[str, List[int], str]:
  """(type, shape, owner): the type and shape the schema declares for the
  feature; for a feature the build makes of a declaration (an image's
  height, a vocabulary's index), the type and shape of its parsing spec
  and the declaration's name (owner), else ""."""
  raw = declared.get(name)
  if raw is not None and raw.get("type"):
    return str(raw["type"]), list(raw.get("shape") or []), ""
  owner = next((d for d in sorted(declared, key=lambda d: (-len(d), d))
                if name.startswith(f"{d}_")), "")
  dtype = str(spec.get("dtype", ""))
  return (_DTYPES.get(dtype, dtype), list(spec["shape"]) if "shape" in spec
          else [-1], owner)


def _type_cell(name: str, spec: Dict[str, Any],
               declared: Dict[str, Dict[str, Any]], section: str) -> str:
  """The overview's type cell: type, shape (but a scalar's), the
  declaration it is made of, and (SequenceExamples) context or
  sequence."""
  kind, shape, owner = _feature_type(name, spec, declared)
  notes = [n for n in (f"of {owner}" if owner else "", section) if n]
  shown = f"{kind} {shape}" if shape else kind
  return (f'<td class="type" data-type="{_e(kind)}" data-shape="'
          f'{_e(shape)}"' + (f' data-part="{section}"' if section else "")
          + f">{_e(shown)}" + "".join(
              f' <span class="muted">{_e(n)}</span>' for n in notes)
          + "</td>")


def _overview_row(name: str, type_cell: str, summary: Optional[_Summary],
                  feature, other: bool, label: bool) -> str:
  """A feature's overview row; `feature`: its statistics.pb entry for the
  chart; other: a feature whose values are neither numbers nor text
  (an image, a raw tensor): no top value, no chart."""
  title = ' <span class="muted">(label)</span>' if label else ""
  row = (f'<tr data-feature="{_e(name)}"><td class="name"><a href='
         f'"#feature-{_e(name)}">{_e(name)}</a>{title}</td>{type_cell}')
  if summary is None:
    return row + '<td class="muted" colspan="3">no statistics</td></tr>'
  share = 100 * summary.missing / summary.records if summary.records else 0
  row += (f'<td class="missing num" data-missing="{summary.missing}" '
          f'data-records="{summary.records}" title="{summary.missing:,} of '
          f'{summary.records:,} records">{share:.1f}%</td>')
  if summary.mean is not None:
    row += (f'<td class="value" data-mean="{summary.mean!r}">mean '
            f'{summary.mean:.4g}</td>')
  elif summary.top is not None and not other:
    value, count = summary.top
    top_share = 100 * count / summary.values if summary.values else 0
    row += (f'<td class="value" data-top="{_e(value)}" data-top-count='
            f'"{count}" data-values="{summary.values}">{_e(value[:24])} '
            f'<span class="muted">{top_share:.1f}%</span></td>')
  else:
    row += '<td class="value">—</td>'
  chart = ""
  if feature is not None and feature.HasField("num_stats"):
    if feature.num_stats.histograms:
      chart = _histogram_svg(feature.num_stats.histograms[0].buckets, True)
  elif feature is not None and not other:
    chart = _top_svg(list(feature.string_stats.top_values), True)
  return row + f'<td class="chart">{chart or "—"}</td></tr>'


def _overview(info: DatasetInfo, stats: Dict[str, Dict[str, Any]],
              splits: List[str], spec: Dict[str, Any],
              labels: List[str]) -> List[str]:
  """The table at the top (id "overview"): a row per feature, its
  numbers those of the training split (named in the headers when there
  are several)."""
  split = training_split(splits) or ""
  kept = (info.statistics or {}).get(split, {})
  described = stats.get(split, {})
  declared = info.declarations()
  sections = {n: p for p in ("context", "sequence")
           for n in info.feature_spec.get(p, {})} \
      if info.record == "sequence_example" else {}
  mark = f" ({_e(split)})" if len(splits) > 1 else ""
  out = ["<h2>overview</h2><table id='overview'><tr><th>feature</th>"
         f"<th>type</th><th>missing{mark}</th><th>mean / top value{mark}"
         f"</th><th>distribution{mark}</th></tr>"]
  for name in sorted(spec):
    kind = _feature_type(name, spec[name], declared)[0]
    out.append(_overview_row(
        name, _type_cell(name, spec[name], declared, sections.get(name, "")),
        _summary(kept.get(name), described.get(name)), described.get(name),
        kind in ("image", "tensor"), name in labels))
  out.append("</table>")
  return out


def render_report(path: str, info: Optional[DatasetInfo] = None) -> str:
  """The report of the dataset at `path` (`info`: its dataset.json, given
  while it is staged, before it is finished), as HTML text."""
  from beam_tfrecords.read.reader import dataset_info
  if info is None:
    info = dataset_info(path)
  stats = load_statistics(FileSystems.join(
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
  labels = list(info.label or [])
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
  out += _overview(info, stats, splits, spec, labels)
  out += _anomalies_section(info)
  out += _baseline_section(info, stats)
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

"""The dataset report: one self-contained HTML page, whose numbers are the
source data's."""

import random
import re

import numpy as np
import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.inspect.report import DIFFERENCE_FLAG, render_report

from tests.helpers.browser import chromium
from tests.helpers.paths import ROOT


SCHEMA = {"name": "rep", "splits": {"column": "split",
                                    "values": ["train", "eval"]},
          "label": "c",
          "features": {"x": "float", "n": "int64",
                       "c": {"type": "string", "required": True},
                       "l": {"type": "int64", "shape": [-1],
                             "separator": "|"}}}


def _build(tmp_path):
  rng = random.Random(3)
  rows = []
  for i in range(3000):
    split = "train" if i % 3 else "eval"
    # x is shifted in eval: the report flags it; c is alike in both.
    x = rng.lognormvariate(0, 1) * (40 if split == "eval" else 1)
    rows.append({"x": x, "n": rng.randint(0, 9) if i % 7 else None,
                 "c": rng.choice(["a", "b", "b"]), "split": split,
                 "l": [rng.randint(0, 5) for _ in range(rng.randint(1, 9))]})
  src = tmp_path / "in.csv"
  src.write_text("x,n,c,l,split\n" + "".join(
      f"{r['x']!r},{'' if r['n'] is None else r['n']},{r['c']},"
      f"{'|'.join(map(str, r['l']))},{r['split']}\n" for r in rows))
  out = str(tmp_path / "out")
  btr.build(SCHEMA, str(src), out)
  return out, rows


def _split_cells(page, feature):
  """(the feature's section, {split: its cell's HTML})."""
  section = re.search(rf"<section id='feature-{feature}'>(.*?)</section>",
                      page, re.S).group(1)
  cells = {}
  for piece in section.split("<div class='split' data-split='")[1:]:
    split, cell = piece.split("'", 1)
    cells[split] = cell
  return section, cells


def test_the_report_shows_each_feature_with_the_source_data_counts(
    tmp_path):
  out, rows = _build(tmp_path)
  page = render_report(out)
  assert "<script" not in page and "http" not in page  # self-contained
  for name in ("x", "n", "c", "l"):
    assert f"<section id='feature-{name}'>" in page
  section, cells = _split_cells(page, "x")
  assert set(cells) == {"train", "eval"}
  for split, cell in cells.items():
    values = np.array([r["x"] for r in rows if r["split"] == split],
                      np.float32).astype(np.float64)
    bars = re.findall(r'data-low="([^"]+)" data-high="([^"]+)" '
                      r'data-count="(\d+)"', cell)
    assert sum(int(c) for _, _, c in bars) == len(values)
    for low, high, count in bars:
      want = ((values >= float(low)) & (values < float(high))).sum()
      assert int(count) == want, (split, low, high)
  assert "train differs from eval: Jensen-Shannon" in section
  _, l_cells = _split_cells(page, "l")
  for split, cell in l_cells.items():
    lengths = np.array([len(r["l"]) for r in rows if r["split"] == split])
    chart = cell.split("<div class='lengths'>list lengths", 1)[1]
    bars = re.findall(r'data-low="([^"]+)" data-high="([^"]+)" '
                      r'data-count="(\d+)"', chart.split("</svg>")[0])
    assert sum(int(c) for _, _, c in bars) == len(lengths)
    for low, high, count in bars:
      assert int(count) == ((lengths >= float(low))
                            & (lengths < float(high))).sum()
  assert "<h2 id='label-balance'>label balance: c</h2>" in page
  c_section, c_cells = _split_cells(page, "c")
  assert "differs" not in c_section  # alike in both splits
  assert "c (label)" in c_section
  for split, cell in c_cells.items():
    tops = dict(re.findall(r'data-value="(\w)" data-count="(\d+)"', cell))
    part = [r["c"] for r in rows if r["split"] == split]
    assert {k: int(v) for k, v in tops.items()} == {
        v: part.count(v) for v in set(part)}
  assert DIFFERENCE_FLAG == 0.1


def test_the_report_command_writes_the_page(tmp_path, capsys):
  out, _ = _build(tmp_path)
  target = tmp_path / "r.html"
  assert cli.main(["report", out, "-o", str(target)]) == 0
  assert capsys.readouterr().out.strip() == str(target)
  page = target.read_text()
  assert page.startswith("<!doctype html>") and len(page) < 2_000_000


def _overview(page):
  """(the overview table's HTML, {feature: its row's HTML} in order)."""
  table = re.search(r"<table id='overview'>(.*?)</table>", page,
                    re.S).group(1)
  return table, dict(re.findall(r'<tr data-feature="([^"]+)">(.*?)</tr>',
                                table, re.S))


def _cell(row, kind):
  """The attributes of a row's cell of this class, {name: value}, and its
  text."""
  attributes, text = re.search(rf'<td class="{kind}"([^>]*)>(.*?)</td>',
                               row, re.S).groups()
  return dict(re.findall(r'(data-[\w-]+)="([^"]*)"', attributes)), text


def _exact_mean(values):
  """The mean correctly rounded, as dataset.json's statistics give it."""
  from fractions import Fraction
  return float(sum(map(Fraction, values)) / len(values))


def test_the_overview_shows_the_training_splits_numbers(tmp_path):
  out, rows = _build(tmp_path)
  page = render_report(out)
  # At the top: after the splits summary, before any feature's section.
  assert page.index("<table id='overview'>") < page.index(
      "<h2 id='label-balance'>") < page.index("<section id='feature-")
  assert page.index("</table><p>rows read") < page.index(
      "<table id='overview'>")
  table, found = _overview(page)
  assert list(found) == ["c", "l", "n", "x"]  # one row per feature
  # Two splits: the numbers are the training split's, and say so.
  assert "<th>missing (train)</th>" in table
  assert "<th>mean / top value (train)</th>" in table
  train = [r for r in rows if r["split"] == "train"]
  for name, row in found.items():
    assert f'<a href="#feature-{name}">{name}</a>' in row
    assert f"<section id='feature-{name}'>" in page  # where it links
    missing = sum(r[name] is None for r in train)
    cell, text = _cell(row, "missing num")
    assert cell == {"data-missing": str(missing),
                    "data-records": str(len(train))}
    assert text == f"{100 * missing / len(train):.1f}%"
  assert _cell(found["n"], "missing num")[0]["data-missing"] != "0"
  assert [_cell(found[n], "type")[0]["data-type"] for n in found] == [
      "string", "int64", "int64", "float"]
  assert "l</a></td><td class=\"type\" data-type=\"int64\" " \
         "data-shape=\"[-1]\">int64 [-1]</td>" in found["l"]
  assert "c</a> <span class=\"muted\">(label)</span>" in found["c"]
  numbers = {
      "x": [float(np.float32(r["x"])) for r in train],
      "n": [r["n"] for r in train if r["n"] is not None],
      "l": [v for r in train for v in r["l"]]}
  for name, values in numbers.items():
    cell, text = _cell(found[name], "value")
    assert float(cell["data-mean"]) == _exact_mean(values), name
    assert text == f"mean {_exact_mean(values):.4g}"
  c = [r["c"] for r in train]
  top = max(set(c), key=c.count)
  cell, text = _cell(found["c"], "value")
  assert cell == {"data-top": top, "data-top-count": str(c.count(top)),
                  "data-values": str(len(c))}
  assert text == f'{top} <span class="muted">' \
                 f'{100 * c.count(top) / len(c):.1f}%</span>'
  # The charts: the histogram the train column of x's section draws, and
  # c's top values, tiny.
  bar = r'data-low="([^"]+)" data-high="([^"]+)" data-count="(\d+)"'
  spark = _cell(found["x"], "chart")[1]
  assert spark.startswith('<svg class="spark" width="100" height="24"')
  assert re.findall(bar, spark) == re.findall(bar, _split_cells(
      page, "x")[1]["train"])
  tops = re.findall(r'data-value="(\w)" data-count="(\d+)"',
                    _cell(found["c"], "chart")[1])
  assert tops == sorted(((v, str(c.count(v))) for v in set(c)),
                        key=lambda t: -int(t[1]))
  assert render_report(out) == page  # the same page again


def test_the_movie_ratings_overview_has_the_csv_numbers(tmp_path):
  import csv
  import os
  from pipelines import movie_ratings
  out = str(tmp_path / "movies")
  movie_ratings.run(["--output", out])
  with open(os.path.join(ROOT, "pipelines", "data", "movie_ratings.csv"),
            encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  table, found = _overview(render_report(out))
  assert list(found) == ["age", "movies", "price", "ratings", "suggestion",
                         "suggestion_purchased"]
  assert "<th>missing</th>" in table  # one split: not named
  for name, row in found.items():  # every row has every column
    assert _cell(row, "missing num") == (
        {"data-missing": "0", "data-records": str(len(rows))}, "0.0%")
  ages = [int(r["Age"]) for r in rows]
  assert _cell(found["age"], "value") == (
      {"data-mean": repr(sum(ages) / len(ages))},
      f"mean {sum(ages) / len(ages):.4g}")
  ratings = [float(np.float32(v)) for r in rows
             for v in r["Movie Ratings"].split("|")]
  assert float(_cell(found["ratings"], "value")[0]["data-mean"]) == \
      _exact_mean(ratings)
  assert _cell(found["ratings"], "type")[0] == {"data-type": "float",
                                               "data-shape": "[-1]"}
  for name, values in (
      ("suggestion", [r["Suggestion"] for r in rows]),
      ("movies", [m for r in rows for m in r["Movie"].split("|")])):
    counts = {v: values.count(v) for v in values}
    top = max(counts.values())
    cell, text = _cell(found[name], "value")
    assert [v for v, n in counts.items() if n == top] == [cell["data-top"]]
    assert cell["data-top-count"] == str(top)
    assert cell["data-values"] == str(len(values))
    assert text.endswith(f'<span class="muted">'
                         f'{100 * top / len(values):.1f}%</span>')
  assert _cell(found["suggestion"], "value")[0]["data-top"] == "Amélie"



# Measures the overview as Chromium lays it out, into <pre id="layout">:
# added to a copy of a report (the report itself has no script).
_MEASURE = """<script>
(() => {
  const box = e => { const b = e.getBoundingClientRect();
                     return [b.left, b.top, b.width, b.height]; };
  const table = document.getElementById("overview");
  const style = getComputedStyle(table);
  const out = {
    shown: style.display + " " + style.visibility, table: box(table),
    rows: [...table.querySelectorAll("tr[data-feature]")].map(
        r => [r.dataset.feature, box(r)]),
    sparks: [...table.querySelectorAll("svg.spark")].map(box),
    section: box(document.querySelector("section"))};
  const pre = document.createElement("pre");
  pre.id = "layout";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def _overview_layout(flags, page, tmp_path):
  """The overview's boxes ([left, top, width, height] in CSS pixels) as
  Chromium lays the report out: the table, its rows, its charts and the
  first feature section; and Chromium's run (its --dump-dom of the page
  with _MEASURE added, and its log)."""
  import html
  import json
  import subprocess
  probe = tmp_path / f"probe-{page.name}"
  probe.write_text(page.read_text().replace("</body>",
                                            _MEASURE + "</body>"))
  dom = subprocess.run(flags + ["--dump-dom", probe.as_uri()],
                       capture_output=True, text=True, timeout=120)
  assert dom.returncode == 0, dom.stderr[-2000:]
  return json.loads(html.unescape(re.search(
      r'<pre id="layout">(.*?)</pre>', dom.stdout, re.S).group(1))), dom


def _check_overview_drawn(layout, names, shot, height):
  """The overview is shown, a row per feature one under the other, above
  the first section and within the screenshot (`height` pixels), whose
  pixels there are not blank: text and lines in the table, a bar of the
  charts' blue or green in every chart."""
  from PIL import Image
  assert layout["shown"] == "table visible"
  left, top, width, tall = layout["table"]
  assert [n for n, _ in layout["rows"]] == sorted(names)
  assert width > 300 and tall > 24 * len(names)
  assert top + tall <= min(layout["section"][1], height)
  bottom = top
  for _, (_, row_top, _, row_height) in layout["rows"]:
    assert row_top >= bottom - 1 and row_height >= 24
    bottom = row_top + row_height
  assert bottom <= top + tall + 1
  image = Image.open(shot).convert("RGB")
  assert image.size == (1280, height)
  pixels = np.asarray(image).astype(int)  # [y, x, rgb]
  table = pixels[int(top):int(top + tall), int(left):int(left + width)]
  assert (table.min(axis=2) < 200).mean() > 0.02
  for x, y, w, h in layout["sparks"]:
    assert (w, h) == (100, 24) and left <= x and x + w <= left + width
    assert top <= y and y + h <= top + tall
    chart = pixels[int(y):int(y + h), int(x):int(x + w)]
    assert any((abs(chart - colour).sum(axis=2) < 60).any()
               for colour in ((74, 123, 208), (90, 164, 105)))


@pytest.mark.slow
def test_reports_render_in_a_headless_browser(tmp_path):
  """Examples with splits, SequenceExamples and images: each report loads
  in headless Chromium without a console error, every feature's section
  is in the rendered page, so is the overview, a row per feature, laid
  out at the top of the page, and a screenshot is taken, not blank where
  the overview is."""
  import os
  import subprocess
  from pipelines import detections, tokens_labels
  browser = chromium()
  datasets = {"splits": _build(tmp_path)[0]}
  for name, module in (("sequences", tokens_labels),
                       ("images", detections)):
    datasets[name] = str(tmp_path / name)
    module.run(["--output", datasets[name]])
  for name, out in datasets.items():
    page = tmp_path / f"{name}.html"
    assert cli.main(["report", out, "-o", str(page)]) == 0
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu",
             "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
             "--window-size=1280,1600", "--force-device-scale-factor=1"]
    # (One load for the DOM and the layout: _MEASURE only adds a <pre>.)
    layout, dom = _overview_layout(flags, page, tmp_path)
    assert "Uncaught" not in dom.stderr and \
        "Failed to load resource" not in dom.stderr, dom.stderr[-2000:]
    spec = btr.dataset_info(out).feature_spec
    names = list(spec.get("context", {})) + list(spec.get("sequence", {})) \
        if "context" in spec else list(spec)
    for feature in names:
      assert f'<section id="feature-{feature}">' in dom.stdout, feature
    overview = dom.stdout.split('<table id="overview">', 1)[1].split(
        "</table>", 1)[0]
    assert re.findall(r'<tr data-feature="([^"]+)">', overview) == \
        sorted(names)
    shot = tmp_path / f"{name}.png"
    run = subprocess.run(flags + [f"--screenshot={shot}", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and os.path.getsize(shot) > 10_000
    _check_overview_drawn(layout, names, shot, 1600)
    # A chart for every feature but the image's bytes.
    assert len(layout["sparks"]) == len(names) - (name == "images")
    if name == "images":  # a strip of thumbnails from the first records
      assert dom.stdout.count('class="thumb"') == 8


def test_the_build_publishes_the_report_unless_asked_not_to(tmp_path):
  out, _ = _build(tmp_path)
  info = btr.dataset_info(out)
  assert info.report == "report.html"
  with open(f"{out}/report.html") as f:
    assert f.read() == render_report(out)  # the same page, published
  src = tmp_path / "in.csv"
  bare = tmp_path / "bare"
  assert cli.main(["build", "--input", str(src), "--output", str(bare),
                   "--no-report", "--schema", _schema_file(tmp_path)]) == 0
  assert btr.dataset_info(str(bare)).report is None
  assert not (bare / "report.html").exists()


def _schema_file(tmp_path):
  import json
  path = tmp_path / "s.json.yaml"
  path.write_text(json.dumps(SCHEMA))
  return str(path)


def test_a_sequence_report_shows_steps_per_record(tmp_path):
  import json
  import os
  from pipelines import tokens_labels
  out = str(tmp_path / "seq")
  tokens_labels.run(["--output", out])
  here = ROOT
  with open(os.path.join(here, "pipelines", "data",
                         "tokens_labels.jsonl")) as f:
    steps = np.array([len(json.loads(line)["tokens"]) for line in f])
  _, cells = _split_cells(render_report(out), "tokens")
  chart = cells["train"].split("<div class='steps'>steps per record", 1)[1]
  bars = re.findall(r'data-low="([^"]+)" data-high="([^"]+)" '
                    r'data-count="(\d+)"', chart.split("</svg>")[0])
  assert sum(int(c) for _, _, c in bars) == len(steps)
  for low, high, count in bars:
    assert int(count) == ((steps >= float(low)) & (steps < float(high))).sum()


def test_a_report_that_cannot_be_made_does_not_cost_the_dataset(
    tmp_path, monkeypatch, caplog):
  from beam_tfrecords.inspect import report

  def broken(path, meta=None):
    raise ValueError("broken on purpose")
  monkeypatch.setattr(report, "render_report", broken)
  out, _ = _build(tmp_path)
  assert btr.dataset_info(out).report is None
  assert not (tmp_path / "out" / "report.html").exists()
  assert "the dataset's report could not be made (ValueError: broken on " \
         "purpose); the dataset is published without report.html" in \
         caplog.text

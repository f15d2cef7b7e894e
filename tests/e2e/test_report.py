"""The dataset report: one self-contained HTML page, whose numbers are the
source data's."""

import random
import re

import numpy as np
import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.inspect.report import DIFFERENCE_FLAG, render_report

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


def _chromium():
  import shutil
  return shutil.which("chromium") or shutil.which("chromium-browser") or \
      shutil.which("google-chrome")


@pytest.mark.slow
def test_reports_render_in_a_headless_browser(tmp_path):
  """Examples with splits, SequenceExamples and images: each report loads
  in headless Chromium without a console error, every feature's section
  is in the rendered page, and a screenshot is taken."""
  import os
  import subprocess
  import pytest
  from pipelines import detections, tokens_labels
  browser = _chromium()
  if browser is None:
    pytest.skip("Chromium is not installed (apt-get install chromium; "
                ".ci/run installs it)")
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
             "--window-size=1280,1600"]
    dom = subprocess.run(flags + ["--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Uncaught" not in dom.stderr and \
        "Failed to load resource" not in dom.stderr, dom.stderr[-2000:]
    spec = btr.dataset_info(out).feature_spec
    names = list(spec.get("context", {})) + list(spec.get("sequence", {})) \
        if "context" in spec else list(spec)
    for feature in names:
      assert f'<section id="feature-{feature}">' in dom.stdout, feature
    shot = tmp_path / f"{name}.png"
    run = subprocess.run(flags + [f"--screenshot={shot}", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and os.path.getsize(shot) > 10_000
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

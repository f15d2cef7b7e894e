"""The dataset card (issue 49): README.md in the output says the card,
the splits and the features with the numbers of the input, its loading
snippets run as written, and it renders in a real headless browser as a
page with its tables."""

import ast
import gzip
import json
import os
import re
import subprocess

import pytest

import beam_tfrecords as btr

from tests.helpers.cards import (CARD, FLIGHTS, HOSTILE, HOSTILE_NAMES,
                                 HOSTILE_VALUE)
from tests.helpers.expectations import DAY1, DAY2


@pytest.fixture(scope="module")
def flights(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("card") / "flights")
  btr.build(FLIGHTS, [DAY1, DAY2], out, num_shards={"train": 2, "eval": 1})
  with open(os.path.join(out, "README.md")) as f:
    return out, f.read()


def _train_rows():
  """The input rows of the training split, as the build split them."""
  rows = []
  for path in (DAY1, DAY2):
    with gzip.open(path, "rt") as f:
      rows += [json.loads(line) for line in f]
  return rows


def test_the_card_says_what_the_schema_and_the_build_say(flights):
  out, text = flights
  info = btr.dataset_info(out)
  lines = text.splitlines()
  assert lines[:3] == [f"# {CARD['title']}", "", FLIGHTS["description"]]
  assert f"- **License:** {CARD['license']}" in lines
  assert ("- **Creators:** Hadley Wickham, US Bureau of Transportation "
          "Statistics") in lines
  assert f"- **Version:** {CARD['version']}" in lines
  assert f"- **URL:** {CARD['url']}" in lines
  assert "- **Keywords:** flights, delays" in lines
  assert (f"- **Built by:** beam-tfrecords {btr.__version__} from "
          f"{info.counts.rows_read:,} rows of jsonl input") in lines
  for name, split in info.splits.items():
    assert (f"| {name} | {split.num_records:,} | {split.num_shards} | "
            in text), name
  for key, title in (("dataCollection", "Data collection"),
                     ("dataLimitations", "Limitations"),
                     ("dataBiases", "Biases"),
                     ("personalSensitiveInformation",
                      "Personal and sensitive information"),
                     ("dataUseCases", "Intended uses")):
    assert f"- **{title}:** {CARD['rai'][key]}" in lines
  assert "## Citation\n\n```\n" + CARD["citation"] + "\n```" in text
  assert "No input row was rejected (1,785 read)." in lines


def test_the_feature_rows_have_the_training_splits_numbers(flights):
  out, text = flights
  info = btr.dataset_info(out)
  train = list(btr.iter_records(out, "train"))
  rows = dict(re.findall(r"^\| `(\w+)` \| (.*) \|$", text, re.M))
  assert sorted(rows) == sorted(FLIGHTS["features"])
  for name in FLIGHTS["features"]:
    kind, missing, value = rows[name].split(" | ")
    declared = FLIGHTS["features"][name]
    assert kind == (declared if isinstance(declared, str)
                    else declared["type"])
    lacking = sum(r.get(name) is None for r in train)
    assert missing == f"{lacking / len(train):.1%}", name
    stats = info.statistics["train"][name]
    if stats.mean is not None:
      assert value == f"mean {stats.mean:.6g}"
      values = [r[name] for r in train if r.get(name) is not None]
      assert abs(stats.mean - sum(values) / len(values)) < 1e-6
    else:
      top, count = stats.top[0]
      assert value == f"top {top!r} ({count / stats.values:.0%})"
      assert count == sum(r.get(name) == top for r in train)
  assert rows["dep_delay"].split(" | ")[1] != "0.0%"  # cancelled flights


def _snippets(text):
  return re.findall(r"```python\n(.*?)```", text, re.S)


def _run_as_written(code, folder, monkeypatch, capsys):
  """`code` run in `folder` as a script, in a namespace of its own (its
  imports its own), in this process: a child process would pay 8 s of
  TensorFlow's import again. Its last printed line, as JSON."""
  monkeypatch.chdir(folder)
  capsys.readouterr()
  exec(compile(code, "<snippet>", "exec"), {"__name__": "__main__"})  # pylint: disable=exec-used
  return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def few_flights(tmp_path_factory):
  """The flights schema built from the first 60 flights of the first day:
  the snippets are the same, and reading them record by record (as the
  snippet loops do) takes a second, not four."""
  folder = tmp_path_factory.mktemp("few")
  with gzip.open(DAY1, "rt") as f:
    lines = [next(f) for _ in range(60)]
  (folder / "day1.jsonl").write_text("".join(lines))
  out = str(folder / "flights")
  btr.build(FLIGHTS, str(folder / "day1.jsonl"), out)
  with open(os.path.join(out, "README.md")) as f:
    return out, f.read()


def test_the_loading_snippets_run_as_written(few_flights, monkeypatch,
                                             capsys):
  """In the dataset's folder, as the card says: btr.load, and TensorFlow
  alone with the spec the card spells out; both give the records."""
  out, text = few_flights
  load, plain, torch_snippet = _snippets(text)[:3]
  assert "from beam_tfrecords.read.torch import Dataset" in torch_snippet
  check = (
      "import json, sys\n" + load + plain.replace("ds =", "plain =") +
      # (a feature that may be missing parses as a SparseTensor)
      "def v(x):\n"
      "  x = tf.sparse.to_dense(x) if isinstance(x, tf.SparseTensor) else x\n"
      "  return x.numpy().reshape(-1).tolist()\n"
      "a = [v(r['flight']) for r in ds]\n"
      "b = [v(r['flight']) for r in plain]\n"
      "print(json.dumps([a, b]))\n")
  a, b = _run_as_written(check, out, monkeypatch, capsys)
  want = [[r["flight"]] for r in btr.iter_records(out, "train")]
  assert a == b == want


def test_the_card_renders_in_a_headless_browser(flights, tmp_path):
  """README.md as a Markdown viewer shows it (Python-Markdown, as mkdocs
  renders it), loaded in headless Chromium: its headings and tables are
  in the page it lays out."""
  import markdown
  import shutil
  browser = (shutil.which("chromium") or shutil.which("chromium-browser")
             or shutil.which("google-chrome"))
  if browser is None:
    pytest.skip("Chromium is not installed (apt-get install chromium; "
                ".ci/run installs it)")
  out, text = flights
  page = tmp_path / "card.html"
  page.write_text("<!doctype html><meta charset='utf-8'>" + markdown.markdown(
      text, extensions=["tables", "fenced_code"]))
  dom = subprocess.run(
      [browser, "--headless", "--no-sandbox", "--disable-gpu",
       "--dump-dom", page.as_uri()],
      capture_output=True, text=True, timeout=120)
  assert dom.returncode == 0, dom.stderr[-2000:]
  html = dom.stdout
  assert re.findall(r"<h2>(.*?)</h2>", html) == [
      "Splits", "Features", "Rejected rows and anomalies",
      "Responsible AI", "Citation", "Loading it"]
  tables = re.findall(r"<table>(.*?)</table>", html, re.S)
  assert len(tables) == 2
  info = btr.dataset_info(out)
  split_rows = re.findall(r"<tr>\s*<td>(\w+)</td>\s*<td[^>]*>([\d,]+)</td>",
                          tables[0])
  assert sorted(split_rows) == sorted(
      (n, f"{s.num_records:,}") for n, s in info.splits.items())
  features = re.findall(r"<tr>\s*<td><code>(\w+)</code></td>", tables[1])
  assert sorted(features) == sorted(FLIGHTS["features"])


# --- Names and fields that are syntax elsewhere (issue 60) -------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
  """A build whose feature names, card fields and values are HTML, Markdown
  and Python (tests/helpers/cards.py HOSTILE)."""
  folder = tmp_path_factory.mktemp("hostile")
  row = {f"c{i}": HOSTILE_VALUE for i in range(len(HOSTILE_NAMES))}
  (folder / "rows.jsonl").write_text((json.dumps(row) + "\n") * 3)
  out = str(folder / "out")
  btr.build(HOSTILE, str(folder / "rows.jsonl"), out)
  with open(os.path.join(out, "README.md"), encoding="utf-8") as f:
    return out, f.read()


def _prose(text):
  """README.md without its fenced code blocks (whose text every Markdown
  viewer shows as it is)."""
  return re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", text, flags=re.S | re.M)


# The elements Python-Markdown makes of the card's own syntax: any other
# (a <script>, an <img>, an <a>) came from a value.
CARD_TAGS = {"h1", "h2", "p", "ul", "li", "strong", "em", "code", "pre",
             "table", "thead", "tbody", "tr", "th", "td"}


def _tags(text):
  import markdown
  page = markdown.markdown(text, extensions=["tables", "fenced_code"])
  return page, set(re.findall(r"<([a-z][a-z0-9]*)", page))


# Calls and imports the loading snippets make: a name that became code
# would add one.
SNIPPET_CALLS = {"load", "sorted", "glob", "VarLenFeature", "TFRecordDataset",
                 "map", "parse_single_example", "Dataset", "CroissantBuilder",
                 "download_and_prepare", "DownloadConfig", "PipelineOptions",
                 "as_dataset"}
SNIPPET_IMPORTS = {"beam_tfrecords", "glob", "tensorflow",
                   "beam_tfrecords.read.torch", "tensorflow_datasets",
                   "apache_beam.options.pipeline_options"}


def _spec_keys(trees):
  return [key.value for tree in trees for node in ast.walk(tree)
          if isinstance(node, ast.Dict) for key in node.keys]


@pytest.mark.parametrize("case", HOSTILE_NAMES,
                         ids=[c[0] for c in HOSTILE_NAMES])
def test_a_feature_name_is_text_in_the_card_and_a_string_in_its_snippets(
    hostile, case):
  _, name, shown = case
  _, text = hostile
  (row,) = [line for line in text.splitlines()
            if line.startswith(f"| {shown} | string | ")]
  # Four cells: the name's | and the value's are escaped.
  assert row == (f"| {shown} | string | 0.0% | top "
                 "'&lt;script&gt;alert(2)&lt;/script&gt;\\|\\`x\\`' (100%) |")
  assert "<script" not in _prose(text)
  page, tags = _tags(text)
  assert tags <= CARD_TAGS, tags - CARD_TAGS
  assert "&lt;script&gt;alert(2)&lt;/script&gt;|<code>" not in page
  trees = [ast.parse(snippet) for snippet in _snippets(text)]
  assert len(trees) == 4  # btr.load, TensorFlow alone, PyTorch, Croissant
  assert _spec_keys(trees).count(name) == 1


def test_the_snippets_hold_the_names_as_strings_and_no_other_code(
    hostile, monkeypatch, capsys):
  out, text = hostile
  names = [name for _, name, _ in HOSTILE_NAMES]
  trees = [ast.parse(snippet) for snippet in _snippets(text)]
  assert sorted(_spec_keys(trees)) == sorted(names)
  calls = {node.func.attr if isinstance(node.func, ast.Attribute)
           else node.func.id
           for tree in trees for node in ast.walk(tree)
           if isinstance(node, ast.Call)}
  assert calls == SNIPPET_CALLS
  imports = {alias.name for tree in trees for node in ast.walk(tree)
             if isinstance(node, ast.Import) for alias in node.names} | {
                 node.module for tree in trees for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
  assert imports == SNIPPET_IMPORTS
  # Run as written, TensorFlow's snippet parses every feature by its name.
  plain = _snippets(text)[1]
  check = (plain + "import json\n"
           "r = next(iter(ds))\n"
           "print(json.dumps({k: [v.decode() for v in "
           "tf.sparse.to_dense(t).numpy().tolist()] for k, t in r.items()}))\n")
  got = _run_as_written(check, out, monkeypatch, capsys)
  assert got == {name: [HOSTILE_VALUE] for name in names}


# (case, the card's text of a field of HOSTILE, and the HTML a Markdown
# viewer makes of it: the field's text, never an element)
HOSTILE_FIELDS = [
    ("title", "# &lt;img src=x onerror=alert(3)&gt; \\#1\n",
     "<h1>&lt;img src=x onerror=alert(3)&gt; #1</h1>"),
    ("description", "&lt;script&gt;alert(6)&lt;/script&gt;\n\n"
                    "\\# not a heading\n",
     "<p>&lt;script&gt;alert(6)&lt;/script&gt;</p>\n<p># not a heading</p>"),
    ("creators", "- **Creators:** &lt;b&gt;Eve&lt;/b&gt; "
                 "&lt;eve@example.org&gt;\n",
     "<li><strong>Creators:</strong> &lt;b&gt;Eve&lt;/b&gt; "
     "&lt;eve@example.org&gt;</li>"),
    ("keywords", "- **Keywords:** \\[link](javascript:alert(5))\n",
     "<li><strong>Keywords:</strong> [link](javascript:alert(5))</li>"),
    ("rai", "- **Biases:** \\*bold\\* \\_it\\_ &lt;i&gt;html&lt;/i&gt; "
            "# not a heading\n",
     "<li><strong>Biases:</strong> *bold* _it_ &lt;i&gt;html&lt;/i&gt; # not "
     "a heading</li>"),
    # A code block shows it as it is; its fence outlasts the one inside.
    ("citation", "## Citation\n\n````\n```\n<script>alert(4)</script>\n"
                 "````\n",
     "<pre><code>```\n&lt;script&gt;alert(4)&lt;/script&gt;\n</code></pre>"),
]


@pytest.mark.parametrize("case", HOSTILE_FIELDS,
                         ids=[c[0] for c in HOSTILE_FIELDS])
def test_a_card_field_shows_as_its_text(hostile, case):
  _, markdown_text, html = case
  _, text = hostile
  assert markdown_text in text
  page, tags = _tags(text)
  assert html in page
  assert tags <= CARD_TAGS, tags - CARD_TAGS

"""The dataset card (issue 49): README.md in the output says the card,
the splits and the features with the numbers of the input, its loading
snippets run as written, and it renders in a real headless browser as a
page with its tables."""

import gzip
import json
import os
import re
import subprocess
import sys

import pytest

import beam_tfrecords as btr

from tests.helpers.cards import CARD, FLIGHTS
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


def test_the_loading_snippets_run_as_written(flights):
  """In the dataset's folder, as the card says: btr.load, and TensorFlow
  alone with the spec the card spells out; both give the records."""
  out, text = flights
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
  run = subprocess.run([sys.executable, "-c", check], cwd=out,
                       capture_output=True, text=True, timeout=300)
  assert run.returncode == 0, run.stderr[-3000:]
  a, b = json.loads(run.stdout.strip().splitlines()[-1])
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

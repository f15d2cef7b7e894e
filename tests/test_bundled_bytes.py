"""The bundled pipelines' outputs, pinned byte for byte (issue 18: build()
is rebuilt on the public PTransforms; what it writes must not change).

The manifest holds a SHA-256 per published file. dataset.json is pinned
without the parts that depend on where and when the inputs are (input
paths, their modification times, the fingerprint and build key made from
them); paths under pipelines/data are written as <data> (there, in
errors/ and in report.html). TensorFlow
Transform's saved model is left out (TensorFlow does not write it
byte-identically); its transformed shards are pinned.

To re-pin after a deliberate change of the output: BTR_REPIN=1 pytest
tests/test_bundled_bytes.py, and say why in the commit.
"""

import hashlib
import importlib
import json
import os

import pytest

from beam_tfrecords.core.errors import reason_category

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(HERE, "pipelines", "data")
MANIFEST = os.path.join(HERE, "tests", "golden", "bundled_outputs.json")
PIPELINES = ["movie_ratings", "structured_columns", "tokens_labels",
             "user_events", "image_pixels", "image_files",
             "movie_ratings_tft"]


def _digest(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()


def _normalized(text: str, inputs: str = DATA) -> str:
  """`text` with the inputs' folder written as <data>: as it is, as JSON
  writes it, and as dataset.json's reason categories write it (numbers
  as N: a pytest-123 or popen-gw1 of the temporary folder)."""
  for path in (inputs, reason_category(inputs)):
    text = text.replace(json.dumps(path)[1:-1], "<data>").replace(
        path, "<data>")
  return text


def manifest_of(output: str, inputs: str = DATA) -> dict:
  """name -> SHA-256 of each published file; `inputs` (the inputs'
  folder) is written as <data>."""
  found = {}
  for root, dirs, files in os.walk(output):
    dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                     and d not in ("transform_fn", "transformed_metadata"))
    for name in sorted(files):
      path = os.path.join(root, name)
      rel = os.path.relpath(path, output)
      with open(path, "rb") as f:
        data = f.read()
      if rel == "dataset.json":
        meta = json.loads(data)
        for key in ("inputs", "build_key"):
          meta.pop(key)
        # Its listing of TFT's saved model files (names only) stays.
        data = _normalized(json.dumps(meta, sort_keys=True),
                           inputs).encode()
      elif rel == "_SUCCESS":
        continue  # holds the build key
      elif rel.startswith("errors/") or rel == "report.html":
        data = _normalized(data.decode("utf-8"), inputs).encode()
      found[rel] = _digest(data)
  return found


@pytest.mark.parametrize("name", PIPELINES)
def test_bundled_pipeline_output_is_pinned(tmp_path, name):
  module = importlib.import_module(f"pipelines.{name}")
  out = str(tmp_path / name)
  module.run(["--output", out])
  got = manifest_of(out)
  with open(MANIFEST) as f:
    pinned = json.load(f)
  if os.environ.get("BTR_REPIN"):
    pinned[name] = got
    with open(MANIFEST, "w") as f:
      json.dump(pinned, f, indent=1, sort_keys=True)
      f.write("\n")
  assert got == pinned[name]

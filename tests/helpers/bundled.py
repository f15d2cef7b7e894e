"""The bundled pipelines' outputs as a manifest of SHA-256s, and the
pinned manifest (tests/golden/bundled_outputs.json)."""

import hashlib
import json
import os

from beam_tfrecords.core.errors import reason_category

from tests.helpers.paths import ROOT


HERE = ROOT
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

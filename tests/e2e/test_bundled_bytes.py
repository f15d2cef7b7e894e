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
tests/e2e/test_bundled_bytes.py, and say why in the commit.
"""

import importlib
import json
import os

import pytest

from tests.helpers.bundled import MANIFEST, PIPELINES, manifest_of


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

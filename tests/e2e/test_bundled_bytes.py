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

The same outputs read back into the typed dataset.json (core/info.py),
byte for byte: tests/e2e/test_info.py's check of every dataset.json a
build writes, on the bundled pipelines, made here where they are built
(a TensorFlow Transform build takes 6 s).
"""

import importlib
import json
import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.info import DatasetInfo

from tests.helpers.bundled import MANIFEST, PIPELINES, manifest_of


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """name -> the folder its bundled pipeline wrote, each built once."""
  root = tmp_path_factory.mktemp("bundled")
  outputs = {}

  def output(name):
    if name not in outputs:
      outputs[name] = str(root / name)
      importlib.import_module(f"pipelines.{name}").run(
          ["--output", outputs[name]])
    return outputs[name]
  return output


@pytest.mark.parametrize("name", PIPELINES)
def test_bundled_pipeline_output_is_pinned(built, name):
  out = built(name)
  got = manifest_of(out)
  with open(MANIFEST) as f:
    pinned = json.load(f)
  if os.environ.get("BTR_REPIN"):
    pinned[name] = got
    with open(MANIFEST, "w") as f:
      json.dump(pinned, f, indent=1, sort_keys=True)
      f.write("\n")
  assert got == pinned[name]


@pytest.mark.parametrize("name", PIPELINES)
def test_every_dataset_json_round_trips_byte_for_byte(built, name):
  """Examples, SequenceExamples (steps counts), TensorFlow Transform's
  part, lists, images: every variant the bundled pipelines write."""
  with open(os.path.join(built(name), "dataset.json")) as f:
    text = f.read()
  info = DatasetInfo.from_directory(built(name))
  assert info.to_text() == text
  assert info.to_json() == json.loads(text)


def test_sequences_and_transform_parts(built):
  seq = btr.dataset_info(built("user_events"))
  assert seq.record == "sequence_example"
  assert seq.counts.steps_written == seq.counts.rows_written > 0
  tft = btr.dataset_info(built("movie_ratings_tft"))
  assert tft.transform is not None
  assert set(tft.transform.splits) == set(tft.splits) == {"train", "eval"}
  assert tft.transform.splits["train"].files == [
      "transformed/train-00000-of-00001.tfrecord.gz"]
  assert any(f.startswith("transform_fn/") for f in tft.transform.files)
  assert tft.transform.feature_spec
  assert btr.dataset_info(built("movie_ratings")).transform is None

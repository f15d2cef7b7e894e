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


# Files whose bytes hold the inputs' folder: their checksums (in
# dataset.json and croissant.json) are checked against the files, then
# written as <checked>, so that the manifest does not depend on where the
# inputs are.
_PATH_HOLDERS = ("report.html", "errors/", "README.md")
# TensorFlow Transform's saved model, which TensorFlow does not write the
# same way twice (left out of the manifest): checked, and not pinned.
_UNPINNED = ("transform_fn/", "transformed_metadata/")


def _checked(output: str, name: str, size, sha: str) -> str:
  with open(os.path.join(output, name), "rb") as f:
    data = f.read()
  assert (len(data), _digest(data)) == (size, sha), (
      f"{output}: {name}'s recorded checksum is not its bytes'")
  return "<checked>" if name.startswith(_PATH_HOLDERS + _UNPINNED) else sha


def _dataset_json(output: str, meta: dict) -> dict:
  """dataset.json without what depends on where and when the inputs
  were, every checksum it records checked."""
  for key in ("inputs", "build_key"):
    meta.pop(key)
  entries = [(e["file"], e) for e in meta["errors"]["files"]]
  entries += list(meta.get("checksums", {}).items())
  for name, entry in entries:
    entry["sha256"] = _checked(output, name, entry["bytes"], entry["sha256"])
    if entry["sha256"] == "<checked>":  # (their sizes vary as theirs do)
      entry["bytes"] = "<checked>"
  shards = [s for split in meta["splits"].values() for s in split["shards"]]
  shards += [s for split in meta.get("transform", {}).get(
      "splits", {}).values() for s in split["shards"]]
  for shard in shards:
    _checked(output, shard["file"], shard["bytes"], shard["sha256"])
  return meta


def _croissant(output: str, described: dict) -> dict:
  """croissant.json without what depends on where and when the inputs
  were (their paths, the fingerprint, the build key, dataset.json's and
  the path holders' checksums; the build time is SOURCE_DATE_EPOCH's)."""
  for entry in described["distribution"]:
    if entry["@id"].startswith(_PATH_HOLDERS + _UNPINNED
                               + ("dataset.json",)):
      entry["sha256"] = "<checked>"
      entry.pop("contentSize")
  activity = described["prov:wasGeneratedBy"]
  activity["identifier"] = [i for i in activity.get("identifier", [])
                            if not i.startswith(("build key ",
                                                 "input fingerprint "))]
  described.pop("prov:wasDerivedFrom", None)
  return described


def manifest_of(output: str, inputs: str = DATA) -> dict:
  """name -> SHA-256 of each published file; `inputs` (the inputs'
  folder) is written as <data>; the checksums dataset.json records are
  checked against the files."""
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
        meta = _dataset_json(output, json.loads(data))
        # Its listing of TFT's saved model files (names only) stays.
        data = _normalized(json.dumps(meta, sort_keys=True),
                           inputs).encode()
      elif rel == "croissant.json":
        data = _normalized(json.dumps(_croissant(output, json.loads(data)),
                                      sort_keys=True), inputs).encode()
      elif rel == "_SUCCESS":
        continue  # holds the build key
      elif rel.startswith(_PATH_HOLDERS):
        data = _normalized(data.decode("utf-8"), inputs).encode()
      found[rel] = _digest(data)
  return found

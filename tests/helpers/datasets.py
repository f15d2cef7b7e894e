"""A dataset folder's files: compared file for file (the runners'
and worker counts' builds) and read as bytes (the publishes)."""

import filecmp
import hashlib
import json
import os


def dataset_files(out):
  """Relative paths of every file in a dataset directory."""
  found = []
  for root, dirs, files in os.walk(out):
    for name in files:
      found.append(os.path.relpath(os.path.join(root, name), out))
  return sorted(found)


def without_run_id(success: bytes) -> bytes:
  """A _SUCCESS's bytes without the run id of the build that published
  (its first line's last word): the tool, its version, the build key and
  the seal of dataset.json stay."""
  line, rest = success.split(b"\n", 1)
  return line.rsplit(b" ", 1)[0] + b"\n" + rest


def same_file(a, b, rel) -> bool:
  """The same bytes; a _SUCCESS the same but for the run id of the build
  that published."""
  x, y = os.path.join(a, rel), os.path.join(b, rel)
  if os.path.basename(rel) == "_SUCCESS":
    return (without_run_id(open(x, "rb").read())
            == without_run_id(open(y, "rb").read()))
  return filecmp.cmp(x, y, shallow=False)


def assert_same_files(a, b):
  assert dataset_files(a) == dataset_files(b)
  for rel in dataset_files(a):
    assert same_file(a, b, rel), rel


def _files(folder) -> dict:
  """relative path -> bytes, hidden entries (lock, staging) aside; a
  _SUCCESS without the run id of the build that published."""
  found = {}
  for root, dirs, names in os.walk(folder):
    dirs[:] = [d for d in dirs if not d.startswith(".")]
    for name in names:
      if not name.startswith("."):
        path = os.path.join(root, name)
        data = open(path, "rb").read()
        if name == "_SUCCESS" and len(data.split(b"\n")[0].split()) == 4:
          data = without_run_id(data)
        found[os.path.relpath(path, folder)] = data
  return found


def assert_same_but_units(a, b):
  """Every file of two datasets byte for byte, but dataset.json's
  `inputs.units` (how many read units were reused: the determinism
  contract exempts `inputs`) and croissant.json's checksum of
  dataset.json, and _SUCCESS's (each its own dataset.json's); no .units/
  left in `b`."""
  files = dataset_files(a)
  assert files == dataset_files(b)
  for rel in files:
    if rel in ("dataset.json", "croissant.json"):
      assert _without_units(a, rel) == _without_units(b, rel), rel
    elif rel == "_SUCCESS":
      assert same_success(a, b), rel
    else:
      assert same_file(a, b, rel), rel
  assert not os.path.exists(os.path.join(b, ".units"))


def same_success(a, b) -> bool:
  """Two datasets' _SUCCESS the same but for the run id and the seal,
  each seal checked against its own dataset.json (where the two
  dataset.json differ as allowed)."""
  return _sealed_first_line(a) == _sealed_first_line(b)


def _sealed_first_line(folder) -> bytes:
  """_SUCCESS's first line without the run id, once its seal is checked
  against the folder's dataset.json."""
  with open(os.path.join(folder, "_SUCCESS"), "rb") as f:
    line, seal = f.read().splitlines()
  with open(os.path.join(folder, "dataset.json"), "rb") as f:
    assert seal.decode() == (
        f"dataset.json sha256 {hashlib.sha256(f.read()).hexdigest()}")
  return line.rsplit(b" ", 1)[0]


def _without_units(folder, rel) -> dict:
  with open(os.path.join(folder, rel)) as f:
    meta = json.load(f)
  if rel == "dataset.json":
    meta["inputs"].pop("units", None)
    return meta
  meta["distribution"] = [e for e in meta["distribution"]
                          if e["@id"] != "dataset.json"]
  return meta

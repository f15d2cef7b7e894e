"""beam_tfrecords/encoding/media.py, on values: The columns that image, tensor
and vocabulary features make."""

import ast
import io
import pathlib

import numpy as np
from PIL import Image
import pyarrow as pa
import pytest

from beam_tfrecords.encoding.media import MediaPreparer
from beam_tfrecords.schema import schema_from_dict
from beam_tfrecords.schema.model import made_column


ENCODING = pathlib.Path(__file__).resolve().parents[3] / "beam_tfrecords" \
    / "encoding"


def _png(height, width, mode="RGB"):
  pixels = np.arange(height * width * len(mode), dtype=np.uint8)
  img = Image.fromarray(pixels.reshape(height, width, len(mode)).squeeze(),
                        mode)
  out = io.BytesIO()
  img.save(out, "PNG")
  return out.getvalue()


def _npy(array):
  out = io.BytesIO()
  np.save(out, array)
  return out.getvalue()


class DictFetch:
  """Files from a dict, read in the caller's thread; records each call."""

  def __init__(self, files):
    self.files = files
    self.calls = []

  def __call__(self, paths, limit, then):
    self.calls.append((list(paths), limit))
    out = []
    for path in paths:
      if path not in self.files:
        out.append(OSError(f"{path}: no such file"))
      elif len(self.files[path]) > limit:
        out.append(OSError(f"{path}: too big"))
      else:
        out.append(then(self.files[path], path))
    return out


SCHEMA = {"name": "m", "features": {
    "image": {"type": "image", "source": "path", "base_dir": "/data"},
    "arr": {"type": "tensor", "dtype": "int16", "shape": [-1, 2],
            "from": "npy", "source": "npy", "base_dir": "/data"},
    "label": {"type": "string", "vocabulary": ["cat", "dog"]}}}


def test_media_columns_from_an_in_memory_fetch():
  fetch = DictFetch({
      "/data/a.png": _png(3, 5),
      "/data/g/b.png": _png(4, 2, "L"),
      "/data/bad.png": b"not an image",
      "/data/a.npy": _npy(np.array([[1, -2], [3, 4]], np.int16)),
      "/data/f.npy": _npy(np.zeros((1, 2))),  # float64 != int16
  })
  schema = schema_from_dict(SCHEMA)
  limit = schema.max_record_bytes
  preparer = MediaPreparer(schema, fetch)
  columns = {
      "path": pa.array(["a.png", "g/b.png", None, "bad.png", "../x.png",
                        "gone.png"]),
      "npy": pa.array(["a.npy", None, "f.npy", None, None, None]),
      "label": pa.array(["cat", "dog", "cow", None, "cat", "dog"]),
  }
  made, problems = preparer.prepare(columns, 6, "/in/rows.csv")

  # Paths are resolved (and refused) before the fetch; None is not fetched.
  assert fetch.calls == [
      (["/data/a.png", "/data/g/b.png", "/data/bad.png", "/data/gone.png"],
       limit),
      (["/data/a.npy", "/data/f.npy"], limit)]
  col = lambda part, name="image": made[made_column(name, part)].to_pylist()
  assert col("height") == [3, 4, None, None, None, None]
  assert col("width") == [5, 2, None, None, None, None]
  assert col("channels") == [3, 1, None, None, None, None]
  assert col("format") == ["png", "png", None, None, None, None]
  assert col("bytes")[0] == fetch.files["/data/a.png"]  # stored as it is
  assert col("bytes", "arr")[0] == np.array(
      [[1, -2], [3, 4]], "<i2").tobytes()
  assert col("shape", "arr") == [[2, 2], None, None, None, None, None]
  assert col("index", "label") == [0, 1, None, None, 0, 1]
  assert problems == {
      2: [("arr", "/data/f.npy: the array holds float64, which does not "
                  "fit int16 without loss; declare dtype: float64"),
          ("label", "'cow' is not in the vocabulary (2 values: cat, dog); "
                    "add it or fix the row")],
      3: [("image", "/data/bad.png: not an image Pillow recognizes (the "
                    "file starts with b'not an i'); store jpeg, png, gif "
                    "or bmp files")],
      4: [("image", "the path '../x.png' leads outside base_dir '/data'; "
                    "paths from the data must stay inside it")],
      5: [("image", "/data/gone.png: no such file")],
  }


def test_a_batch_without_paths_fetches_nothing():
  fetch = DictFetch({})
  preparer = MediaPreparer(schema_from_dict(SCHEMA), fetch)
  made, problems = preparer.prepare({"label": ["dog"]}, 1, "rows.csv")
  assert fetch.calls == [] and problems == {}
  assert made[made_column("image", "bytes")].to_pylist() == [None]


def test_the_build_fetch_reads_in_order_and_names_what_failed(tmp_path):
  from beam_tfrecords.sources.fetch import FetchError, fetch_files
  (tmp_path / "a").write_bytes(b"abc")
  (tmp_path / "big").write_bytes(b"x" * 11)
  paths = [str(tmp_path / n) for n in ("a", "gone", "big", "a")]
  got = fetch_files(paths, 10, lambda data, path: (path[-1], data))
  assert got[0] == got[3] == ("a", b"abc")
  assert isinstance(got[1], FetchError) and isinstance(got[2], FetchError)
  assert str(got[1]) == f"{paths[1]}: no such file"
  assert str(got[2]) == (f"{paths[2]}: the file is larger than "
                         "max_record_bytes (10 bytes)")


def _imports(path):
  tree = ast.parse(path.read_text(), str(path))
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      yield node.module


@pytest.mark.parametrize("module", sorted(p.name for p in ENCODING.glob(
    "*.py")))
def test_encoding_modules_import_no_beam(module):
  beam = [m for m in _imports(ENCODING / module)
          if m == "apache_beam" or m.startswith("apache_beam.")]
  assert beam == [], f"encoding/{module} imports {beam}"

"""Images and tensors end to end: folders and path tables in, TensorFlow
reads them back; bad files in errors/ with their reason."""

import io
import json
import os

import numpy as np
import pytest
from PIL import Image

import beam_tfrecords as btr
from beam_tfrecords import InputError
from beam_tfrecords.core.info import InputFileInfo

from tests.helpers.records import tf_records


def _image(path, size, mode, fmt, seed):
  """A noisy image (so JPEGs are not trivially small), saved to `path`."""
  rng = np.random.default_rng(seed)
  h, w = size
  channels = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
  pixels = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
  img = Image.fromarray(pixels[..., 0] if channels == 1 else pixels, mode)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  img.save(path, format=fmt)
  return path


@pytest.fixture
def photos(tmp_path):
  """cats/ and dogs/ with JPEG and PNG, colour and grayscale; a truncated
  JPEG, a text file named .png, a file outside any class folder and a
  README that is not an image."""
  root = tmp_path / "photos"
  files = {
      "cats/c1.jpg": ((12, 17), "RGB", "JPEG"),
      "cats/c2.png": ((9, 5), "L", "PNG"),
      "cats/deep/c3.png": ((8, 8), "RGBA", "PNG"),
      "dogs/d1.png": ((20, 11), "RGB", "PNG"),
      "dogs/d2.jpg": ((15, 15), "L", "JPEG"),
  }
  for i, (name, (size, mode, fmt)) in enumerate(sorted(files.items())):
    _image(str(root / name), size, mode, fmt, i)
  good = (root / "dogs" / "d1.png").read_bytes()
  (root / "dogs" / "broken.jpg").write_bytes(
      (root / "cats" / "c1.jpg").read_bytes()[:300])
  (root / "dogs" / "notes.png").write_text("not an image at all")
  (root / "stray.png").write_bytes(good)
  (root / "README.txt").write_text("labels are folder names")
  return root, files


FOLDER_SCHEMA = {"name": "pets", "features": {
    "image": {"type": "image", "required": True},
    "label": {"type": "string", "vocabulary": "auto", "required": True},
    "filename": {"type": "string", "required": True}}}


def test_image_folder_keeps_the_bytes_and_describes_them(tmp_path, photos,
                                                         tf):
  root, files = photos
  result = btr.build(FOLDER_SCHEMA, str(root), str(tmp_path / "out"),
                     input_format="images", max_bad_fraction=1.0)
  meta = result.info
  assert meta.vocabularies == {"label": ["cats", "dogs"]}
  assert meta.counts.rows_read == 8  # README.txt is not a row
  assert meta.counts.rows_written == 5
  spec = btr.feature_spec(result.output)
  rows = {}
  for raw in tf_records(tf, result.output):
    x = tf.io.parse_single_example(raw, spec)
    rows[x["filename"].numpy().decode()] = x
  assert sorted(rows) == sorted(files)
  for name, (size, mode, fmt) in files.items():
    x = rows[name]
    data = (root / name).read_bytes()
    assert x["image"].numpy() == data  # the file, byte for byte
    decoded = tf.io.decode_image(data, channels=0, expand_animations=False)
    assert [int(x["image_height"]), int(x["image_width"]),
            int(x["image_channels"])] == list(decoded.shape)
    assert list(decoded.shape[:2]) == list(size)
    assert x["image_format"].numpy().decode() == fmt.lower()
    label = name.split("/")[0]
    assert x["label"].numpy().decode() == label
    assert int(x["label_index"]) == ["cats", "dogs"].index(label)
  errors = {os.path.basename(e["raw"]["image"]): e["reason"]
            for e in btr.open(result.output).errors()}
  assert sorted(errors) == ["broken.jpg", "notes.png", "stray.png"]
  assert "truncated" in errors["broken.jpg"]
  assert "broken.jpg" in errors["broken.jpg"]
  assert "not an image" in errors["notes.png"]
  assert "required" in errors["stray.png"] and "label" in errors["stray.png"]
  # load() decodes: the same pixels TensorFlow gets from the file.
  for x in btr.load(result.output):
    name = x["filename"].numpy().decode()
    expected = tf.io.decode_image((root / name).read_bytes(), channels=0,
                                  expand_animations=False)
    assert x["image"].dtype == tf.uint8
    assert np.array_equal(x["image"].numpy(), expected.numpy())


def _paths_csv(tmp_path, root, rows):
  path = tmp_path / "paths.csv"
  path.write_text("path,label,weight\n" + "".join(
      f"{p},{l},{w}\n" for p, l, w in rows))
  return str(path)


def test_path_table_resized_converted_and_kept_inside_base_dir(
    tmp_path, photos, tf):
  root, files = photos
  secret = tmp_path / "secret.png"
  _image(str(secret), (4, 4), "RGB", "PNG", 99)
  src = _paths_csv(tmp_path, root, [
      ("cats/c1.jpg", "cats", 1.5), ("cats/c2.png", "cats", 2),
      ("dogs/d2.jpg", "dogs", 3), ("../secret.png", "dogs", 4),
      (str(secret), "dogs", 5), ("dogs/missing.jpg", "dogs", 6),
      ("dogs/d1.png", "bird", 7)])
  schema = {"name": "t", "features": {
      "image": {"type": "image", "source": "path", "base_dir": str(root),
                "resize": [16, 20], "method": "bilinear", "convert": "rgb",
                "required": True},
      "label": {"type": "string", "vocabulary": ["dogs", "cats"],
                "required": True},
      "weight": "float"}}
  result = btr.build(schema, src, str(tmp_path / "out"), max_bad_fraction=1.0)
  assert result.info.vocabularies == {"label": ["dogs", "cats"]}
  got = list(btr.load(result.output, batch_size=2))  # fixed size: batches
  images = np.concatenate([b["image"].numpy() for b in got])
  assert images.shape == (3, 16, 20, 3)
  assert got[0]["image"].shape[1:] == (16, 20, 3)
  labels = [v.decode() for b in got for v in b["label"].numpy()]
  assert labels == ["cats", "cats", "dogs"]
  assert [int(v) for b in got for v in b["label_index"].numpy()] == [1, 1, 0]
  formats = [v.decode() for b in got for v in b["image_format"].numpy()]
  assert formats == ["jpeg", "png", "jpeg"]  # re-encoded as they came
  errors = sorted((e["row"], e["reason"]) for e in btr.open(
      result.output).errors())
  assert [r for r, _ in errors] == [4, 5, 6, 7]
  assert "leads outside base_dir" in errors[0][1]
  assert "leads outside base_dir" in errors[1][1]
  assert "no such file" in errors[2][1]
  assert "'bird' is not in the vocabulary (2 values: dogs, cats)" in \
      errors[3][1]


def test_relative_paths_without_base_dir_resolve_next_to_the_table(
    tmp_path, photos, tf):
  root, _ = photos
  table = root / "list.csv"
  table.write_text("path\ncats/c1.jpg\ndogs/d1.png\n")
  result = btr.build({"name": "r", "features": {"path": {"type": "image"}}},
                     str(table), str(tmp_path / "out"))
  stored = [x["path"] for x in btr.iter_records(result.output)]
  assert stored == [(root / "cats/c1.jpg").read_bytes(),
                    (root / "dogs/d1.png").read_bytes()]


def _npy(path, array):
  buf = io.BytesIO()
  np.save(buf, array)
  path.write_bytes(buf.getvalue())
  return path.name


def test_tensors_round_trip_exactly(tmp_path, tf):
  rng = np.random.default_rng(3)
  pixels = rng.integers(0, 256, (5, 2, 2)).astype(np.uint8)
  floats = rng.normal(size=(5, 2, 3))
  arrays = [rng.integers(-300, 300, (n, 3)).astype(np.int16)
            for n in (1, 4, 2, 3, 5)]
  names = [_npy(tmp_path / f"a{i}.npy", a) for i, a in enumerate(arrays)]
  flat = rng.integers(-9, 9, (5, 3))
  rows = []
  for i in range(5):
    row = {f"p{j}": int(v) for j, v in enumerate(pixels[i].reshape(-1))}
    row.update(f=floats[i].tolist(), npy=names[i],
               s=" ".join(str(v) for v in flat[i]))
    rows.append(row)
  src = tmp_path / "t.jsonl"
  src.write_text("".join(json.dumps(r) + "\n" for r in rows))
  schema = {"name": "t", "features": {
      "pixels": {"type": "tensor", "dtype": "uint8", "shape": [2, 2],
                 "source": ["p0", "p1", "p2", "p3"], "required": True},
      "f": {"type": "tensor", "dtype": "float64", "shape": [2, 3],
            "required": True},
      "npy": {"type": "tensor", "dtype": "int16", "shape": [-1, 3],
              "from": "npy", "required": True},
      "s": {"type": "tensor", "dtype": "int16", "shape": [3],
            "storage": "list", "separator": " ", "required": True}}}
  result = btr.build(schema, str(src), str(tmp_path / "out"))
  got = list(btr.load(result.output))
  assert len(got) == 5
  for i, x in enumerate(got):
    assert x["pixels"].dtype == tf.uint8 and x["pixels"].shape == (2, 2)
    assert np.array_equal(x["pixels"].numpy(), pixels[i])
    assert x["f"].dtype == tf.float64
    assert np.array_equal(x["f"].numpy(), floats[i])  # float64, exactly
    assert np.array_equal(x["npy"].numpy(), arrays[i])
    assert x["npy"].dtype == tf.int16
    assert np.array_equal(x["s"].numpy(), flat[i])
    assert list(x["npy_shape"].numpy()) == list(arrays[i].shape)
  # Without TensorFlow: raw bytes and the shape as plain values.
  first = next(btr.iter_records(result.output))
  assert first["pixels"] == pixels[0].tobytes()
  assert first["pixels_shape"] == [2, 2]
  assert np.array_equal(np.frombuffer(first["f"], "<f8").reshape(2, 3),
                        floats[0])


def test_bad_tensor_values_and_files_go_to_errors(tmp_path):
  _npy(tmp_path / "f.npy", np.zeros((2, 3)))          # float64 != int16
  _npy(tmp_path / "w.npy", np.zeros((2, 2), np.int16))  # wrong shape
  (tmp_path / "junk.npy").write_text("nope")
  src = tmp_path / "t.csv"
  src.write_text("a,b,npy\n1,2,ok.npy\n300,2,\n1,x,\n1,,\n,,f.npy\n"
                 ",,w.npy\n,,junk.npy\n,,gone.npy\n")
  _npy(tmp_path / "ok.npy", np.ones((1, 3), np.int16))
  schema = {"name": "t", "features": {
      "ab": {"type": "tensor", "dtype": "uint8", "shape": [2],
             "source": ["a", "b"]},
      "npy": {"type": "tensor", "dtype": "int16", "shape": [-1, 3],
              "from": "npy"}}}
  result = btr.build(schema, str(src), str(tmp_path / "out"),
                     max_bad_fraction=1.0)
  reasons = {e["row"]: e["reason"] for e in btr.open(result.output).errors()}
  assert result.info.counts.rows_written == 1
  assert "300 is outside the range of uint8 (0..255)" in reasons[2]
  assert "'x' is not a number" in reasons[3]
  assert "column(s) b have no value" in reasons[4]
  assert "holds float64, which does not fit int16" in reasons[5]
  assert "has shape [2, 2], not [-1, 3]" in reasons[6]
  assert "not a .npy array" in reasons[7]
  assert "no such file" in reasons[8]


@pytest.mark.slow
@pytest.mark.parametrize("dtype,shape", [
    ("int8", [3]), ("uint16", [2, 2]), ("int32", [1, 5]), ("uint32", [4]),
    ("int64", [2, 1, 2]), ("float16", [3]), ("float32", [2, 3])])
@pytest.mark.parametrize("storage", ["bytes", "list"])
def test_every_dtype_round_trips(tmp_path, tf, dtype, shape, storage):
  info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
  rng = np.random.default_rng(11)
  size = int(np.prod(shape))
  arrays = []
  for i in range(4):
    if info is not None:  # the extremes too
      a = rng.integers(max(info.min, -2**62), min(info.max, 2**62),
                       size).astype(dtype)
      a[0], a[-1] = (info.min, info.max) if i == 0 else (a[0], a[-1])
    else:
      a = rng.normal(0, 100, size).astype(dtype)
    arrays.append(a.reshape(shape))
  src = tmp_path / "t.jsonl"
  src.write_text("".join(json.dumps({"t": a.tolist()}) + "\n"
                         for a in arrays))
  schema = {"name": "t", "features": {"t": {
      "type": "tensor", "dtype": dtype, "shape": shape, "storage": storage,
      "required": True}}}
  result = btr.build(schema, str(src), str(tmp_path / "out"))
  got = [x["t"] for x in btr.load(result.output)]
  assert len(got) == 4
  for a, g in zip(arrays, got):
    assert g.dtype == tf.as_dtype(dtype) and list(g.shape) == shape
    assert np.array_equal(g.numpy(), a)


def test_review_cases_for_images(tmp_path, photos, monkeypatch):
  """Statistics keep no image bytes; a relative folder path works; hidden
  folders are not classes; overlapping folders are refused; an image a
  library chokes on and a blank path are row errors."""
  root, files = photos
  (root / ".ipynb_checkpoints").mkdir()
  _image(str(root / ".ipynb_checkpoints" / "x.png"), (3, 3), "RGB", "PNG", 5)
  monkeypatch.chdir(tmp_path)
  result = btr.build(FOLDER_SCHEMA, "photos/", str(tmp_path / "out"),
                     input_format="images", max_bad_fraction=1.0)
  meta = result.info
  assert meta.vocabularies == {"label": ["cats", "dogs"]}
  assert meta.counts.rows_written == 5
  image = meta.statistics["train"]["image"]
  # Only values of at most 128 bytes are counted as top values (one tiny
  # PNG here); the others are just counted.
  assert image.long_values + sum(c for _, c in image.top or ()) == 5
  assert image.long_values >= 4
  assert os.path.getsize(tmp_path / "out" / "dataset.json") < 20_000
  assert meta.inputs.files == (InputFileInfo(str(root), images=8,
                                             num_bytes=sum(
      os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root)
      for f in fs if not f.startswith(".") and not d.endswith(
          "checkpoints") and f != "README.txt")),)
  with pytest.raises(InputError, match="overlap"):
    btr.build(FOLDER_SCHEMA, [str(root), str(root / "cats")],
              str(tmp_path / "o2"), input_format="images", max_bad_fraction=1.0)
  tall = tmp_path / "tall.png"
  Image.new("L", (1, 70000), 9).save(tall)
  table = tmp_path / "t.csv"
  table.write_text(f'path\n{tall}\n"  "\n{root / "cats/c1.jpg"}\n')
  result = btr.build({"name": "t", "features": {"path": {
      "type": "image", "encode": "jpeg"}}}, str(table), str(tmp_path / "o3"),
          max_bad_fraction=1.0)
  reasons = {e["row"]: e["reason"] for e in btr.open(result.output).errors()}
  assert sorted(reasons) == [1, 2]
  assert "cannot be stored" in reasons[1] or "too" in reasons[1]
  assert "the path is empty" in reasons[2]
  assert result.info.counts.rows_written == 1


def test_review_cases_for_tensors(tmp_path, tf):
  big = np.array([[2**53 + 1, 1, 2]], np.int64)
  _npy(tmp_path / "big.npy", big)
  rows = [{"i": [1.5, 2], "n": [[1, 2], [3, 4], [5, 6]], "f": "big.npy"},
          {"i": [3, 4], "n": [[1, 2, 3], [4, 5, 6]], "f": None},
          {"i": ["9007199254740993.0", 1], "n": None, "f": None}]
  src = tmp_path / "t.jsonl"
  src.write_text("".join(json.dumps(r) + "\n" for r in rows))
  schema = {"name": "t", "features": {
      "i": {"type": "tensor", "dtype": "int64", "shape": [2]},
      "n": {"type": "tensor", "dtype": "int32", "shape": [2, 3]},
      "f": {"type": "tensor", "dtype": "float64", "shape": [-1, 3],
            "from": "npy"}}}
  result = btr.build(schema, str(src), str(tmp_path / "out"),
                     max_bad_fraction=1.0)
  reasons = {e["row"]: e["reason"] for e in btr.open(result.output).errors()}
  assert sorted(reasons) == [1]
  assert "1.5 is not a whole number" in reasons[1]
  assert "nested as [3, 2]" in reasons[1]
  assert "do not all fit float64 exactly" in reasons[1]
  got = list(btr.iter_records(result.output))
  assert np.frombuffer(got[1]["i"], "<i8").tolist() == [9007199254740993, 1]
  # JSON list text in a CSV cell, as list features read it.
  csv_src = tmp_path / "t.csv"
  csv_src.write_text('v\n"[[1, 2], [3, 4]]"\n"5 6 7 8"\n')
  result = btr.build({"name": "c", "features": {"v": {
      "type": "tensor", "dtype": "uint8", "shape": [2, 2],
      "required": True}}}, str(csv_src), str(tmp_path / "csv"),
          max_bad_fraction=1.0)
  assert [x["v"].numpy().tolist() for x in btr.load(result.output)] == [
      [[1, 2], [3, 4]], [[5, 6], [7, 8]]]


def test_a_label_that_is_not_text_says_why(tmp_path):
  src = tmp_path / "l.jsonl"
  src.write_text('{"label": "cat"}\n{"label": 1.5}\n')
  result = btr.build({"name": "v", "features": {"label": {
      "type": "string", "vocabulary": ["cat"], "required": True}}},
                     str(src), str(tmp_path / "o"), max_bad_fraction=1.0)
  reasons = [e["reason"] for e in btr.open(result.output).errors()]
  assert len(reasons) == 1 and "missing" not in reasons[0]

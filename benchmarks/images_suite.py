"""The images suite: --images small files (JPEG and PNG, colour and
grayscale) in 10 class folders, built as they are, unverified, resized to
64x64 JPEG and as raw pixels, against a plain image-file loop (file bytes
+ label) and a plain raw-pixels loop (decoded pixels + shape + label).
Images/s, and the stored bytes against the input bytes."""

import os
from typing import List

from common import baseline_cmd, cli_cmd, run, show


IMAGE_SCHEMAS = {
    "as is": "",
    "verify: false": "    verify: false\n",
    "resize 64x64, jpeg q90": "    resize: [64, 64]\n    encode: jpeg\n"
                              "    quality: 90\n",
    "raw pixels": "    encode: raw\n",
}
IMAGE_SCHEMA = """name: bench_images
features:
  image:
    type: image
    required: true
{options}  label: {{type: string, vocabulary: auto, required: true}}
"""


def make_images(root: str, count: str) -> None:
  """`count` images in 10 class folders: 64-256 px, smooth gradients plus
  noise (so they compress like photos, not like flat colour), 3/4 JPEG
  (quality 90) and 1/4 PNG, every 5th grayscale. Deterministic."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from PIL import Image  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(7)
  for i in range(int(count)):
    h, w = (int(v) for v in rng.integers(64, 257, 2))
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // w), (y * 255 // h),
                     ((x + y) * 127 // (w + h))], -1)
    pixels = np.clip(base + rng.normal(0, 12, (h, w, 3)), 0, 255).astype(
        np.uint8)
    img = Image.fromarray(pixels, "RGB")
    if i % 5 == 4:
      img = img.convert("L")
    folder = os.path.join(root, f"class_{i % 10}")
    os.makedirs(folder, exist_ok=True)
    if i % 4 == 3:
      img.save(os.path.join(folder, f"{i:05d}.png"), "PNG")
    else:
      img.save(os.path.join(folder, f"{i:05d}.jpg"), "JPEG", quality=90)


def _image_files(root: str) -> List[str]:
  return sorted(os.path.join(d, f) for d, _, files in os.walk(root)
                for f in files)


def plain_image_loop(root: str, dst: str) -> None:
  """A plain image-file loop: tf.io.read_file, an Example of the bytes and an int
  label, one TFRecordWriter(GZIP). It records no shape and checks nothing."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  classes = sorted(os.listdir(root))
  with tf.io.TFRecordWriter(dst, options="GZIP") as w:
    for path in _image_files(root):
      label = classes.index(os.path.basename(os.path.dirname(path)))
      raw = tf.io.read_file(path).numpy()
      w.write(tf.train.Example(features=tf.train.Features(feature={
          "image": tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[raw])),
          "label": tf.train.Feature(int64_list=tf.train.Int64List(
              value=[label]))})).SerializeToString())


def plain_pixels_loop(root: str, dst: str) -> None:
  """A plain raw-pixels loop: PIL -> np.uint8 array -> raw bytes + shape bytes +
  label, one TFRecordWriter(GZIP)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from PIL import Image  # pylint: disable=import-outside-toplevel
  with tf.io.TFRecordWriter(dst, options="GZIP") as w:
    for path in _image_files(root):
      image = np.asarray(Image.open(path).convert("RGB"), np.uint8)
      shape = np.array(image.shape, np.int32)
      label = os.path.basename(os.path.dirname(path)).encode()
      w.write(tf.train.Example(features=tf.train.Features(feature={
          "label": tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[label])),
          "shape": tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[shape.tobytes()])),
          "image": tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[image.tobytes()]))})).SerializeToString())


def _output_bytes(path: str) -> int:
  if os.path.isfile(path):
    return os.path.getsize(path)
  return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
             if f.endswith(".tfrecord.gz"))


def images_suite(args) -> None:
  count = args.images
  root = os.path.join(args.workdir, f"images-{count}")
  if not os.path.exists(root):
    run(baseline_cmd("make-images", root, str(count)))
  files = _image_files(root)
  in_mb = sum(os.path.getsize(f) for f in files) / 1e6
  rows = []  # (name, seconds, peak MB, output MB)
  for kind, name in (("plain-images", "plain image-file loop (read_file, bytes + "
                      "label, TFRecordWriter GZIP; no shape, no checks)"),
                     ("plain-pixels", "plain raw-pixels loop (PIL -> uint8 raw bytes "
                      "+ shape + label, TFRecordWriter GZIP)")):
    dst = os.path.join(args.workdir, f"{kind}.tfrecord.gz")
    seconds, peak = run(baseline_cmd(kind, root, dst))
    rows.append((name, seconds, peak, _output_bytes(dst) / 1e6))
  out = os.path.join(args.workdir, "out")
  for label, options in IMAGE_SCHEMAS.items():
    schema = os.path.join(args.workdir, "images-schema.yaml")
    with open(schema, "w") as f:
      f.write(IMAGE_SCHEMA.format(options=options))
    cmd = cli_cmd(args.workdir, schema, root, ["--format", "images"])
    seconds, peak = run(cmd)
    rows.append((f"build, {label}", seconds, peak, _output_bytes(out) / 1e6))
  show("images", f"images: {len(files):,} files in 10 class folders, "
       f"{in_mb:.1f} MB, {os.cpu_count()} cores; one run of each (build = "
       "DirectRunner defaults, verify on unless said)",
       ["approach", "wall s", "images/s", "peak RSS MB", "stored MB",
        "stored / input", "speed-up vs plain image-file loop"],
       [(name, f"{seconds:.1f}", f"{len(files) / seconds:,.0f}",
         f"{peak:,.0f}", f"{mb:.1f}", f"{mb / in_mb:.2f}",
         f"{rows[0][1] / seconds:.2f}x")
        for name, seconds, peak, mb in rows])

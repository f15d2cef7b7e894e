"""encoding.images: stored bytes, and the shape TensorFlow decodes them to.

Images are made in memory with Pillow from seeded numpy arrays; every shape
claim is checked against tf.io.decode_image(data, channels=0,
expand_animations=False).
"""

import concurrent.futures
import io
import os
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from beam_tfrecords.encoding import images
from beam_tfrecords.encoding.images import (ImageError, ImageInfo, ImageOptions,
                                            process_image, probe)

H, W = 24, 32


@pytest.fixture(scope="session")
def decode():
  """tf.io.decode_image as the records' readers call it -> numpy array."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import tensorflow as tf

  def run(data, dtype=None):
    kwargs = {"dtype": dtype} if dtype is not None else {}
    return tf.io.decode_image(data, channels=0, expand_animations=False,
                              **kwargs).numpy()
  return run


def _pixels(channels, seed=0, dtype=np.uint8, top=256):
  """A smooth gradient plus noise: compresses like a photo."""
  rng = np.random.default_rng(seed)
  y, x = np.mgrid[0:H, 0:W]
  base = (x * 5 + y * 3)[..., None] + np.arange(max(channels, 1)) * 40
  noisy = base * (top // 256) + rng.integers(0, 16 * (top // 256),
                                             base.shape)
  out = np.clip(noisy, 0, top - 1).astype(dtype)
  return out[..., 0] if channels == 1 else out


def _save(im, fmt, **kwargs):
  out = io.BytesIO()
  im.save(out, fmt, **kwargs)
  return out.getvalue()


def _chunk(kind, body):
  return (struct.pack(">I", len(body)) + kind + body +
          struct.pack(">I", zlib.crc32(kind + body)))


def _raw_png(width, height, depth, colour_type, rows):
  """A PNG written by hand, for colour types Pillow does not write."""
  raw = b"".join(b"\0" + r for r in rows)
  ihdr = struct.pack(">IIBBBBB", width, height, depth, colour_type, 0, 0, 0)
  return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) +
          _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b""))


def _rgb():
  return Image.fromarray(_pixels(3))


def _palette():
  return _rgb().convert("P", palette=Image.Palette.ADAPTIVE, colors=16)


def _gif_frame_offsets(data):
  """Offsets of the image descriptors of a GIF Pillow wrote."""
  flags = data[10]
  pos = 13 + ((3 << ((flags & 7) + 1)) if flags & 0x80 else 0)
  found = []
  while data[pos] != 0x3B:
    if data[pos] == 0x2C:
      found.append(pos)
      local = data[pos + 9]
      pos += 11 + ((3 << ((local & 7) + 1)) if local & 0x80 else 0)
    else:
      pos += 2
    while data[pos]:
      pos += data[pos] + 1
    pos += 1
  return found


def _gif_small_frame():
  """A GIF whose logical screen (what Pillow reports) is larger than its
  only frame (what TensorFlow decodes)."""
  data = bytearray(_save(_palette(), "GIF"))
  data[6:10] = struct.pack("<HH", W + 9, H + 5)
  return bytes(data)


# name -> bytes of a file TensorFlow decodes as it is.
AS_IS = {
    "jpeg_rgb": lambda: _save(_rgb(), "JPEG", quality=90),
    "jpeg_gray": lambda: _save(Image.fromarray(_pixels(1)), "JPEG"),
    "jpeg_progressive": lambda: _save(_rgb(), "JPEG", progressive=True),
    "jpeg_cmyk": lambda: _save(_rgb().convert("CMYK"), "JPEG"),
    "png_rgb": lambda: _save(_rgb(), "PNG"),
    "png_rgba": lambda: _save(Image.fromarray(_pixels(4)), "PNG"),
    "png_l": lambda: _save(Image.fromarray(_pixels(1)), "PNG"),
    "png_la": lambda: _save(Image.fromarray(_pixels(2), "LA"), "PNG"),
    "png_p": lambda: _save(_palette(), "PNG"),
    "png_p_transparency": lambda: _save(_palette(), "PNG", transparency=3),
    "png_1bit": lambda: _save(Image.fromarray(_pixels(1)).convert("1"),
                              "PNG"),
    "png_gray16": lambda: _save(
        Image.fromarray(_pixels(1, dtype=np.uint16, top=65536)), "PNG"),
    "png_la16": lambda: _raw_png(W, H, 16, 4,
                                 [bytes(range(4 * W))] * H),
    "png_rgb_transparency": lambda: _save(_rgb(), "PNG",
                                          transparency=(1, 2, 3)),
    "gif": lambda: _save(_palette(), "GIF"),
    "gif_animated": lambda: _save(
        _palette(), "GIF", save_all=True,
        append_images=[Image.fromarray(_pixels(3, seed=s)).convert("P")
                       for s in (1, 2)]),
    "gif_small_frame": _gif_small_frame,
    "bmp_rgb": lambda: _save(_rgb(), "BMP"),
    "bmp_32bit": lambda: _save(Image.fromarray(_pixels(4)), "BMP"),
    "bmp_gray": lambda: _save(Image.fromarray(_pixels(1)), "BMP"),
}


@pytest.mark.parametrize("name", sorted(AS_IS))
def test_defaults_store_the_bytes_with_tensorflows_shape(name, decode):
  data = AS_IS[name]()
  info = process_image(data)
  assert info.data == data
  assert info.format == name.split("_")[0]
  assert (info.height, info.width, info.channels) == decode(data).shape
  assert probe(data) == (info.format, info.height, info.width,
                         info.channels)


def test_channels_of_pillow_modes():
  """The table the module relies on, as numbers (TensorFlow-checked above).
  """
  def channels(name):
    return process_image(AS_IS[name]()).channels
  assert [channels(n) for n in ("png_l", "png_la", "png_rgb", "png_rgba",
                                "png_p", "png_p_transparency", "png_1bit",
                                "png_gray16", "png_la16", "jpeg_gray",
                                "jpeg_rgb", "jpeg_cmyk", "gif", "bmp_rgb",
                                "bmp_32bit", "bmp_gray")] == \
      [1, 2, 3, 4, 3, 4, 1, 1, 2, 1, 3, 3, 3, 3, 4, 1]


def test_gif_size_is_the_frame_tensorflow_decodes():
  # Pillow says (W + 9) x (H + 5), the logical screen; TensorFlow decodes
  # the frame.
  assert probe(_gif_small_frame()) == ("gif", H, W, 3)


@pytest.mark.parametrize("method", images.METHODS)
def test_resize_with_each_method(method, decode):
  for name in ("jpeg_rgb", "png_rgba", "png_gray16", "gif"):
    info = process_image(AS_IS[name](),
                         ImageOptions(resize=(7, 11), method=method))
    assert decode(info.data).shape == (7, 11, info.channels)
    assert (info.height, info.width) == (7, 11)


def test_resize_keeps_format_or_writes_png(decode):
  opts = ImageOptions(resize=(7, 11))
  expect = {"jpeg_rgb": ("jpeg", 3), "png_p_transparency": ("png", 4),
            "png_la16": ("png", 2), "gif": ("png", 3), "bmp_32bit": ("png", 3),
            "png_1bit": ("png", 1)}
  for name, (fmt, channels) in expect.items():
    info = process_image(AS_IS[name](), opts)
    assert (info.format, info.channels) == (fmt, channels), name
    assert decode(info.data).shape == (7, 11, channels)


def test_sixteen_bit_png_stays_sixteen_bit(decode):
  data = AS_IS["png_gray16"]()
  info = process_image(data, ImageOptions(encode="png"))
  np.testing.assert_array_equal(decode(info.data, "uint16"),
                                decode(data, "uint16"))


def test_convert(decode):
  gray = process_image(AS_IS["jpeg_rgb"](), ImageOptions(convert="grayscale"))
  assert gray.channels == 1 and gray.format == "jpeg"
  assert decode(gray.data).shape == (H, W, 1)
  rgb = process_image(AS_IS["png_rgba"](), ImageOptions(convert="rgb"))
  assert rgb.channels == 3 and decode(rgb.data).shape == (H, W, 3)
  # 16-bit -> 8-bit keeps the top byte, as TensorFlow's uint8 decode does.
  data = AS_IS["png_gray16"]()
  low = process_image(data, ImageOptions(convert="grayscale"))
  assert low.channels == 1
  np.testing.assert_array_equal(decode(low.data), decode(data))


def test_encode_jpeg_of_a_png(decode):
  info = process_image(AS_IS["png_rgb"](), ImageOptions(encode="jpeg"))
  assert info.format == "jpeg" and info.data[:3] == b"\xff\xd8\xff"
  assert decode(info.data).shape == (H, W, 3) == (info.height, info.width,
                                                   info.channels)


def test_reencoding_is_deterministic():
  for name in ("jpeg_rgb", "png_rgba", "gif"):
    data = AS_IS[name]()
    for opts in (ImageOptions(resize=(7, 11), method="lanczos"),
                 ImageOptions(encode="jpeg", convert="rgb", quality=80),
                 ImageOptions(encode="png")):
      assert process_image(data, opts) == process_image(data, opts)


def test_reencoding_drops_metadata():
  exif = Image.Exif()
  exif[0x0112] = 6  # orientation: rotate; not applied
  data = _save(_rgb(), "JPEG", exif=exif, comment=b"hello")
  info = process_image(data, ImageOptions(resize=(H, W)))
  assert (info.height, info.width) == (H, W)
  assert b"Exif" not in info.data and b"hello" not in info.data


def test_truncated_files(decode):
  for name in ("jpeg_rgb", "jpeg_progressive", "png_rgb", "gif", "bmp_rgb"):
    data = AS_IS[name]()
    cut = data[:len(data) // 2]
    with pytest.raises(ImageError, match="truncated"):
      process_image(cut)
    with pytest.raises(ImageError, match="truncated"):
      process_image(cut, ImageOptions(resize=(7, 11)))
    with pytest.raises(Exception):
      decode(cut)


def test_corruption_tensorflow_rejects_but_pillow_decodes(decode):
  jpeg = AS_IS["jpeg_rgb"]()[:-2]  # no end-of-image marker
  png = bytearray(AS_IS["png_rgb"]())
  png[png.find(b"IDAT") + 10] ^= 0xFF  # the IDAT checksum no longer matches
  for data in (jpeg, bytes(png)):
    with pytest.raises(Exception):
      decode(data)
    with pytest.raises(ImageError, match="corrupt"):
      process_image(data)
    # Without verify the header is all that is read.
    assert process_image(data, ImageOptions(verify=False)).data == data


def test_not_an_image_and_empty():
  noise = np.random.default_rng(0).integers(0, 256, 500).astype(np.uint8)
  with pytest.raises(ImageError, match="not an image"):
    process_image(noise.tobytes())
  with pytest.raises(ImageError, match="empty"):
    process_image(b"")
  with pytest.raises(ImageError, match="empty"):
    probe(b"")


def test_zero_size():
  data = _raw_png(0, 3, 8, 0, [b""] * 3)
  with pytest.raises(ImageError, match="zero size"):
    process_image(data)


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_decompression_bomb(monkeypatch):
  data = AS_IS["png_rgb"]()
  for limit in (H * W - 1, H * W // 3):  # Pillow warns, then refuses
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", limit)
    with pytest.raises(ImageError, match=f"{H * W} pixels"):
      process_image(data)


@pytest.mark.parametrize("fmt", ["TIFF", "WEBP", "PPM"])
def test_other_formats_need_encode(fmt, decode):
  data = _save(_rgb(), fmt)
  with pytest.raises(ImageError, match=f"format {fmt} is not one TensorFlow "
                     r"decodes \(jpeg, png, gif, bmp\); set encode: png"):
    process_image(data)
  with pytest.raises(ImageError, match=fmt):
    probe(data)
  resized = process_image(data, ImageOptions(resize=(7, 11)))
  assert resized.format == "png"  # re-encoded: asked to change anyway
  assert decode(resized.data).shape == (7, 11, 3)
  info = process_image(data, ImageOptions(encode="png"))
  assert info.format == "png"
  assert decode(info.data).shape == (H, W, 3) == (info.height, info.width,
                                                   info.channels)


def test_alpha_cannot_be_jpeg():
  for name in ("png_rgba", "png_la", "png_p_transparency"):
    with pytest.raises(ImageError, match="encode: png"):
      process_image(AS_IS[name](), ImageOptions(encode="jpeg"))
  info = process_image(AS_IS["png_rgba"](),
                       ImageOptions(encode="jpeg", convert="rgb"))
  assert info.channels == 3


def test_bmps_tensorflow_misreads(decode):
  palette = _save(_palette(), "BMP")  # TF would read the indices as gray
  assert decode(palette).shape[-1] == 1
  one_bit = _save(Image.fromarray(_pixels(1)).convert("1"), "BMP")
  extra = AS_IS["bmp_rgb"]() + b"\0\0"
  for data in (palette, one_bit, extra):
    with pytest.raises(ImageError, match="encode: png"):
      process_image(data)
    info = process_image(data, ImageOptions(encode="png"))
    assert decode(info.data).shape == (H, W, info.channels)


def test_gif_without_colour_table(decode):
  data = bytearray(_save(_palette(), "GIF"))
  flags = data[10]
  table = 3 << ((flags & 7) + 1)
  bare = bytes(data[:10] + bytes([flags & 0x7F]) + data[11:13] +
               data[13 + table:])
  with pytest.raises(Exception):
    decode(bare)
  with pytest.raises(ImageError, match="colour table"):
    process_image(bare)


def test_probe_reads_only_the_header():
  data = AS_IS["jpeg_rgb"]()
  cut = data[:data.find(b"\xff\xda") + 40]  # into the first scan
  with pytest.raises(ImageError, match="truncated"):
    process_image(cut)
  assert probe(cut) == probe(data) == ("jpeg", H, W, 3)


def test_bad_bytes_raise_only_image_error():
  rng = np.random.default_rng(1)
  for name in sorted(AS_IS):
    data = AS_IS[name]()
    for _ in range(8):
      damaged = bytearray(data[:rng.integers(1, len(data) + 1)])
      for at in rng.integers(0, len(damaged), 3):
        damaged[at] = rng.integers(0, 256)
      for opts in (ImageOptions(), ImageOptions(resize=(5, 5))):
        try:
          info = process_image(bytes(damaged), opts)
        except ImageError as e:
          assert str(e)
        else:
          assert isinstance(info, ImageInfo)


def test_threads_give_the_same_results():
  jobs = [(AS_IS[n](), opts) for n in ("jpeg_rgb", "png_rgba", "gif",
                                       "bmp_rgb")
          for opts in (ImageOptions(), ImageOptions(resize=(9, 9)))] * 4
  serial = [process_image(d, o) for d, o in jobs]
  with concurrent.futures.ThreadPoolExecutor(8) as pool:
    assert list(pool.map(lambda j: process_image(*j), jobs)) == serial


def test_options_are_validated():
  bad = [dict(method="cubic"), dict(convert="RGB"), dict(encode="jpg"),
         dict(quality=0), dict(quality=101), dict(quality=True),
         dict(resize=(0, 5)), dict(resize=(5,)), dict(resize=(5.0, 5)),
         dict(verify="yes")]
  for kwargs in bad:
    with pytest.raises(ValueError, match=list(kwargs)[0]):
      ImageOptions(**kwargs)
  with pytest.raises(ValueError, match="nearest, bilinear"):
    ImageOptions(method="cubic")
  assert ImageOptions(resize=[3, 4]).resize == (3, 4)


def test_raw_pixels(decode):
  data = AS_IS["png_rgba"]()
  info = process_image(data, ImageOptions(encode="raw"))
  assert info.format == "raw" and info.channels == 4
  pixels = np.frombuffer(info.data, np.uint8).reshape(
      info.height, info.width, info.channels)
  assert np.array_equal(pixels, decode(data))
  small = process_image(AS_IS["jpeg_rgb"](), ImageOptions(
      encode="raw", resize=(5, 4), convert="grayscale"))
  assert (small.height, small.width, small.channels) == (5, 4, 1)
  assert len(small.data) == 20

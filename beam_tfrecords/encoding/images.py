"""Image files -> the bytes a record stores, with the shape TensorFlow will
decode them to.

`process_image(data, options)` returns an `ImageInfo`: the bytes to store
and the height, width and channel count that
`tf.io.decode_image(data, channels=0, expand_animations=False)` gives for
them, so a schema can declare the shape without TensorFlow at build time.
`probe(data)` reads the same (format, height, width, channels) from the
header alone. What TensorFlow makes of each format stored as it is lives in
encoding.image_formats; this module decides what to store and re-encodes.

With no resize / convert / encode the file is stored byte for byte when
TensorFlow decodes it as it is (jpeg, png, gif, bmp; see FORMATS); the
header gives the size, and `verify` decodes the pixels once (a GIF's first
frame, the one TensorFlow returns) so a truncated or corrupt file fails
here, with its reason, instead of in a training job. Files TensorFlow would
reject or misread (other formats; BMPs that are not uncompressed 8-bit gray,
24 or 32-bit, or carry extra bytes; GIFs without a colour table; PNGs with
a bad checksum; JPEGs without an end marker) raise ImageError saying what to
set instead. A TIFF, WEBP, ... is stored only re-encoded (`encode`, or
`resize` / `convert`, which re-encode it as png).

`encode: "raw"` stores the decoded pixels instead (uint8, row-major
height x width x channels; 16-bit gray reduced to 8 bits): the raw-pixels
layout, read back with tf.io.decode_raw + reshape to (height, width,
channels). Bigger than png / jpeg, but no decoding at training time.

Otherwise the first frame is decoded, converted, resized and re-encoded
deterministically (same input and options -> same bytes): PNG without
optimize, JPEG at a fixed quality, no metadata (EXIF, ICC profile, text,
comments are dropped). EXIF orientation is not applied, because TensorFlow's
decoders ignore it too: the stored pixels are the ones TensorFlow would have
decoded from the original. Before converting or resizing, the pixels are
put in the mode TensorFlow decodes the original as:

  palette (P)        RGBA if the PNG (or other file) has transparency, else
                     RGB; GIFs always RGB (TensorFlow ignores their
                     transparency)
  1-bit              L
  16/32-bit integer  kept as 16-bit (values clipped to 0..65535) for PNG;
  grayscale (I;16,   reduced to 8 bits (value >> 8, as tf.image's uint16 ->
  I)                 uint8 conversion does) for jpeg or convert: grayscale
  16-bit gray+alpha  LA (Pillow reads it as RGBA)
  CMYK, YCbCr, RGBX  RGB
  32-bit float (F)   ImageError (no standard 8/16-bit mapping)

convert: "rgb" drops any alpha channel (it is not composited on a
background), "grayscale" keeps luma only (ITU-R 601-2, Pillow's "L").
resize gives exactly (height, width), not keeping the aspect ratio; alpha is
premultiplied while resampling (Pillow does this for LA / RGBA). A JPEG that
is made smaller is first decoded at a reduced DCT scale no smaller than the
target (Pillow's draft): 2-4x faster, and only slightly different
from resampling a full decode. jpeg cannot store alpha: an LA or RGBA image
with encode jpeg raises ImageError.

Pillow's global state is left alone (ImageFile.LOAD_TRUNCATED_IMAGES must
stay False for truncated files to be caught; Image.MAX_IMAGE_PIXELS is only
read). Images over that many pixels raise ImageError; Pillow may also emit
its DecompressionBombWarning for them. Everything here is safe to call from
several threads at once.
"""

import dataclasses
import io
from typing import Any, Optional, Tuple

import numpy as np
from PIL import Image

from beam_tfrecords.encoding.image_formats import (FORMATS, ImageError,
                                                   check_container, open_image,
                                                   pillow_errors, stored_shape,
                                                   verify_gif)
from beam_tfrecords.schema.model import (IMAGE_CONVERTS, IMAGE_ENCODES,
                                         IMAGE_METHODS)

__all__ = ["ImageOptions", "ImageInfo", "ImageError", "process_image",
           "probe", "FORMATS", "METHODS", "CONVERTS", "ENCODES"]

METHODS, CONVERTS, ENCODES = IMAGE_METHODS, IMAGE_CONVERTS, IMAGE_ENCODES

_FILTERS = {
    "nearest": Image.Resampling.NEAREST,
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
    "box": Image.Resampling.BOX,
    "hamming": Image.Resampling.HAMMING,
}
_MODE_CHANNELS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "I;16": 1}
_TO_RGB = ("CMYK", "YCbCr", "RGBX", "LAB", "HSV")
_INT_GRAY = ("I", "I;16", "I;16L", "I;16B", "I;16N")


def _is_int(value: Any) -> bool:
  return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class ImageOptions:
  """How images are stored.

  Attributes:
    resize: (height, width) to resize to, exactly; None keeps the size. A
      list is accepted and kept as a tuple.
    method: the Pillow resampling filter, one of METHODS.
    convert: "rgb" or "grayscale" to change the pixel mode; None keeps it.
    encode: "png" or "jpeg" to re-encode; None keeps the original bytes
      when nothing changes (and, when something does, re-encodes as the
      original format if png or jpeg, else png).
    quality: JPEG quality (1..100) when encoding jpeg.
    verify: decode the pixels once to catch truncated / corrupt files.
  """
  resize: Optional[Tuple[int, int]] = None
  method: str = "bilinear"
  convert: Optional[str] = None
  encode: Optional[str] = None
  quality: int = 95
  verify: bool = True

  def __post_init__(self) -> None:
    if self.resize is not None:
      size = self.resize
      if (not isinstance(size, (tuple, list)) or len(size) != 2 or
          not all(_is_int(v) and v > 0 for v in size)):
        raise ValueError(f"resize must be (height, width), two positive "
                         f"integers, not {size!r}")
      object.__setattr__(self, "resize", (int(size[0]), int(size[1])))
    for name, allowed in (("method", METHODS), ("convert", CONVERTS),
                          ("encode", ENCODES)):
      value = getattr(self, name)
      if name != "method" and value is None:
        continue
      if value not in allowed:
        none = "" if name == "method" else " or None"
        raise ValueError(f"{name} must be one of {', '.join(allowed)}"
                         f"{none}, not {value!r}")
    if not _is_int(self.quality) or not 1 <= self.quality <= 100:
      raise ValueError(f"quality must be an integer from 1 to 100, not "
                       f"{self.quality!r}")
    if not isinstance(self.verify, bool):
      raise ValueError(f"verify must be true or false, not {self.verify!r}")

  @property
  def changes(self) -> bool:
    """Whether the image is decoded and re-encoded (not stored as is)."""
    return bool(self.resize or self.convert or self.encode)


@dataclasses.dataclass(frozen=True)
class ImageInfo:
  """One image as a record stores it.

  Attributes:
    data: the bytes to store.
    height, width: the size TensorFlow decodes `data` to.
    channels: the last dimension of
      tf.io.decode_image(data, channels=0, expand_animations=False).
    format: "jpeg", "png", "gif" or "bmp", the format of `data`.
  """
  data: bytes
  height: int
  width: int
  channels: int
  format: str



def process_image(data: bytes,
                  image_options: ImageOptions = ImageOptions()) -> ImageInfo:
  """The bytes to store for one image file, and their decoded shape.

  Raises:
    ImageError: the bytes are not an image Pillow reads, are truncated or
      corrupt (with options.verify), are too large, or TensorFlow could not
      decode them as they are and the options do not re-encode them.
  """
  data = bytes(data)
  im, fmt = open_image(data)
  if image_options.changes:
    return _reencode(data, im, fmt, image_options)
  _, height, width, channels = stored_shape(data, im, fmt)
  if image_options.verify:
    if fmt == "jpeg":
      # Reduced DCT scale: every scan is still entropy-decoded, so a
      # truncated stream still fails, at a fraction of the cost.
      im.draft("L", (1, 1))
    with pillow_errors():
      im.load()
    check_container(data, fmt)
    if fmt == "gif":
      verify_gif(data, im)
  return ImageInfo(data, height, width, channels, fmt)


def probe(data: bytes) -> Tuple[str, int, int, int]:
  """(format, height, width, channels) of an image stored as it is, from
  the header only (no pixels are decoded, so truncated data goes unnoticed).

  Raises ImageError where process_image(data, ImageOptions(verify=False))
  would, e.g. for formats TensorFlow does not decode.
  """
  data = bytes(data)
  im, fmt = open_image(data)
  return stored_shape(data, im, fmt)


def _reencode(data: bytes, im: Image.Image, fmt: str,
              image_options: ImageOptions) -> ImageInfo:
  """Decodes the first frame, converts, resizes and re-encodes it."""
  out_format = image_options.encode or (fmt if fmt in ("png", "jpeg")
                                        else "png")
  if image_options.verify:
    check_container(data, fmt)
  if fmt == "jpeg" and image_options.resize:
    height, width = image_options.resize
    im.draft("L" if image_options.convert == "grayscale" else None,
             (width, height))
  with pillow_errors():
    im.load()
  im = _working_mode(im, data, fmt)
  if image_options.convert:
    im = _convert(im, image_options.convert)
  if out_format == "raw" and im.mode == "I":
    im = _to_8bit(im)
  if out_format == "jpeg" and im.mode in ("LA", "RGBA"):
    raise ImageError(f"the image has an alpha channel (mode {im.mode}), "
                     f"which jpeg cannot store; set encode: png to keep it, "
                     f"or convert: rgb to drop it")
  if image_options.resize:
    height, width = image_options.resize
    im = im.resize((width, height), _FILTERS[image_options.method])
  return _encode(im, out_format, image_options.quality)


def _working_mode(im: Image.Image, data: bytes, fmt: str) -> Image.Image:
  """The image in L, LA, RGB, RGBA or I (16-bit gray), matching what
  TensorFlow decodes the original as (see the module docstring)."""
  mode = im.mode
  if mode == "P":
    alpha = "transparency" in im.info and fmt != "gif"
    return im.convert("RGBA" if alpha else "RGB")
  if mode == "PA":
    return im.convert("RGBA")
  if mode == "1":
    return im.convert("L")
  if mode == "La":
    return im.convert("LA")
  if mode == "RGBa":
    return im.convert("RGBA")
  if mode == "RGBA" and fmt == "png" and data[25] == 4:
    return im.convert("LA")  # 16-bit gray + alpha, read by Pillow as RGBA
  if mode in _TO_RGB:
    return im.convert("RGB")
  if mode in _INT_GRAY:
    return im if mode == "I" else im.convert("I")
  if mode in ("L", "LA", "RGB", "RGBA"):
    return im
  raise ImageError(f"{mode} pixels (Pillow mode) have no standard 8 or "
                   f"16-bit form to store; convert the file before")


def _to_8bit(im: Image.Image) -> Image.Image:
  """16-bit gray (mode I) -> L by the top 8 bits, as TensorFlow converts
  uint16 to uint8."""
  pixels = np.clip(np.asarray(im), 0, 65535).astype(np.uint32) >> 8
  return Image.fromarray(pixels.astype(np.uint8))


def _convert(im: Image.Image, target: str) -> Image.Image:
  if im.mode == "I":
    im = _to_8bit(im)
  mode = "RGB" if target == "rgb" else "L"
  return im if im.mode == mode else im.convert(mode)


def _encode(im: Image.Image, out_format: str, quality: int) -> ImageInfo:
  """Deterministic PNG / JPEG bytes of `im`, without metadata; or "raw":
  its uint8 pixels, row-major (height, width, channels)."""
  if out_format == "raw":
    pixels = np.asarray(im, dtype=np.uint8)
    return ImageInfo(pixels.tobytes(), im.height, im.width,
                     _MODE_CHANNELS[im.mode], "raw")
  if im.mode == "I":
    if out_format == "png":
      im = Image.fromarray(np.clip(np.asarray(im), 0, 65535)
                           .astype(np.uint16))
    else:
      im = _to_8bit(im)
  # Pillow writes some of info (ICC profile, comments, transparency) when
  # saving; the stored image carries none of it.
  im.info = {}
  out = io.BytesIO()
  if out_format == "jpeg":
    im.save(out, "JPEG", quality=quality, optimize=False, progressive=False)
  else:
    im.save(out, "PNG", optimize=False, compress_level=6)
  return ImageInfo(out.getvalue(), im.height, im.width,
                   _MODE_CHANNELS[im.mode], out_format)

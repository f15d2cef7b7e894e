"""What TensorFlow's decoders make of an image file stored as it is.

encoding.images stores jpeg, png, gif and bmp files byte for byte when
tf.io.decode_image decodes them as they are. This module knows those four
formats as TensorFlow reads them: the shape it decodes a file to (from the
header: a GIF's largest frame, a PNG's colour type, a BMP's bits per
pixel), and what it rejects or misreads beyond the pixels Pillow decodes
(PNG checksums and end chunk, a JPEG's end marker, GIF colour indices past
the table, BMP layouts its reader does not take). It also opens files with
Pillow, turning whatever Pillow raises into an ImageError with a reason.

Pillow's global state is left alone (see encoding.images); everything here
is safe to call from several threads at once.
"""

import contextlib
import io
import re
import struct
import threading
from typing import Iterator, List, Optional, Tuple, cast

from PIL import Image

__all__ = ["ImageError", "FORMATS", "open_image", "pillow_errors",
           "stored_shape", "check_container", "verify_gif"]

# Formats stored as they are: tf.io.decode_image reads them.
FORMATS = ("jpeg", "png", "gif", "bmp")

# Pillow format name -> ours. MPO (multi-picture JPEG from cameras) is a
# JPEG with more images appended; TensorFlow decodes the first.
_PILLOW_FORMATS = {"JPEG": "jpeg", "MPO": "jpeg", "PNG": "png", "GIF": "gif",
                   "BMP": "bmp"}
_SIGNATURES = ((b"\xff\xd8\xff", "JPEG"), (b"\x89PNG\r\n\x1a\n", "PNG"),
               (b"GIF87a", "GIF"), (b"GIF89a", "GIF"), (b"BM", "BMP"))
# PNG colour type -> channels TensorFlow decodes (palette: 3, or 4 with a
# tRNS chunk).
_PNG_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}
_PNG_END = b"\0\0\0\0IEND\xaeB`\x82"

_init_lock = threading.Lock()
_initialized = False


class ImageError(ValueError):
  """Why an image cannot be stored; str(e) is a reason for a person (what
  is wrong and what to do)."""


def _init_pillow() -> None:
  """Registers every Pillow plugin once, before the first open, so threads
  never race on the plugin tables."""
  global _initialized
  if not _initialized:
    with _init_lock:
      if not _initialized:
        Image.init()
        _initialized = True


def _bomb(pixels: int, limit: Optional[int] = None) -> ImageError:
  limit = Image.MAX_IMAGE_PIXELS if limit is None else limit
  return ImageError(
      f"the image has {pixels} pixels, more than Pillow's decompression-bomb "
      f"limit of {limit} (PIL.Image.MAX_IMAGE_PIXELS); resize the file, or "
      f"raise that limit if the image is genuine")


@contextlib.contextmanager
def pillow_errors() -> Iterator[None]:
  """Turns whatever Pillow raises on bad bytes into an ImageError."""
  try:
    yield
  except ImageError:
    raise
  except MemoryError:
    raise
  except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
    found = re.search(r"(\d+) pixels\).*?(\d+) pixels", str(e))
    if found:
      raise _bomb(int(found.group(1)), int(found.group(2))) from e
    raise ImageError(f"the image is too large ({e})") from e
  except Exception as e:  # pylint: disable=broad-except
    reason = str(e) or type(e).__name__
    raise ImageError(f"truncated or corrupt image data ({reason})") from e


def open_image(data: bytes) -> Tuple[Image.Image, str]:
  """The lazily opened image (header read, no pixels) and its format."""
  if not data:
    raise ImageError("the file is empty")
  _init_pillow()
  try:
    with pillow_errors():
      im = Image.open(io.BytesIO(data))
  except ImageError as e:
    if not isinstance(e.__cause__, Image.UnidentifiedImageError):
      raise
    raise _unidentified(data) from e.__cause__
  width, height = im.size
  if width <= 0 or height <= 0:
    raise ImageError(f"the image has zero size ({width}x{height} pixels)")
  if Image.MAX_IMAGE_PIXELS and width * height > Image.MAX_IMAGE_PIXELS:
    raise _bomb(width * height)
  fmt = _PILLOW_FORMATS.get(im.format or "", str(im.format).lower())
  return im, fmt


def _unidentified(data: bytes) -> ImageError:
  for signature, name in _SIGNATURES:
    if data.startswith(signature):
      size = _header_size(data, name)
      if size and 0 in size:
        return ImageError(f"the image has zero size ({size[1]}x{size[0]} "
                          f"pixels)")
      return ImageError(f"truncated or corrupt image data (a {name} "
                        f"signature, but Pillow cannot read the header)")
  return ImageError(f"not an image Pillow recognizes (the file starts with "
                    f"{data[:8]!r}); store jpeg, png, gif or bmp files")


def _header_size(data: bytes, name: str) -> Optional[Tuple[int, int]]:
  """(height, width) from a PNG / GIF / BMP header Pillow refused, to tell
  a zero-size image from a corrupt one."""
  try:
    if name == "PNG":
      width, height = struct.unpack_from(">II", data, 16)
    elif name == "GIF":
      width, height = struct.unpack_from("<HH", data, 6)
    elif name == "BMP":
      width, height = struct.unpack_from("<ii", data, 18)
    else:
      return None
  except struct.error:
    return None
  return height, width


def _not_decodable(im: Image.Image) -> ImageError:
  return ImageError(
      f"format {im.format} is not one TensorFlow decodes (jpeg, png, gif, "
      f"bmp); set encode: png (or jpeg) to store it re-encoded")


def stored_shape(data: bytes, im: Image.Image,
                 fmt: str) -> Tuple[str, int, int, int]:
  """(format, height, width, channels) TensorFlow decodes the unchanged
  bytes to; ImageError where it would fail or misread them."""
  if fmt not in FORMATS:
    raise _not_decodable(im)
  height, width = im.height, im.width
  if fmt == "jpeg":
    # TensorFlow decodes min(components, 3): CMYK / YCCK become RGB.
    channels = {"L": 1, "RGB": 3, "CMYK": 3}.get(im.mode)
    if channels is None:
      raise ImageError(f"a JPEG with {im.mode} pixels is not one TensorFlow "
                       f"decodes reliably; set convert: rgb or encode: png")
  elif fmt == "png":
    colour_type = data[25]
    if colour_type == 3:
      channels = 4 if "transparency" in im.info else 3
    else:
      channels = _PNG_CHANNELS[colour_type]
  elif fmt == "gif":
    height, width, channels = _gif_shape(data)
  else:
    channels = _bmp_channels(data, im)
  return fmt, height, width, channels


# (left, top, width, height, colour-table entries) of one GIF frame.
_Frame = Tuple[int, int, int, int, int]


def _gif_frames(data: bytes) -> Tuple[List[_Frame], bool]:
  """(left, top, width, height, colour-table entries or 0) of each frame
  of a GIF, from its block structure (no pixels are decoded), and whether
  the file holds every block it starts (False when it ends inside one)."""
  flags = data[10]
  colours = (2 << (flags & 7)) if flags & 0x80 else 0
  pos = 13 + 3 * colours
  frames: List[_Frame] = []
  while pos < len(data) and data[pos] != 0x3B:
    if data[pos] == 0x21:    # extension: label, then sub-blocks
      pos += 2
    elif data[pos] == 0x2C:  # image descriptor, then the LZW code size
      if pos + 11 > len(data):
        return frames, False
      left, top, w, h = struct.unpack_from("<HHHH", data, pos + 1)
      local = data[pos + 9]
      entries = (2 << (local & 7)) if local & 0x80 else colours
      frames.append((left, top, w, h, entries))
      pos += 11 + (3 * entries if local & 0x80 else 0)
    else:
      break
    while pos < len(data) and data[pos]:
      pos += data[pos] + 1
    if pos >= len(data):
      return frames, False
    pos += 1
  return frames, True


def _gif_shape(data: bytes) -> Tuple[int, int, int]:
  """(height, width, 3) as TensorFlow decodes a GIF: the largest frame
  size over all frames (not the logical screen size Pillow reports), and
  always RGB."""
  frames, _ = _gif_frames(data)
  if not frames or not all(f[2] and f[3] for f in frames):
    raise ImageError("truncated or corrupt image data (a GIF without a "
                     "complete frame, or with an empty one)")
  if not frames[0][4]:
    raise ImageError("a GIF without a colour table is not one TensorFlow "
                     "decodes; set encode: png to store it re-encoded")
  return (max(f[3] for f in frames), max(f[2] for f in frames), 3)


def verify_gif(data: bytes, im: Image.Image) -> None:
  """What TensorFlow rejects in a GIF whose first frame Pillow decoded:
  colour indices past the colour table in that frame, and (as it reads
  every frame) a truncated or corrupt later frame."""
  frames, complete = _gif_frames(data)
  if not complete:
    raise ImageError("truncated or corrupt image data (the GIF ends inside "
                     "a block)")
  left, top, w, h, entries = frames[0]
  with pillow_errors():
    frame = im.crop((left, top, left + w, top + h))
    # A GIF frame has one band (palette indices): (lowest, highest).
    highest = cast(int, frame.getextrema()[1])
  if highest >= entries:
    raise ImageError(f"truncated or corrupt image data (colour index "
                     f"{highest} in a GIF colour table of {entries})")
  if len(frames) > 1:
    with pillow_errors():
      for index in range(1, len(frames)):
        im.seek(index)
        im.load()


def _bmp_channels(data: bytes, im: Image.Image) -> int:
  """Channels TensorFlow decodes a BMP to (bits per pixel / 8). Its reader
  takes uncompressed 8, 24 and 32-bit pixels at the header's offset, ignores
  the palette, and requires the file to end right after the last row."""
  def refuse(what: str) -> ImageError:
    return ImageError(f"a BMP with {what} is not one TensorFlow decodes as "
                      f"it is; set encode: png (or convert: rgb) to store it "
                      f"re-encoded")
  try:
    offset, header = struct.unpack_from("<II", data, 10)
    width, height = struct.unpack_from("<ii", data, 18)
    bits, compression = struct.unpack_from("<HI", data, 28)
    masks = struct.unpack_from("<III", data, 54) if compression in (3, 6) \
        else None
  except struct.error as e:
    raise ImageError(f"truncated or corrupt image data ({e})") from e
  if header < 40:
    raise refuse("an OS/2 version 1 header")
  if bits not in (8, 24, 32):
    raise refuse(f"{bits} bits per pixel")
  if masks is not None:
    if bits != 32 or masks != (0xFF0000, 0xFF00, 0xFF):
      raise refuse("custom colour bit masks")
  elif compression:
    raise refuse("compressed pixels (RLE, JPEG or PNG)")
  if bits == 8 and im.mode != "L":
    raise refuse("a colour palette (TensorFlow reads the palette indices "
                 "as gray levels)")
  row = (bits // 8 * width + 3) // 4 * 4
  expected = offset + row * abs(height)
  if len(data) < expected:
    raise ImageError(f"truncated or corrupt image data (the BMP has "
                     f"{len(data)} bytes where its header implies "
                     f"{expected})")
  if len(data) > expected:
    raise refuse(f"{len(data) - expected} bytes after its pixels")
  return bits // 8


def check_container(data: bytes, fmt: str) -> None:
  """What TensorFlow checks beyond the pixels Pillow decoded: PNG chunk
  checksums and the end chunk, the JPEG end-of-image marker."""
  if fmt == "png":
    with pillow_errors():
      Image.open(io.BytesIO(data)).verify()  # not the end chunk's checksum
    if _PNG_END not in data:
      raise ImageError("truncated or corrupt image data (the PNG end chunk "
                       "is incomplete)")
  elif fmt == "jpeg" and data.rfind(b"\xff\xd9") < data.rfind(b"\xff\xda"):
    raise ImageError("truncated or corrupt image data (the JPEG "
                     "end-of-image marker is missing)")

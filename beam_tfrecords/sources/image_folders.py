"""Image folders: `--format images --input photos/`.

As Keras' `image_dataset_from_directory` reads them: each sub-folder of
the input folder is a class, and the files under it (at any depth) are its
images. Every image file becomes one row with the columns

  image     the file's path (local, gs://, s3://, ...)
  label     the class: the name of the top sub-folder (missing for files
            directly in the input folder)
  filename  the path below the input folder, e.g. "cats/001.jpg"

so a schema such as `image: {type: image}`, `label: {type: string,
vocabulary: auto}` reads it. Files whose extension is not an image's
(README.txt) are not rows; the build log counts them. Hidden files and
folders (.DS_Store, .ipynb_checkpoints/) are left out, as Keras does. The
class names, sorted, are the `auto` vocabulary: the sub-folders that hold
at least one image (an object store has no empty folders; Keras would
count an empty local folder as a class). Only the listing happens on the
launcher; the files are read on the workers, in units of
IMAGES_PER_UNIT.
"""

import logging
import os
from typing import (Any, Dict, Iterator, List, Mapping, Optional, Sequence,
                    Tuple)

import pyarrow as pa

from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.sources.base import (Format, InputFile, ReadUnit,
                                         SourceBatch, register_format)

__all__ = ["ImageFolder", "IMAGE_EXTENSIONS", "IMAGES_PER_UNIT",
           "list_image_folders"]

_LOG = logging.getLogger(__name__)
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif",
                    ".tiff")
IMAGES_PER_UNIT = 256
COLUMNS = ("image", "label", "filename")


def list_image_folders(roots: Sequence[str]
                       ) -> Tuple[List[InputFile], List[Tuple[str, str]],
                                  List[str]]:
  """(image files, (root, relative path) per file, sorted class names).

  Raises:
    InputError: a root is not a folder with images.
  """
  files, where, classes = [], [], set()
  seen: List[str] = []
  for pattern in roots:
    root = pattern.rstrip("/") or "/"
    if any(c in root for c in "*?["):
      raise InputError(f"--format images takes folders, not globs: "
                       f"{pattern!r}")
    if "://" not in root:  # workers may run elsewhere: absolute paths
      root = os.path.abspath(root)
    for other in seen:
      if root == other or root.startswith(other.rstrip("/") + "/") or \
          other.startswith(root.rstrip("/") + "/"):
        raise InputError(f"image folders {other!r} and {root!r} overlap: "
                         "give each folder once, and no folder inside "
                         "another")
    seen.append(root)
    try:
      found = fs.match(fs.join(root, "**"))
    except Exception as e:  # BeamIOError and friends
      raise InputError(f"cannot list {pattern!r}: {e}") from None
    images, skipped = [], 0
    for m in found:
      if m.path.endswith("/"):
        continue
      relative = m.path[len(root):].lstrip("/")
      if any(name.startswith(".") for name in relative.split("/")):
        continue  # hidden files and folders (.DS_Store, .ipynb_checkpoints)
      if not m.path.lower().endswith(IMAGE_EXTENSIONS):
        skipped += 1
        continue
      images.append(m)
    if not images:
      raise InputError(
          f"{pattern!r} holds no image files ({', '.join(IMAGE_EXTENSIONS)}"
          "); --format images reads a folder with one sub-folder per class")
    if skipped:
      _LOG.warning("%s: %d file(s) without an image extension are not read",
                   root, skipped)
    for m in sorted(images, key=lambda m: m.path):
      relative = m.path[len(root):].lstrip("/")
      files.append(InputFile(m.path, m.size, m.mtime or 0.0))
      where.append((root, relative))
      if "/" in relative:
        classes.add(relative.split("/", 1)[0])
  return files, where, sorted(classes)


class ImageFolder(Format):
  """Rows of image files in class folders (see the module docstring)."""
  name = "images"
  extensions = ()

  def check(self, files, columns, format_options):
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
      raise InputError(f"an image folder has the columns {list(COLUMNS)}; "
                       f"the schema reads {unknown}")
    return dict(format_options, column_names=list(COLUMNS))

  def plan_folders(self, where: Sequence[Tuple[str, str]],
                   format_options: Mapping[str, Any]) -> List[ReadUnit]:
    """Units of IMAGES_PER_UNIT files of one folder each."""
    units = []
    by_root: Dict[str, List[str]] = {}
    for root, relative in where:
      by_root.setdefault(root, []).append(relative)
    base = tuple(sorted((k, v) for k, v in format_options.items()
                        if k != "column_names"))
    for root, names in sorted(by_root.items()):
      for start in range(0, len(names), IMAGES_PER_UNIT):
        chunk = tuple(names[start:start + IMAGES_PER_UNIT])
        units.append(ReadUnit(root, self.name, start, start + len(chunk),
                              base + (("files", chunk),)))
    return units

  def read(self, unit: ReadUnit, columns: Optional[Sequence[str]]
           ) -> Iterator[SourceBatch]:
    names = unit.option_dict["files"]
    root = unit.path
    values = {
        "image": [fs.join(root, n) for n in names],
        "label": [n.split("/", 1)[0] if "/" in n else None for n in names],
        "filename": list(names),
    }
    yield SourceBatch(
        path=root, first_row=unit.start + 1,
        columns={c: pa.array(values[c], type=pa.large_string())
                 for c in (values if columns is None else columns)
                 if c in values},
        num_rows=len(names), order=(root, unit.start, 0))


register_format(ImageFolder())

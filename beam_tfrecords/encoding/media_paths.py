"""Which file a path from the data names (image and .npy columns).

Paths from the data are untrusted: with the feature's `base_dir`, relative
paths resolve against it and none may leave it (not by "..", an absolute
path elsewhere, or, on local disk, a symbolic link). Without it, relative
paths resolve against the directory of the input file that holds them.
Paths may carry a scheme (gs://, s3://, ...); they are normalized as
POSIX paths after it.
"""

import os
import posixpath
import re
from typing import Optional, Tuple

from beam_tfrecords.encoding.media_cells import MediaError

__all__ = ["resolve_path"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)(.*)$", re.S)


def _split_scheme(path: str) -> Tuple[str, str]:
  m = _SCHEME.match(path)
  return (m.group(1), m.group(2)) if m else ("", path)


def _normalized(path: str) -> str:
  scheme, rest = _split_scheme(path)
  if not rest:
    return path
  norm = posixpath.normpath(rest)
  if rest.startswith("//") and not scheme:
    norm = "/" + norm.lstrip("/")
  return scheme + norm


def _is_absolute(path: str) -> bool:
  return bool(_SCHEME.match(path)) or path.startswith("/")


def resolve_path(value: str, base_dir: Optional[str], source: str) -> str:
  """Where a path from the data points.

  With `base_dir`, relative paths resolve against it and the result must
  stay inside it (".." or an absolute path elsewhere is refused: paths
  from data must not reach other files). Without it, relative paths
  resolve against the directory of the input file that holds them.

  Raises:
    MediaError: an empty path, or one outside base_dir.
  """
  text = value.strip()
  if not text:
    raise MediaError("the path is empty")
  if base_dir is not None:
    base = _normalized(base_dir).rstrip("/")
    path = _normalized(text if _is_absolute(text) else f"{base}/{text}")
    if path != base and not path.startswith(base + "/"):
      raise MediaError(f"the path {text!r} leads outside base_dir "
                       f"{base_dir!r}; paths from the data must stay inside "
                       "it")
    if not _SCHEME.match(path):
      # On local disk a symbolic link inside base_dir may point anywhere:
      # the file it reaches must be inside base_dir too.
      real, real_base = os.path.realpath(path), os.path.realpath(base)
      if real != real_base and not real.startswith(
          real_base.rstrip("/") + "/"):
        raise MediaError(f"the path {text!r} leads outside base_dir "
                         f"{base_dir!r} through a symbolic link (to "
                         f"{real!r}); paths from the data must stay inside "
                         "it")
    return path
  if _is_absolute(text):
    return _normalized(text)
  folder = source.rsplit("/", 1)[0] if "/" in source else "."
  if not _is_absolute(folder):
    folder = os.path.abspath(folder)
  return _normalized(f"{folder}/{text}")

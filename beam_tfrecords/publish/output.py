"""The output folder as a publish sees it: its path checked (no root, no
pattern, not a file), its _SUCCESS and its finished dataset.json read."""

import json
import os
from typing import Any, Dict, Optional


from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.layout import DATASET_JSON, SUCCESS

__all__ = ["success_text", "check_output_path", "check_output",
           "finished_with_key"]


def success_text(output: str) -> Optional[str]:
  """The output's _SUCCESS (tool version and build key), None if none."""
  path = FileSystems.join(output, SUCCESS)
  try:
    with FileSystems.open(path) as f:
      return f.read().decode("utf-8", "replace")
  except Exception:  # pylint: disable=broad-except
    # Not there (each file system says so its own way).
    return None if not FileSystems.exists(path) else "<unreadable>"


def check_output_path(output: str) -> None:
  """Refuses outputs that would put a dataset among unrelated files: an
  empty path, the file system's root, `.`, a bucket's root."""
  text = output.strip()
  scheme, _, rest = text.rpartition("://")
  if scheme:
    bucket_root = "/" not in rest.strip("/")
    if bucket_root:
      raise InputError(
          f"output {output!r} is the root of a bucket; give a folder for "
          f"the dataset inside it ({scheme}://{rest.strip('/') or 'bucket'}"
          "/datasets/NAME)")
    return
  if not text:
    raise InputError("output is empty; give the dataset's folder, e.g. "
                     "--output out/my_dataset")
  where = os.path.abspath(text)
  if where in (os.path.abspath(os.sep), os.getcwd()):
    what = ("the file system root" if where == os.path.abspath(os.sep)
            else "the current directory")
    raise InputError(f"output {output!r} is {what}; a dataset gets a folder "
                     "of its own, e.g. --output out/my_dataset")


def check_output(output: str) -> None:
  """Refuses an output path Beam reads as a pattern, or one that is a
  file."""
  if any(c in output for c in "*?[]"):
    raise InputError(f"output {output!r}: a dataset path cannot hold *, ?, "
                     "[ or ] (Beam's file systems read them as patterns)")
  if ("://" not in output and os.path.exists(output)
      and not os.path.isdir(output)) or (
          "://" in output and FileSystems.exists(output)):
    raise InputError(f"output {output} is a file; a dataset is a folder: "
                     "give a folder path (new or empty, or holding a dataset)")


def finished_with_key(output: str, key: str) -> Optional[Dict[str, Any]]:
  """The dataset.json in `output` (finished: the caller saw _SUCCESS) if it
  was built with `key`."""
  try:
    with FileSystems.open(FileSystems.join(output, DATASET_JSON)) as f:
      meta = json.loads(f.read().decode("utf-8"))
  except Exception:  # pylint: disable=broad-except
    return None
  return meta if meta.get("build_key") == key else None

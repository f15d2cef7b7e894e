"""What TensorFlow Transform wrote, described in dataset.json: after the
run, the transform graph's files (`transform_fn/`,
`transformed_metadata/`) and the transformed feature spec go into the
staged dataset.json (`transform`). TensorFlow Transform is imported only
when a build has a `transform:` section."""

import dataclasses
import glob
from typing import Any

from apache_beam.io.filesystems import FileSystems

from beam_tfrecords.info import DatasetInfo, TransformInfo
from beam_tfrecords.sinks.metadata import TRANSFORM_DIRS, write_info

__all__ = ["describe_transform"]


def _spec_json(spec: Any) -> dict:
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  out = {}
  for name, f in sorted(spec.items()):
    if isinstance(f, tf.io.FixedLenFeature):
      out[name] = {"kind": "FixedLenFeature", "shape": list(f.shape),
                   "dtype": f.dtype.name}
    elif isinstance(f, tf.io.VarLenFeature):
      out[name] = {"kind": "VarLenFeature", "dtype": f.dtype.name}
    else:
      raise ValueError(f"transformed feature {name!r}: {f!r} is not a "
                       "FixedLen / VarLen feature")
  return out


def describe_transform(staging: str, info: DatasetInfo) -> DatasetInfo:
  """After the run: the transform graph's files and the transformed feature
  spec go into dataset.json (rewritten in the staging directory)."""
  import tensorflow_transform as tft  # pylint: disable=import-outside-toplevel
  files = []
  for d in TRANSFORM_DIRS:
    pattern = FileSystems.join(glob.escape(FileSystems.join(staging, d)),
                               "**")
    for r in FileSystems.match([pattern]):
      files += [m.path[len(staging.rstrip("/")) + 1:]
                for m in r.metadata_list if not m.path.endswith("/")]
  output = tft.TFTransformOutput(staging)
  info = dataclasses.replace(info, transform=TransformInfo(
      info.transform.splits if info.transform else {}, tuple(sorted(files)),
      _spec_json(output.transformed_feature_spec())))
  write_info(staging, info)
  return info

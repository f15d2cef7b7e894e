"""What TensorFlow Transform wrote, described in dataset.json: after the
run, the transform graph's files (`transform_fn/`,
`transformed_metadata/`) and the transformed feature spec go into
dataset.json's `transform` (the finish step writes it again). TensorFlow Transform is imported only
when a build has a `transform:` section."""

import dataclasses
import glob
from typing import Any


from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.info import DatasetInfo, TransformInfo
from beam_tfrecords.core.layout import TRANSFORM_DIRS

__all__ = ["describe_transform"]


def _spec_json(spec: Any, sequence: bool) -> dict:
  """TFT's transformed feature spec as dataset.json records it. For
  SequenceExamples ({"context": ..., "sequence": ...}, as schema.spec
  writes one): a ragged output is a feature list (tft.outputs), of scalar
  steps (FixedLenSequenceFeature) or of lists (RaggedFeature)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  context: dict = {}
  steps: dict = {}
  for name, f in sorted(spec.items()):
    if sequence and isinstance(f, tf.io.RaggedFeature):
      steps[name] = {"kind": "RaggedFeature", "dtype": f.dtype.name} \
          if f.partitions else {"kind": "FixedLenSequenceFeature",
                                "shape": [], "dtype": f.dtype.name,
                                "allow_missing": True}
      continue
    if isinstance(f, tf.io.FixedLenFeature):
      context[name] = {"kind": "FixedLenFeature", "shape": list(f.shape),
                       "dtype": f.dtype.name}
    elif isinstance(f, (tf.io.VarLenFeature, tf.io.RaggedFeature)):
      # (An Example's ragged output is written flattened, a list per
      # record: tft.outputs.)
      context[name] = {"kind": "VarLenFeature", "dtype": f.dtype.name}
    else:
      raise ValueError(f"transformed feature {name!r}: {f!r} is not a "
                       "FixedLen / VarLen feature")
  return {"context": context, "sequence": steps} if sequence else context


def describe_transform(staging: str, info: DatasetInfo) -> DatasetInfo:
  """After the run: `info` with the transform graph's files (in `staging`)
  and the transformed feature spec."""
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
      _spec_json(output.transformed_feature_spec(),
                 info.schema.get("record") == "sequence_example")))
  return info

"""A dataset TensorFlow Datasets reads (`build --tfds`).

`tfds.builder_from_directory(path)` reads a folder that holds TFDS's
`dataset_info.json` and `features.json` beside uncompressed TFRecord
shards whose names its file template gives (TFDS's reader has no
compression option, so these shards are not gzip). The shards keep this
tool's names, `train-00000-of-00003.tfrecord`, which the template
`{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}` written into dataset_info.json
names; `btr.load`, `iter_records` and `inspect` read them as any other.
With `--file-format array_record` the shards are ArrayRecord files,
`train-00000-of-00003.array_record` by the same template, and
dataset_info.json says `"fileFormat": "array_record"`: TFDS's
`as_data_source()` reads them at random (its `as_dataset()` does not read
ArrayRecord files).

Each stored feature is a TFDS feature of the same name: `Tensor` of its
shape and dtype (int64, float32, string; a variable-length one of shape
[-1]), an image an `Image` (PNG or JPEG with its channels: the schema
says `encode` and `convert`; its size when it resizes). What TFDS cannot express
is refused before the build (`check_tfds`): SequenceExamples (TFDS's
Sequence feature is a list inside an Example, not a SequenceExample), a
fixed-shape feature a record may lack (TFDS has no missing values),
images without one encoding and channel count (raw pixels, or stored as
read), tensor features, and TensorFlow Transform sections. The JSON is written here, in TFDS 4.9's format (the two files
are plain data; the build does not need tensorflow-datasets).
"""

import json
from typing import Any, Dict

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.info import DatasetInfo, FileSum
from beam_tfrecords.core.layout import TFDS_FILES
from beam_tfrecords.core.shard_formats import of_dataset
from beam_tfrecords.core.shard_names import SHARDS
from beam_tfrecords.schema import Feature, FeatureType, Schema
from beam_tfrecords.schema.model import MediaKind
from beam_tfrecords.sinks.metadata import write_file

__all__ = ["check_tfds", "write_tfds_files", "features_json", "TFDS_FILES",
           "TFDS_TEMPLATE"]

TFDS_TEMPLATE = SHARDS.tfds
_DTYPES = {FeatureType.INT64: "int64", FeatureType.FLOAT: "float32",
           FeatureType.STRING: "string", FeatureType.BYTES: "string"}
_PREFIX = "tensorflow_datasets.core.features."


def _images(schema: Schema) -> Dict[str, Any]:
  return {m.name: m for m in schema.media if m.kind is MediaKind.IMAGE}


def check_tfds(schema: Schema) -> None:
  """Refuses what TFDS's features cannot express, saying why.

  Raises:
    InputError: naming the schema part and what to do.
  """
  why = "--tfds: TensorFlow Datasets"
  if schema.is_sequence:
    raise InputError(f"{why} has no SequenceExample feature (its Sequence "
                     "is a list inside an Example); build without --tfds")
  if schema.transform is not None:
    raise InputError(f"{why} would not read the transformed records; "
                     "build the TFDS dataset from a schema without "
                     "transform:")
  images = _images(schema)
  if schema.splits.names and any(not n.replace("_", "").isalnum()
                                 for n in schema.splits.names):
    raise InputError(f"{why} split names are letters, digits and _; "
                     f"this schema's: {list(schema.splits.names)}")
  for m in schema.media:
    if m.kind is MediaKind.IMAGE and (
        m.options.get("encode") not in ("png", "jpeg")
        or m.options.get("convert") not in ("rgb", "grayscale")):
      raise InputError(
          f"{why}'s Image needs one encoding and a number of channels; "
          f"give image {m.name!r} encode: png (or jpeg) and convert: rgb "
          "(or grayscale)")
    if m.kind is MediaKind.TENSOR:
      raise InputError(f"{why}: tensor feature {m.name!r} has no TFDS "
                       "counterpart here; build without --tfds")
  for f in schema.features:
    if not f.always_present and (f.name in images
                                 or not f.is_variable_length):
      raise InputError(
          f"{why} has no missing values, and feature {f.name!r} may be "
          "missing from a record: give it required: true or a default "
          "(or shape: [-1], a list that may be empty)")


def _tensor(feature: Feature) -> Dict[str, Any]:
  shape = {"dimensions": [str(d) for d in feature.shape]} \
      if feature.shape else {}
  return {"pythonClassName": _PREFIX + "tensor_feature.Tensor",
          "tensor": {"shape": shape, "dtype": _DTYPES[feature.type],
                     "encoding": "none"}}


def _image(media) -> Dict[str, Any]:
  o = media.options
  size = o.get("resize") or (-1, -1)
  channels = {"rgb": 3, "grayscale": 1}[o["convert"]]
  return {"pythonClassName": _PREFIX + "image_feature.Image",
          "image": {"shape": {"dimensions": [str(size[0]), str(size[1]),
                                             str(channels)]},
                    "dtype": "uint8", "encodingFormat": o["encode"]}}


def features_json(schema: Schema) -> Dict[str, Any]:
  """features.json: a FeaturesDict of the stored features."""
  images = _images(schema)
  return {"pythonClassName": _PREFIX + "features_dict.FeaturesDict",
          "featuresDict": {"features": {
              f.name: _image(images[f.name]) if f.name in images
              else _tensor(f) for f in schema.features}}}


def dataset_info_json(info: DatasetInfo) -> Dict[str, Any]:
  """dataset_info.json: the name, the splits' shard lengths and bytes, and
  the template of the shard names."""
  out: Dict[str, Any] = {
      "name": info.name, "version": "1.0.0",
      "fileFormat": of_dataset(info).tfds_name,
      "splits": [{"name": name, "filepathTemplate": TFDS_TEMPLATE,
                  "numBytes": str(split.num_bytes),
                  "shardLengths": [str(s.num_records)
                                   for s in split.shards]}
                 for name, split in sorted(info.splits.items())]}
  description = info.schema.get("description")
  if description:
    out["description"] = description
  return out


def write_tfds_files(staging: str, info: DatasetInfo,
                     features: Dict[str, Any]) -> Dict[str, FileSum]:
  """Writes TFDS's two files into the staging folder (`features`: what
  features_json gave on the launcher); their checksums."""
  return {name: write_file(staging, name, (json.dumps(
      content, indent=2, sort_keys=True) + "\n").encode("utf-8"))
          for name, content in zip(TFDS_FILES, (dataset_info_json(info),
                                                features))}

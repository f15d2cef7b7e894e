"""beam_tfrecords: declarative TFRecord datasets built with Apache Beam.

    import beam_tfrecords as btr
    btr.build("schemas/movies.yaml", "data/*.csv", "out/movies")
    ds = btr.open("out/movies")            # one handle to read it
    ds.tf_dataset("train"), ds.records("eval"), ds.info, ds.errors()

Names are imported when first used (PEP 562), so that `import
beam_tfrecords` (and the command line's --help, inspect, validate and
infer-schema) does not pay for importing Apache Beam or TensorFlow.
"""

import importlib

from beam_tfrecords.core.errors import (AnomalyError, BadRowsError,
                                        DatasetReplacedError, EncodingError,
                                        InputError, JobFailedError,
                                        MalformedFileError, OutputBusyError,
                                        OutputError, PublishInterruptedError,
                                        SchemaError, ShardDamagedError,
                                        ShardIndexError)
from beam_tfrecords.core.version import __version__

# Public name -> the module that defines it.
_LAZY = {
    "BuildOptions": "beam_tfrecords.building.options",
    "BuildResult": "beam_tfrecords.building.builder",
    "DatasetInfo": "beam_tfrecords.core.info",
    "EncodeRecords": "beam_tfrecords.building.ptransforms",
    "WriteDataset": "beam_tfrecords.building.ptransforms",
    "build": "beam_tfrecords.building.builder",
    "open": "beam_tfrecords.read.dataset_reader",
    "DatasetReader": "beam_tfrecords.read.dataset_reader",
    "dataset_info": "beam_tfrecords.read.reader",
    "feature_spec": "beam_tfrecords.read.reader",
    "iter_records": "beam_tfrecords.read.reader",
    "load": "beam_tfrecords.read.reader",
    "pin": "beam_tfrecords.read.window",
    "verify": "beam_tfrecords.publish.verify",
    "Schema": "beam_tfrecords.schema",
    "load_schema": "beam_tfrecords.schema",
}

__all__ = sorted(["AnomalyError", "BadRowsError", "DatasetReplacedError",
                  "EncodingError", "InputError", "JobFailedError",
                  "MalformedFileError", "OutputBusyError",
                  "OutputError", "PublishInterruptedError", "SchemaError",
                  "ShardDamagedError", "ShardIndexError",
                  "__version__", *_LAZY])


def __getattr__(name: str):
  module = _LAZY.get(name)
  if module is None:
    raise AttributeError(f"module 'beam_tfrecords' has no attribute {name!r}")
  value = getattr(importlib.import_module(module), name)
  globals()[name] = value  # later look-ups skip this function
  return value


def __dir__():
  return sorted(set(globals()) | set(_LAZY))

"""TensorFlow Transform from the schema's `transform:` section.

    transform:
      keep_raw: true                    # also write the raw records
      features:
        rating_z:  {scale_to_z_score: rating}
        rating_01: {scale_to_0_1: rating}
        title_id:  {compute_and_apply_vocabulary: title, top_k: 1000,
                    frequency_threshold: 2, num_oov_buckets: 1}
        ts_bucket: {bucketize: timestamp, num_buckets: 10}
        user_hash: {hash_strings: user, hash_buckets: 100}
        label:     {pass: label}

`TransformRecords` (tft.pipeline) analyzes the training split's raw
records with TFT's `AnalyzeDataset` (decoded into Arrow RecordBatches by
tfx-bsl's C++ decoder, fed through a TFXIO TensorAdapterConfig), then
transforms every split's raw shards, streamed back from the files the
build wrote, into transformed shards of the same names, record for record
in the same order: as deterministic as the raw ones, and memory that does
not grow with the rows. The transform graph is written in TFT's layout
(transform_fn/, transformed_metadata/), which
`tft.TFTransformOutput(dataset_dir)` reads;
`beam_tfrecords.read.reader.transform_output` returns it, and the raw schema
beside it (`metadata/`, as TFX's Transform writes it), so TFX's serving
recipe works: `raw_feature_spec()`, then `transform_features_layer()`.

SequenceExample schemas take a `transform:` too: context features are
given as TFT gives Example features, each per-step feature as a
RaggedTensor (batch, steps) (a scalar step that every step has; else
(batch, steps, values)), which TFT's analyzers take. A RaggedTensor output
is written as a feature list, a dense or sparse one as a context feature
(tft.outputs).

The user's own `preprocessing_fn`, as TFX's Transform component takes it
(a module file's function):

    transform:
      preprocessing_fn: my_package.transform:preprocessing_fn

    btr.build(schema, inputs, output, preprocessing_fn=preprocessing_fn)

It gets the stored features as TFT gives them (a dense tensor for a
feature every record has, a SparseTensor otherwise) and returns the
transformed features; any `tft.*` analyzer and any TensorFlow op may be
in it. With declared `features:` too, both run on the same inputs and
their outputs are merged (a name in both is refused). TFT traces the
function on the launcher when the pipeline is made, and again on a
worker to save the final graph (the analyzers' results as constants):
the workers must import its module, as for `--preprocess` code
(building names the function and how to ship it when they cannot). It
is traced once before anything runs (`check_traces`), so a function
that fails to build its graph fails the build before the pipeline,
naming the function and the error.
"""

from beam_tfrecords.tft.functions import (check_traces, combined_fn, fn_digest,
                                          preprocessing_fn, stored_features,
                                          traced_key, with_preprocessing_fn)
from beam_tfrecords.tft.pipeline import TransformRecords

__all__ = ["TransformRecords", "preprocessing_fn", "with_preprocessing_fn", "combined_fn", "check_traces",
           "fn_digest", "traced_key", "stored_features"]


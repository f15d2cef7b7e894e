"""A dataset folder's names, every one: the finished dataset's files and
folders, what a build puts beside them while it runs, and what its
staging folder holds.

Each name is defined here once: the modules that write a file and those
that read it import its name from here (two copies drift apart; a lower
layer needs them as much as a higher one). `FINISHED`, `BESIDE` and
`STAGED` describe them, with when each is there: the output layout in
docs/index.md and the README is generated from them
(tests/unit/test_docs.py fails when it is stale).

The record shards' own names (`<split>-<shard>-of-<shards><suffix>`)
and their index files' are their format's: core.shard_names and the
shard writers.
"""

from typing import NamedTuple, Tuple

__all__ = ["DATASET_JSON", "SUCCESS", "ERRORS_DIR", "INDEX_DIR",
           "PREVIEW_DIR", "CARD_FILE", "REPORT_FILE", "ANOMALIES_FILE",
           "CROISSANT_FILE", "STATISTICS_FILE", "STATS_STATE_FILE", "TFMD_FILE", "TFDS_FILES",
           "TRANSFORMED_DIR", "RAW_METADATA_DIR", "TRANSFORM_DIRS",
           "LOCK_FILE", "STAGING_PREFIX", "UNITS_DIR", "PARTS_DIR", "TFT_TEMP_DIR",
           "JOURNAL", "ROLLBACK", "JOURNALS", "PREVIOUS", "ASIDE_DONE",
           "SUCCESS_NEXT", "staging_name", "preview_file", "Entry",
           "FINISHED", "BESIDE", "STAGED"]

# --- A finished dataset -----------------------------------------------------

# The dataset's description (core.info.DatasetInfo).
DATASET_JSON = "dataset.json"
# Written last by a publish; its text is the dataset's generation
# (core.generations).
SUCCESS = "_SUCCESS"
# The dead-letter files (sinks.metadata.WriteErrors); also their split
# name, so that they are named errors-00000-of-00001.jsonl.
ERRORS_DIR = "errors"
# The index beside each shard (core.shard_index).
INDEX_DIR = "index"
# Each split's first records, decoded (sinks.preview).
PREVIEW_DIR = "preview"
# The dataset card (inspect.card): the name hosting sites show.
CARD_FILE = "README.md"
# The report (inspect.report).
REPORT_FILE = "report.html"
# The expectations checked (inspect.expectations).
ANOMALIES_FILE = "anomalies.json"
# MLCommons Croissant (publish.croissant).
CROISSANT_FILE = "croissant.json"
# TensorFlow Data Validation's statistics (sinks.tfdv).
STATISTICS_FILE = "statistics.pb"
# The statistics before they are rounded (encoding.stats_state): what an
# --append merges the new rows' statistics into.
STATS_STATE_FILE = "statistics.state.json"
# TensorFlow Metadata's schema (schema.tfmd), the name TFX gives it.
TFMD_FILE = "schema.pbtxt"
# What TensorFlow Datasets reads beside the shards (--tfds: sinks.tfds_files),
# the names tfds.builder_from_directory looks for.
TFDS_FILES = ("dataset_info.json", "features.json")
# TensorFlow Transform's output (beam_tfrecords.tft): the transformed
# shards, what tft_beam.WriteTransformFn writes (tft.TFTransformOutput
# reads it) and the raw schema TFX writes beside it (raw_feature_spec()
# reads it).
TRANSFORMED_DIR = "transformed"
RAW_METADATA_DIR = "metadata"
TRANSFORM_DIRS = ("transform_fn", "transformed_metadata", RAW_METADATA_DIR)

# --- Beside it, while a build runs ------------------------------------------

# One build at a time per output (publish.lock).
LOCK_FILE = ".beam-tfrecords.lock"
# A build's staging folder: STAGING_PREFIX + its run id (publish.staging).
STAGING_PREFIX = ".staging-"
# The finished read units of builds that have not published yet
# (core.unit_cache): what a rerun after a kill reuses.
UNITS_DIR = ".units"

# --- In a staging folder ----------------------------------------------------

# Parts on their way to a shard, and spilled steps (sinks); removed before
# the publish (publish.journal.remove_parts), also under errors/ and
# transformed/.
PARTS_DIR = ".parts"
# TensorFlow Transform's scratch space.
TFT_TEMP_DIR = ".tft-tmp"
# The publish's journal, and the same journal once the switch is being
# undone (publish.journal): a staging folder holding either is a publish
# under way or cut short, which only a publish's steps may remove.
JOURNAL = "publish.json"
ROLLBACK = "rollback.json"
JOURNALS = (JOURNAL, ROLLBACK)
# Where the old dataset's files move aside during the switch, the marker
# that they all have, and the new _SUCCESS made before the switch.
PREVIOUS = "previous"
ASIDE_DONE = "ASIDE_DONE"
SUCCESS_NEXT = "SUCCESS_NEXT"


def staging_name(run: str) -> str:
  """The staging folder's name of the build `run` (its lock's run id)."""
  return STAGING_PREFIX + run


def preview_file(split: str) -> str:
  """A split's preview, relative to the dataset folder."""
  return f"{PREVIEW_DIR}/{split}.parquet"


class Entry(NamedTuple):
  """One file or folder of a dataset folder, as the docs show it: `name`
  (an example where the name is made per split or shard), what it holds,
  and `when` it is there ("": in every finished dataset)."""
  name: str
  what: str
  when: str = ""


# The finished dataset, in the order the docs list it; what dataset.json
# lists, and verify checks, but _SUCCESS and dataset.json itself.
FINISHED: Tuple[Entry, ...] = (
    Entry("train-00000-of-00001.tfrecord.gz",
          "the record shards, one set per split: gzip TFRecords of "
          "tf.train.Example (or SequenceExample) by default, in the format "
          "--file-format and --tfds choose"),
    Entry(DATASET_JSON,
          "schema, feature spec, split rule, counts per split and shard, "
          "input files (path, bytes, modified) with a fingerprint, options, "
          "version, and the bytes and SHA-256 of every file "
          "(beam-tfrecords verify checks them)"),
    Entry(TFMD_FILE,
          "the schema as TensorFlow Metadata (for TFDV / TFT / TFX; "
          "SequenceExample feature lists in a STRUCT \"##SEQUENCE##\", "
          "tfx-bsl's convention)"),
    Entry(STATISTICS_FILE,
          "the statistics as TFDV's DatasetFeatureStatisticsList, one "
          "dataset per split", "unless --no-statistics"),
    Entry(STATS_STATE_FILE,
          "the statistics before rounding (exact sums, histograms, top "
          "values): what --append merges the new rows' statistics into",
          "unless --no-statistics"),
    Entry(REPORT_FILE,
          "the report: an overview, splits, rejected rows, per-feature "
          "plots (one page, no network)", "unless --no-report"),
    Entry(CARD_FILE,
          "the dataset card: description, license, splits, features, how "
          "to load it"),
    Entry(CROISSANT_FILE,
          "MLCommons Croissant 1.1: every file with its SHA-256, splits, "
          "fields, provenance", "unless --croissant off"),
    Entry(preview_file("train"),
          "each split's first records, decoded: what croissant.json's "
          "records read", "unless --croissant off"),
    Entry(f"{INDEX_DIR}/train-00000-of-00001.tfrecord.gz.index",
          "where each of the shard's gzip members starts (random access; "
          "an uncompressed shard's is DALI's <shard>.idx, where each record "
          "starts)", "for shards whose format has an index, not with "
          "--sink beam"),
    Entry(f"{ERRORS_DIR}/errors-00000-of-00001.jsonl",
          "one JSON object per rejected row: source, row, rows (1), "
          "reason, problems, raw; for a group: group (its key), rows (how "
          "many), kind (rejected | dropped), examples",
          "only when rows were rejected or dropped (on local disk the "
          "folder is there, empty, otherwise)"),
    Entry(ANOMALIES_FILE,
          "the expectations checked and the anomalies found",
          "only when the schema has expect: sections"),
    Entry(f"{TRANSFORMED_DIR}/train-00000-of-00001.tfrecord.gz",
          "TensorFlow Transform's transformed records, and its graph in "
          f"{', '.join(d + '/' for d in TRANSFORM_DIRS)}",
          "only with a transform: section"),
    Entry(", ".join(TFDS_FILES),
          "what TensorFlow Datasets reads beside the shards",
          "only with --tfds"),
    Entry(SUCCESS,
          "written last; without it the folder is not a finished dataset"),
)

# Beside the dataset while a build runs, or left by one that was killed.
BESIDE: Tuple[Entry, ...] = (
    Entry(LOCK_FILE,
          "who builds here (run id, host, pid) and its lease: one build at "
          "a time", "while a build runs"),
    Entry(staging_name("<run>") + "/",
          "the build's files, moved into the folder when it publishes; a "
          "killed build's is finished or removed by the next build",
          "while a build runs"),
    Entry(f"{UNITS_DIR}/",
          "each finished read unit's results (core.unit_cache): what the "
          "same build reuses after a kill or a failed job; removed once "
          "its checks pass, before it publishes",
          "while a build runs (not with --no-resume), or after one was "
          "killed"),
)

# Inside a staging folder, besides the dataset's own files.
STAGED: Tuple[Entry, ...] = (
    Entry(f"{PARTS_DIR}/, {TFT_TEMP_DIR}/",
          "the build's scratch space, removed before it publishes"),
    Entry(f"{JOURNAL}, {ROLLBACK}",
          "the publish's journal (or its undoing's): a kill leaves it for "
          "the next build to finish", "while it publishes"),
    Entry(f"{PREVIOUS}/, {SUCCESS_NEXT}, {ASIDE_DONE}",
          "the old dataset moved aside, the new _SUCCESS, the marker that "
          "the old files are aside", "while it publishes"),
)

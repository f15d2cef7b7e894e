"""The commit phase of a publish (publish.publication): the pipeline's
step that gathers what its writing steps wrote and writes the staged
dataset.json.

A build writes everything into its staging folder inside the output
(`OUTPUT/.staging-<run>/`). `Commit` waits for every shard and error
file (their sinks.parts), checks that the counts add up, and writes the
staged dataset.json, with statistics.pb, anomalies.json and report.html.
The finish step then applies the thresholds (publish.thresholds) and
publishes (publish.finish).
"""

import dataclasses
import itertools
import json
import logging
from typing import (Any, Dict, List, Mapping, Optional, Sequence, Tuple,
                    no_type_check)

import apache_beam as beam

from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.info import (Counts, DatasetInfo, ErrorFile,
                                      ErrorReason, Errors, FeatureStats,
                                      FileSum, IndexInfo, ShardInfo,
                                      SplitInfo, TransformInfo)
from beam_tfrecords.core.layout import (ANOMALIES_FILE, DATASET_JSON,
                                        STATISTICS_FILE, STATS_STATE_FILE,
                                        TRANSFORMED_DIR)
from beam_tfrecords.inspect.expectations import CheckPlan, check_dataset
from beam_tfrecords.publish.append import AppendPlan, appended
from beam_tfrecords.runners.gaps import gather
from beam_tfrecords.sinks.metadata import write_file
from beam_tfrecords.sinks.parts import (ErrorsWritten, FeatureStatistics,
                                        RowCounts, ShardWritten, SplitOverlap,
                                        UnitsRead)
from beam_tfrecords.sinks.shards import finish_shard_names
from beam_tfrecords.sinks.tfdv import statistics_bytes

__all__ = ["Commit", "write_info", "listed_with"]

# Reasons listed in dataset.json (and in a threshold failure), most rows first.
TOP_REASONS = 10


def listed_with(info: DatasetInfo, sums: Mapping[str, FileSum]
                ) -> DatasetInfo:
  """`info` with these files' checksums in its `checksums`."""
  return dataclasses.replace(info, checksums={**(info.checksums or {}),
                                              **sums})


def _top_reasons(error_files: List[ErrorsWritten]) -> Tuple[ErrorReason, ...]:
  merged: Dict[str, list] = {}
  for e in error_files:
    for category, (rows, example) in e.reasons.items():
      entry = merged.setdefault(category, [0, example])
      entry[0] += rows
      if entry[1] is None or (example is not None and _example_key(
          example) < _example_key(entry[1])):
        entry[1] = example
  ranked = sorted(merged.items(), key=lambda kv: (-kv[1][0], kv[0]))
  return tuple(ErrorReason(category, rows, example)
               for category, (rows, example) in ranked[:TOP_REASONS])


def _example_key(example: dict) -> tuple:
  row = example.get("row")
  return (example.get("source") or "", -1 if row is None else row,
          example.get("reason", ""))


def _splits(shards: List[ShardWritten], prefix: str = ""
            ) -> Dict[str, SplitInfo]:
  """The shards (sorted by split and file) by split."""
  splits: Dict[str, SplitInfo] = {}
  for split, group in itertools.groupby(shards, key=lambda s: s.split):
    files = tuple(ShardInfo(prefix + s.file, s.records, s.bytes,
                            IndexInfo(prefix + s.index_file, s.index_bytes,
                                      s.index_sha256) if s.index_file else None,
                            s.sha256 or None)
                  for s in group)
    splits[split] = SplitInfo(split, sum(f.num_records for f in files),
                              sum(f.num_bytes for f in files), files)
  return splits


def _counts(parts: List[Any], stat_fields: Sequence[str],
            record: str) -> Dict[str, int]:
  """The rows' and records' counts summed over the RowCounts parts."""
  counts = dict.fromkeys(stat_fields, 0)
  for p in parts:
    if isinstance(p, RowCounts):
      for k, v in zip(stat_fields, p.counts):
        counts[k] += v
  return counts


def _check_counts(counts: Dict[str, int], written: int,
                  error_rows: int) -> None:
  accounted = counts["rows_written"] + counts["rows_rejected"] + \
      counts["rows_dropped"]
  if (written != counts["records"]
      or error_rows != counts["rows_rejected"] + counts["rows_dropped"]
      or counts["rows_read"] != accounted):
    raise RuntimeError(
        f"the counts do not add up: rows read {counts['rows_read']}, rows in "
        f"records {counts['rows_written']}, rejected "
        f"{counts['rows_rejected']}, dropped {counts['rows_dropped']} "
        f"({error_rows} in errors/); records encoded {counts['records']}, "
        f"{written} in the shard files; not marking the dataset finished")


def _commit(parts: List[Any], directory: str, planned: DatasetInfo,
            stat_fields: Sequence[str],
            checks: Optional[CheckPlan] = None,
            appending: Optional[AppendPlan] = None) -> DatasetInfo:
  """The parts (sinks.parts) -> the staged dataset.json, written, with
  statistics.pb and report.html."""
  shards = sorted(finish_shard_names(directory, [
      p for p in parts if isinstance(p, ShardWritten) and not p.transformed]),
                  key=lambda p: (p.split, p.file))
  transformed = sorted(finish_shard_names(
      FileSystems.join(directory, TRANSFORMED_DIR),
      [p for p in parts if isinstance(p, ShardWritten) and p.transformed]),
                       key=lambda p: (p.split, p.file))
  error_files = sorted((p for p in parts if isinstance(p, ErrorsWritten)),
                       key=lambda p: p.file)
  counts = _counts(parts, stat_fields, planned.record)
  splits = _splits(shards)
  written = sum(s.num_records for s in splits.values())
  transformed_splits = _splits(transformed, TRANSFORMED_DIR + "/")
  if planned.schema.get("transform") is not None:
    # Every encoded record is transformed; the raw ones may not be kept.
    written_transformed = sum(s.num_records
                              for s in transformed_splits.values())
    if written_transformed != counts["records"] or (
        shards and written != counts["records"]):
      raise RuntimeError(
          f"the counts do not add up: records encoded {counts['records']}, "
          f"{written} raw and {written_transformed} transformed in the "
          "shard files; not marking the dataset finished")
    written = counts["records"]
  error_rows = sum(e.rows for e in error_files)
  _check_counts(counts, written, error_rows)
  sequences = planned.record == "sequence_example"
  info = dataclasses.replace(
      planned, splits=splits,
      counts=Counts(counts["rows_read"], counts["rows_written"],
                    counts["rows_rejected"], counts["rows_dropped"], written,
                    counts["steps"] if sequences else None,
                    counts["steps_dropped"] if sequences else None),
      errors=Errors(error_rows, tuple(ErrorFile(e.file, e.lines, e.rows,
                                                e.bytes, e.sha256 or None)
                                      for e in error_files),
                    _top_reasons(error_files)),
      transform=(TransformInfo(transformed_splits) if transformed_splits
                 else None))
  read = [p for p in parts if isinstance(p, UnitsRead)]
  if read and info.inputs is not None:
    # In `inputs`, which the determinism contract exempts: a resumed
    # build's dataset.json differs from a clean one's there only.
    info = dataclasses.replace(info, inputs=dataclasses.replace(
        info.inputs, extra={**info.inputs.extra, "units": _units(read)}))
  described = [p.splits for p in parts if isinstance(p, FeatureStatistics)]
  state = described[0] if described else None
  if appending is not None:
    # The old generation's files, counts and statistics joined.
    info, state = appended(directory, info, state, appending)
  if state is not None:
    info = _with_statistics(directory, info, state)
  if checks is not None:
    info = _checked(directory, info, checks, parts)
  page = _report(directory, info) if info.report else None
  if page is None:
    info = dataclasses.replace(info, report=None)
  elif info.report:
    # The page shows the dataset, not its own checksum: taken from the
    # bytes about to be written. Listed: published with the rest.
    data = page.encode("utf-8")
    info = listed_with(info, {info.report: FileSum.of(data)})
  write_info(directory, info)
  if page is not None and info.report:
    write_file(directory, info.report, page.encode("utf-8"))
  return info


def _with_statistics(directory: str, info: DatasetInfo,
                     state: Dict[str, Dict[str, dict]]) -> DatasetInfo:
  """The statistics of the merge `state` in dataset.json, and written as
  statistics.pb (TensorFlow Data Validation's format, for TFDV and
  Facets) and statistics.state.json (what an --append merges into)."""
  # (no cycle at import)
  from beam_tfrecords.encoding.stats import finish
  from beam_tfrecords.encoding.stats_state import state_json
  info = dataclasses.replace(info, statistics={
      split: {name: FeatureStats.from_json(finish(s))
              for name, s in sorted(features.items())}
      for split, features in sorted(state.items())},
                             tfdv_statistics=STATISTICS_FILE)
  return listed_with(info, {
      STATISTICS_FILE: write_file(directory, STATISTICS_FILE,
                                  statistics_bytes(info, state)),
      STATS_STATE_FILE: write_file(directory, STATS_STATE_FILE,
                                   state_json(state).encode("utf-8"))})


def _checked(directory: str, info: DatasetInfo, checks: CheckPlan,
             parts: List[Any]) -> DatasetInfo:
  """The anomalies of the staged dataset, in dataset.json and
  anomalies.json (the report shows them too)."""
  overlaps = [p for p in parts if isinstance(p, SplitOverlap)]
  checked = check_dataset(
      checks.schema, info, checks.baseline,
      sum(p.records for p in overlaps if p.kind == "records"),
      sum(p.records for p in overlaps if p.kind == "keys"))
  described = checked.described(checks.baseline_path)
  written = write_file(directory, ANOMALIES_FILE, (json.dumps(
      described.to_json(), indent=2, sort_keys=True) + "\n").encode("utf-8"))
  return listed_with(dataclasses.replace(info, anomalies=described),
                     {ANOMALIES_FILE: written})


def write_info(directory: str, info: DatasetInfo) -> None:
  """Writes dataset.json into a (staging) folder."""
  write_file(directory, DATASET_JSON, info.to_text().encode("utf-8"))


def _report(directory: str, info: DatasetInfo) -> Optional[str]:
  """The report page of the staged dataset; a failure to render it is
  logged and the dataset goes without (its data is not at stake)."""
  from beam_tfrecords.inspect.report import render_report  # no cycle at import
  try:
    return render_report(directory, info)
  except Exception as e:  # pylint: disable=broad-except
    logging.getLogger(__name__).warning(
        "the dataset's report could not be made (%s: %s); the dataset is "
        "published without report.html", type(e).__name__, e)
    return None


@no_type_check
def _commit_step(parts, directory, planned, stat_fields, checks, appending):
  """_commit, without annotations: Beam reads a step function's
  annotations as type hints, and makes Beam schemas of the NamedTuples
  among them (CheckPlan), which fails on their dict fields."""
  return _commit(parts, directory, planned, stat_fields, checks, appending)


class Commit(beam.PTransform):
  """Checks the counts and writes dataset.json into the staging directory.

  Args:
    directory: the staging directory.
    planned: dataset.json as known before the run (schema, spec, inputs,
      options, version), with no splits, counts or errors yet.
    stat_fields: the names of the counts in each RowCounts part.
    checks: the schema's expectations and the baseline, when the schema
      has expect: sections (anomalies go into dataset.json, anomalies.json
      and the report).
    appending: --append's plan (publish.append): the published dataset
      the staged one joins.
  """

  def __init__(self, directory: str, planned: DatasetInfo,
               stat_fields: Sequence[str],
               checks: Optional[CheckPlan] = None,
               appending: Optional[AppendPlan] = None):
    super().__init__()
    self._directory = directory
    self._planned = planned
    self._stat_fields = tuple(stat_fields)
    self._checks = checks
    self._appending = appending

  def expand(self, parts: Any) -> Any:
    return (parts
            # sinks.parts: ShardWritten, ErrorsWritten, RowCounts (in
            # `stat_fields` order), FeatureStatistics
            | "Gather" >> gather()
            # [part, ...] (one element)
            | "WriteMetadata" >> beam.Map(_commit_step, self._directory,
                                          self._planned, self._stat_fields,
                                          self._checks, self._appending
                                          ).with_output_types(Any))


def _units(read: List[UnitsRead]) -> Dict[str, int]:
  """dataset.json's inputs.units: read units (and a grouped build's
  buckets), and how many were reused."""
  units = {"read": sum(p.units for p in read),
           "reused": sum(p.reused for p in read)}
  buckets = sum(p.buckets for p in read)
  if buckets:
    units.update(buckets=buckets,
                 buckets_reused=sum(p.buckets_reused for p in read))
  return units

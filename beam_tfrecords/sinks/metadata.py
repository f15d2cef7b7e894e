"""The dead-letter files, dataset.json and _SUCCESS.

`Commit` runs last in the pipeline: it waits for every shard and error file,
checks that the counts add up (rows read = records written + rows
rejected), writes dataset.json, then _SUCCESS. A run that fails before it
leaves no _SUCCESS.
"""

import json
from typing import Any, Dict, List

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

__all__ = ["WriteErrors", "Commit", "DATASET_JSON", "SUCCESS", "ERRORS_DIR"]

DATASET_JSON = "dataset.json"
SUCCESS = "_SUCCESS"
ERRORS_DIR = "errors"


def _count_lines(path: str) -> dict:
  """Lines and the input rows they account for (a group line holds many)."""
  lines = rows = 0
  with FileSystems.open(path) as f:
    for line in f:
      if line.strip():
        lines += 1
        rows += json.loads(line).get("rows", 1)
  return {"kind": "errors", "file": f"{ERRORS_DIR}/{path.rsplit('/', 1)[-1]}",
          "lines": lines, "rows": rows}


class WriteErrors(beam.PTransform):
  """Writes dead-letter JSON lines to OUTPUT/errors/; outputs file infos."""

  def __init__(self, output: str):
    super().__init__()
    self._output = output

  def expand(self, lines):
    return (lines
            # str (one JSON object)
            | "Write" >> beam.io.WriteToText(
                FileSystems.join(self._output, ERRORS_DIR, "errors"),
                file_name_suffix=".jsonl")
            # final file path
            | "CountRows" >> beam.Map(_count_lines))


def _write_text(path: str, text: str) -> None:
  with FileSystems.create(path) as f:
    f.write(text.encode("utf-8"))


def _commit(parts: List[dict], output: str, static: Dict[str, Any],
            stat_fields) -> dict:
  shards = sorted((p for p in parts if p.get("kind") == "shard"),
                  key=lambda p: (p["split"], p["file"]))
  error_files = sorted((p for p in parts if p.get("kind") == "errors"),
                       key=lambda p: p["file"])
  counts = dict.fromkeys(stat_fields, 0)
  for p in parts:
    if p.get("kind") == "stats":
      for k, v in zip(stat_fields, p["counts"]):
        counts[k] += v
  splits: Dict[str, dict] = {}
  for s in shards:
    split = splits.setdefault(s["split"], {"records": 0, "bytes": 0,
                                           "shards": []})
    split["records"] += s["records"]
    split["bytes"] += s["bytes"]
    split["shards"].append({"file": s["file"], "records": s["records"],
                            "bytes": s["bytes"]})
  written = sum(s["records"] for s in splits.values())
  error_rows = sum(e["rows"] for e in error_files)
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
  meta = dict(static)
  meta["counts"] = {"rows_read": counts["rows_read"],
                    "rows_written": counts["rows_written"],
                    "rows_rejected": counts["rows_rejected"],
                    "rows_dropped": counts["rows_dropped"],
                    "records_written": written}
  if static.get("record") == "sequence_example":
    meta["counts"]["steps_written"] = counts["steps"]
    meta["counts"]["steps_dropped"] = counts["steps_dropped"]
  meta["splits"] = splits
  meta["errors"] = {"rows": error_rows, "files": [
      {"file": e["file"], "lines": e["lines"], "rows": e["rows"]}
      for e in error_files]}
  _write_text(FileSystems.join(output, DATASET_JSON),
              json.dumps(meta, indent=2, sort_keys=True) + "\n")
  _write_text(FileSystems.join(output, SUCCESS), "")
  return meta


class Commit(beam.PTransform):
  """Checks the counts, writes dataset.json, then _SUCCESS.

  Args:
    output: the dataset directory.
    static: the parts of dataset.json known before the run (schema, spec,
      inputs, options, version).
  """

  def __init__(self, output: str, static: Dict[str, Any], stat_fields):
    super().__init__()
    self._output = output
    self._static = static
    self._stat_fields = tuple(stat_fields)

  def expand(self, parts):
    return (parts
            # {"kind": "shard" | "errors" | "stats", ...}; stats carry
            # "counts", a tuple in `stat_fields` order
            | "Gather" >> beam.combiners.ToList()
            # [part, ...] (one element)
            | "WriteMetadata" >> beam.Map(_commit, self._output, self._static,
                                          self._stat_fields))

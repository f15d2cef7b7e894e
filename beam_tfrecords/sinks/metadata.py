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
  with FileSystems.open(path) as f:
    rows = sum(1 for line in f if line.strip())
  return {"kind": "errors", "file": f"{ERRORS_DIR}/{path.rsplit('/', 1)[-1]}",
          "rows": rows}


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


def _commit(parts: List[dict], output: str, static: Dict[str, Any]) -> dict:
  shards = sorted((p for p in parts if p.get("kind") == "shard"),
                  key=lambda p: (p["split"], p["file"]))
  error_files = sorted((p for p in parts if p.get("kind") == "errors"),
                       key=lambda p: p["file"])
  stats = [p for p in parts if p.get("kind") == "stats"]
  rows_read = sum(s["rows_read"] for s in stats)
  rejected = sum(s["rejected"] for s in stats)
  encoded = sum(s["records"] for s in stats)
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
  if written != encoded or error_rows != rejected or \
      rows_read != written + error_rows:
    raise RuntimeError(
        f"the counts do not add up: rows read {rows_read}, records encoded "
        f"{encoded} but {written} in the shard files, rows rejected "
        f"{rejected} but {error_rows} in errors/; not marking the dataset "
        "finished")
  meta = dict(static)
  meta["counts"] = {"rows_read": rows_read, "records_written": written,
                    "rows_rejected": error_rows}
  meta["splits"] = splits
  meta["errors"] = {"rows": error_rows, "files": [
      {"file": e["file"], "rows": e["rows"]} for e in error_files]}
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

  def __init__(self, output: str, static: Dict[str, Any]):
    super().__init__()
    self._output = output
    self._static = static

  def expand(self, parts):
    return (parts
            # {"kind": "shard" | "errors" | "stats", ...}
            | "Gather" >> beam.combiners.ToList()
            # [part, ...] (one element)
            | "WriteMetadata" >> beam.Map(_commit, self._output, self._static))

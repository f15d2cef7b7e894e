"""beam_tfrecords/core/info.py, on values: dataset.json as typed values:
`DatasetInfo` and its parts."""

import json

from beam_tfrecords.core.info import DatasetInfo, ShardInfo, SplitInfo


def test_unknown_keys_are_kept():
  text = json.dumps({
      "name": "x", "record": "example", "schema": {}, "feature_spec": {},
      "inputs": {"format": "csv", "patterns": ["x.csv"], "files": [
          {"path": "/d/x.csv", "bytes": 3, "modified": 1.5,
           "sha256": "ab"}],
                 "fingerprint": "f"},
      "options": {"num_shards": {"train": 1},
                  "max_shard_bytes": {"train": None}, "sink": "beam",
                  "shuffle_seed": None, "shuffle_buckets": None,
                  "gzip_level": None, "statistics": False,
                  "max_bad_rows": None, "max_bad_fraction": None,
                  "preprocess": None, "format_options": {},
                  "later_option": 262144},
      "split_rule": {"kind": "none", "splits": ["train"]},
      "tool": {"name": "t", "version": "0", "commit": "c"},
      "statistics": {"train": {"x": {"present": 1, "missing": 0,
                                     "values": 1, "later_stat": [5]}}},
      "splits": {"train": {"records": 1, "bytes": 9, "shards": [
          {"file": "train-00000-of-00001.tfrecord.gz", "records": 1,
           "bytes": 9}]}},
      "counts": {"rows_read": 1, "rows_written": 1, "rows_rejected": 0,
                 "rows_dropped": 0, "records_written": 1},
      "errors": {"rows": 0, "files": [], "reasons": []},
      "from_a_later_version": {"k": [1, 2]}}, indent=2, sort_keys=True) + "\n"
  info = DatasetInfo.from_json(json.loads(text))
  assert info.extra == {"from_a_later_version": {"k": [1, 2]}}
  # Unknown keys inside the typed parts are kept too.
  assert info.options.extra == {"later_option": 262144}
  assert info.inputs.files[0].extra == {"sha256": "ab"}
  assert info.tool.extra == {"commit": "c"}
  assert info.statistics["train"]["x"].extra == {"later_stat": [5]}
  assert info.to_text() == text
  assert info.splits["train"] == SplitInfo("train", 1, 9, (ShardInfo(
      "train-00000-of-00001.tfrecord.gz", 1, 9),))

"""Finished datasets made by hand, without a build, for the unit tests of
what reads or publishes one (tests/unit/read, tests/unit/publish).

A folder holds what a build of the deterministic sink writes for its
records: gzip TFRecord shards made of self-describing members
(core.members), each with its index (core.shard_index), errors/,
dataset.json through DatasetInfo (so of the shape a build writes) and
_SUCCESS. The records are tf.train.Examples serialized by TensorFlow's own
protos, not by our encoder, so a test's expected values are the ones it
put in.
"""

import hashlib
import json
import os
import zlib
from typing import Any, Dict, List, Mapping, Optional, Sequence

# TensorFlow's own protos (imported with the test module: a unit test
# may not start the child process TensorFlow's first import does).
from tensorflow.core.example import example_pb2, feature_pb2

import beam_tfrecords as btr
from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.core.members import member, member_table
from beam_tfrecords.core.shard_index import ShardIndex
from beam_tfrecords.core.tfrecord_files import frame_records
from beam_tfrecords.publish.journal import publish
from beam_tfrecords.schema.spec import spec_to_json

# A publish's _SUCCESS: the tool, its version, the build key, the run id.
SUCCESS_TEXT = "beam-tfrecords 0.1.0 0123456789abcdef0123456789abcdef " \
    "1d98dad27dc6\n"


def _feature(values):
  if all(isinstance(v, bool) or isinstance(v, int) for v in values) and \
      values:
    return feature_pb2.Feature(int64_list=feature_pb2.Int64List(
        value=values))
  if any(isinstance(v, float) for v in values):
    return feature_pb2.Feature(float_list=feature_pb2.FloatList(
        value=values))
  return feature_pb2.Feature(bytes_list=feature_pb2.BytesList(value=[
      v.encode("utf-8") if isinstance(v, str) else v for v in values]))


def example(features: Mapping[str, Sequence[Any]]) -> bytes:
  """A tf.train.Example of {name: [values]} (ints: int64_list, floats:
  float_list, str and bytes: bytes_list; [] an empty bytes_list),
  serialized by TensorFlow's protos."""
  out = example_pb2.Example()
  for name, values in features.items():
    out.features.feature[name].CopyFrom(_feature(list(values)))
  return out.SerializeToString()


def sequence_example(context: Mapping[str, Sequence[Any]],
                     lists: Mapping[str, Sequence[Sequence[Any]]]) -> bytes:
  """A tf.train.SequenceExample: context {name: [values]}, feature lists
  {name: [[values] per step]}."""
  out = example_pb2.SequenceExample()
  for name, values in context.items():
    out.context.feature[name].CopyFrom(_feature(list(values)))
  for name, steps in lists.items():
    for values in steps:
      out.feature_lists.feature_list[name].feature.add().CopyFrom(
          _feature(list(values)))
  return out.SerializeToString()


def gzip_shard(records: Sequence[bytes], per_member: int = 2):
  """(shard bytes, index bytes): the records as gzip members of at most
  `per_member` records each, as the deterministic sink writes them (an
  empty shard is one empty member)."""
  groups = [records[i:i + per_member]
            for i in range(0, len(records), per_member)] or [[]]
  members = []
  for group in groups:
    framed = frame_records(list(group))
    deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
    members.append(member(deflater.compress(framed) + deflater.flush(),
                          framed, len(group)))
  data = b"".join(members)
  index = ShardIndex.from_members(
      member_table(data), hashlib.sha256(members[0]).digest(),
      hashlib.sha256(members[-1]).digest())
  return data, index.to_bytes()


def _sum(data: bytes) -> Dict[str, Any]:
  return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _write(path: str, data: bytes) -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(data)


def dataset_meta(schema: Mapping[str, Any],
                 splits: Mapping[str, List[Dict[str, Any]]],
                 errors: Sequence[Dict[str, Any]] = (),
                 error_rows: int = 0) -> Dict[str, Any]:
  """dataset.json's object for these shard entries ({split: [shard]})
  and errors/ file entries, as a build writes it."""
  parsed = btr.load_schema(dict(schema))
  written = sum(s["records"] for shards in splits.values() for s in shards)
  return DatasetInfo.from_json({
      "name": parsed.name, "record": parsed.record.value,
      "compression": "GZIP",
      "splits": {name: {"records": sum(s["records"] for s in shards),
                        "bytes": sum(s["bytes"] for s in shards),
                        "shards": shards}
                 for name, shards in splits.items()},
      "counts": {"rows_read": written + error_rows, "rows_written": written,
                 "rows_rejected": error_rows, "rows_dropped": 0,
                 "records_written": written},
      "errors": {"rows": error_rows, "files": list(errors), "reasons": []},
      "schema": parsed.to_dict(), "feature_spec": spec_to_json(parsed),
      "inputs": {"format": "csv", "patterns": ["in.csv"]},
      "options": {"num_shards": {n: len(s) for n, s in splits.items()},
                  "max_shard_bytes": {n: None for n in splits},
                  "sink": "deterministic"},
      "split_rule": {"kind": "none" if len(splits) == 1 else "hash",
                     "splits": list(splits)},
      "tool": {"name": "beam-tfrecords", "version": "0.1.0"},
      **({"label": list(parsed.label)} if parsed.label else {}),
  }).to_json()


def write_dataset(folder: str, schema: Mapping[str, Any],
                  splits: Mapping[str, Sequence[Sequence[bytes]]],
                  errors: Sequence[Dict[str, Any]] = (),
                  success: Optional[str] = SUCCESS_TEXT,
                  per_member: int = 2) -> str:
  """A finished dataset in `folder`: `splits` gives each split's shards'
  records ({split: [[record] per shard]}), `errors` the dead-letter
  entries (one errors/ file); `success` None leaves _SUCCESS out (a
  build that did not finish). Returns the folder."""
  entries: Dict[str, List[Dict[str, Any]]] = {}
  for split, shards in splits.items():
    entries[split] = []
    for i, records in enumerate(shards):
      name = f"{split}-{i:05d}-of-{len(shards):05d}.tfrecord.gz"
      data, index = gzip_shard(list(records), per_member)
      _write(os.path.join(folder, name), data)
      _write(os.path.join(folder, "index", name + ".index"), index)
      entries[split].append({
          "file": name, "records": len(records), **_sum(data),
          "index": {"file": f"index/{name}.index", **_sum(index)}})
  files = []
  if errors:
    text = "".join(json.dumps(e, sort_keys=True) + "\n"
                   for e in errors).encode("utf-8")
    name = "errors/errors-00000-of-00001.jsonl"
    _write(os.path.join(folder, name), text)
    files.append({"file": name, "lines": len(errors),
                  "rows": sum(e.get("rows", 1) for e in errors),
                  **_sum(text)})
  os.makedirs(os.path.join(folder, "errors"), exist_ok=True)
  meta = dataset_meta(schema, entries, files,
                      sum(f["rows"] for f in files))
  _write(os.path.join(folder, "dataset.json"),
         DatasetInfo.from_json(meta).to_text().encode("utf-8"))
  if success is not None:
    _write(os.path.join(folder, "_SUCCESS"), success.encode("utf-8"))
  return folder


def publish_over(folder: str, schema: Mapping[str, Any],
                 splits: Mapping[str, Sequence[Sequence[bytes]]],
                 run: str = "abcdefabcdef") -> str:
  """Another dataset published over the one in `folder` as a build does
  it (staged, then publish.journal's switch: files renamed over the old
  names, a new _SUCCESS last), by the build `run`; its _SUCCESS text."""
  staging = os.path.join(folder, ".staging-" + run)
  write_dataset(staging, schema, splits, success=None)
  with open(os.path.join(staging, "dataset.json"), encoding="utf-8") as f:
    meta = json.load(f)
  success = SUCCESS_TEXT.replace("1d98dad27dc6", run)
  publish(staging, folder, meta, success)
  return success

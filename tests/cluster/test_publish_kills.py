"""An overwrite on S3 killed at any file operation of its publish ends
whole (issue 17)."""

import json

import pytest

from beam_tfrecords.publish import file_ops, journal as publishing
from beam_tfrecords.publish.lock import OutputLock

from tests.helpers.publish_kills import STAGING, Killed, _kill_at


# --- The same on S3, where a rename is a copy and a delete ----------------

def _s3_prepared(client, datasets, prefix):
  for page in client.get_paginator("list_objects_v2").paginate(
      Bucket="datasets", Prefix=prefix):
    for o in page.get("Contents", []):
      client.delete_object(Bucket="datasets", Key=o["Key"])
  for rel, data in datasets["old"]["files"].items():
    client.put_object(Bucket="datasets", Key=f"{prefix}/{rel}", Body=data)
  client.put_object(Bucket="datasets", Key=f"{prefix}/notes.txt",
                    Body=b"someone else's")
  for rel, data in datasets["new"]["files"].items():
    if rel != "_SUCCESS":
      client.put_object(Bucket="datasets",
                        Key=f"{prefix}/{STAGING}/{rel}", Body=data)


def _s3_files(client, prefix) -> dict:
  found = {}
  for page in client.get_paginator("list_objects_v2").paginate(
      Bucket="datasets", Prefix=prefix + "/"):
    for o in page.get("Contents", []):
      found[o["Key"][len(prefix) + 1:]] = client.get_object(
          Bucket="datasets", Key=o["Key"])["Body"].read()
  return found


def test_an_overwrite_on_s3_killed_anywhere_ends_whole(s3, datasets,
                                                       monkeypatch):
  import boto3
  from apache_beam.io.filesystems import FileSystems
  from apache_beam.options.pipeline_options import PipelineOptions
  from tests.helpers.s3 import s3_beam_args
  client = boto3.client("s3", endpoint_url=s3)
  client.create_bucket(Bucket="datasets")
  options = PipelineOptions(s3_beam_args(s3))
  FileSystems.set_options(options)
  out = "s3://datasets/ds"
  meta = json.loads(datasets["new"]["files"]["dataset.json"])
  success = datasets["new"]["files"]["_SUCCESS"].decode()
  expected = dict(datasets["new"]["files"],
                  **{"notes.txt": b"someone else's"})

  def recover():
    with OutputLock(out, options):
      publishing.recover(out, keep="")

  # A move cut short after its copy (both copies there), for every file.
  real_move = file_ops.move

  # Before the journal (0-2), then every other operation of the switch
  # (the local test above takes every one).
  for k in [0, 2] + list(range(3, 21, 2)):
    _s3_prepared(client, datasets, "ds")
    monkeypatch.setattr(file_ops, "before_operation", _kill_at(k)[0])
    with pytest.raises(Killed):
      publishing.publish(f"{out}/{STAGING}", out, meta, success)
    monkeypatch.setattr(file_ops, "before_operation", None)
    if k in (3, 7, 11, 15):  # then a move that copied and was killed
      def half(src, dst):
        FileSystems.copy([src], [dst])
        raise Killed(src)
      monkeypatch.setattr(file_ops, "move", half)
      with pytest.raises(Killed):
        recover()
      monkeypatch.setattr(file_ops, "move", real_move)
    recover()
    assert _s3_files(client, "ds") == (
        expected if k > 2 else dict(datasets["old"]["files"],
                                **{"notes.txt": b"someone else's"})), k

"""gs:// against a real GCS API server on 127.0.0.1 (fsouza/fake-gcs-server,
built by `make cluster-tools`): a build publishes into a bucket, reads
back, verifies, is up to date when run again, appends, and keeps and
reuses its units in a --cache on the bucket (issues 62 and 63)."""

import json
import os
import subprocess
import urllib.request

import pytest

import beam_tfrecords as btr
from beam_tfrecords.testing.portable import free_port, wait_for_port
from beam_tfrecords.testing.tools import fake_gcs_binary

from tests.cluster.engine_builds import tool
from tests.helpers.shard_size import _csv

SCHEMA = {"name": "events",
          "features": {"id": {"type": "int64", "required": True},
                       "text": "string"},
          "splits": {"hash": "id", "weights": {"train": 3, "test": 1}}}


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
  """fake-gcs-server on 127.0.0.1 (its URL), in memory; Beam's and
  google-cloud-storage's clients pointed at it (STORAGE_EMULATOR_HOST);
  stopped afterwards. Skipped where Go is missing, unless
  BTR_REQUIRE_CLUSTERS=1 (CI)."""
  binary = tool(fake_gcs_binary)
  port = free_port()
  log = open(tmp_path_factory.mktemp("gcs") / "server.log", "w")
  server = subprocess.Popen(
      [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
       "-backend", "memory", "-log-level", "error"],
      stdout=log, stderr=subprocess.STDOUT)
  wait_for_port(port, server, "fake-gcs-server", 30)
  url = f"http://127.0.0.1:{port}"
  old = os.environ.get("STORAGE_EMULATOR_HOST")
  os.environ["STORAGE_EMULATOR_HOST"] = url
  try:
    yield url
  finally:
    server.terminate()
    server.wait(10)
    log.close()
    if old is None:
      del os.environ["STORAGE_EMULATOR_HOST"]
    else:
      os.environ["STORAGE_EMULATOR_HOST"] = old


def _bucket(url, name):
  request = urllib.request.Request(
      f"{url}/storage/v1/b?project=test", method="POST",
      data=json.dumps({"name": name}).encode(),
      headers={"Content-Type": "application/json"})
  with urllib.request.urlopen(request, timeout=30) as reply:
    assert reply.status == 200


def _names(url, bucket, prefix):
  """The object names under gs://bucket/prefix (the JSON API's list)."""
  with urllib.request.urlopen(f"{url}/storage/v1/b/{bucket}/o?prefix="
                              f"{prefix}", timeout=30) as reply:
    return sorted(o["name"] for o in json.load(reply).get("items", []))


def _values(dataset, split):
  return sorted((r["id"], r["text"]) for r in btr.iter_records(
      dataset, split=split))


def test_a_build_into_gcs_publishes_verifies_appends_and_reuses(
    gcs, tmp_path, monkeypatch):
  monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
  _bucket(gcs, "btr")
  days = [_csv(tmp_path / f"day{k}.csv", 1500, offset=k * 1500, seed=k)
          for k in range(3)]
  out = "gs://btr/out"
  first = btr.build(SCHEMA, days[:2], out, num_shards=2)
  assert first.info.counts.rows_written == 3000
  assert len(_values(out, "train")) + len(_values(out, "test")) == 3000
  assert btr.verify(out).ok
  assert btr.build(SCHEMA, days[:2], out, num_shards=2).up_to_date
  # --append: the old shards copied by the bucket under their new names.
  btr.build(SCHEMA, days[2:], out, num_shards=2, append=True)
  clean = "gs://btr/clean"
  btr.build(SCHEMA, days, clean, num_shards=2)
  appended, whole = btr.dataset_info(out), btr.dataset_info(clean)
  assert [s.file for s in appended.splits["train"].shards] == [
      f"train-{i:05d}-of-00004.tfrecord.gz" for i in range(4)]
  assert appended.counts == whole.counts
  assert appended.statistics == whole.statistics
  for split in ("train", "test"):
    assert _values(out, split) == _values(clean, split)
  assert btr.verify(out).ok
  # --cache on the bucket: a rebuild reuses every unit, the same shards.
  cache = "gs://btr/cache"
  filled = btr.build(SCHEMA, days, "gs://btr/cached", num_shards=2,
                     cache=cache)
  assert filled.info.inputs.extra["units"] == {"read": 3, "reused": 0}
  again = btr.build(SCHEMA, days, "gs://btr/cached", num_shards=2,
                    cache=cache, overwrite=True, force=True)
  assert again.info.inputs.extra["units"] == {"read": 3, "reused": 3}
  assert [(s.file, s.sha256) for s in again.info.splits["train"].shards] \
      == [(s.file, s.sha256) for s in whole.splits["train"].shards]
  # No staging folder, part file or output .units/ is left behind.
  for prefix in ("out/", "clean/", "cached/"):
    names = _names(gcs, "btr", prefix)
    assert f"{prefix}_SUCCESS" in names
    assert not [n for n in names if "/.staging-" in n or "/.units/" in n
                or n.endswith(".lock")], names

"""Resume, --cache and --append on S3 (issue 62), on a real S3-compatible
server (moto's, on 127.0.0.1): units kept on the bucket, a killed CLI
build's rerun reusing them, and an append whose old shards the bucket
copies under their new names."""

import os
import subprocess
import sys

import pytest

import beam_tfrecords as btr

from tests.helpers.s3 import s3_beam_args


boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto")


def _s3_inputs(client, tmp_path, bucket, n, rows):
  """n CSV inputs of `rows` rows each on s3://bucket/in/."""
  from tests.helpers.shard_size import _csv
  client.create_bucket(Bucket=bucket)
  paths = []
  for k in range(n):
    local = tmp_path / f"in{k:02d}.csv"
    _csv(local, rows)
    client.put_object(Bucket=bucket, Key=f"in/in{k:02d}.csv",
                      Body=local.read_bytes())
    paths.append(f"s3://{bucket}/in/in{k:02d}.csv")
  return paths


def _download(client, bucket, prefix, folder):
  """The objects under s3://bucket/prefix/ as files under `folder`."""
  for page in client.get_paginator("list_objects_v2").paginate(
      Bucket=bucket, Prefix=prefix + "/"):
    for o in page.get("Contents", []):
      path = folder / o["Key"][len(prefix) + 1:]
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_bytes(client.get_object(Bucket=bucket,
                                         Key=o["Key"])["Body"].read())
  return str(folder)


def _keys(client, bucket, prefix):
  return sorted(o["Key"] for page in client.get_paginator(
      "list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
                for o in page.get("Contents", []))


def test_cache_on_s3_reuses_what_did_not_change(s3, tmp_path, monkeypatch):
  """--cache s3://...: a rebuild with one more input computes that input
  only, a damaged entry is computed again, and both publish what a clean
  build does."""
  from tests.helpers.datasets import assert_same_but_units
  from tests.helpers.shard_size import SCHEMA
  monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # croissant.json
  client = boto3.client("s3", endpoint_url=s3)
  inputs = _s3_inputs(client, tmp_path, "cache-raw", 3, 3000)
  client.create_bucket(Bucket="cache-out")
  args = dict(beam_args=s3_beam_args(s3), num_shards=2)
  btr.build(SCHEMA, inputs, "s3://cache-out/clean", resume=False, **args)
  cache = "s3://cache-out/units"
  first = btr.build(SCHEMA, inputs[:2], "s3://cache-out/more", cache=cache,
                    **args)
  assert first.info.inputs.extra["units"] == {"read": 2, "reused": 0}
  kept = _keys(client, "cache-out", "units/")
  assert sum(k.endswith("/unit.json") for k in kept) == 2
  more = btr.build(SCHEMA, inputs, "s3://cache-out/more", cache=cache,
                   overwrite=True, **args)
  assert more.info.inputs.extra["units"] == {"read": 3, "reused": 2}
  clean = _download(client, "cache-out", "clean", tmp_path / "clean")
  assert_same_but_units(clean, _download(client, "cache-out", "more",
                                         tmp_path / "more"))
  # One kept part file cut short: that unit is a miss, computed again.
  part = next(k for k in _keys(client, "cache-out", "units/")
              if k.endswith(".part"))
  body = client.get_object(Bucket="cache-out", Key=part)["Body"].read()
  client.put_object(Bucket="cache-out", Key=part, Body=body[:-1])
  again = btr.build(SCHEMA, inputs, "s3://cache-out/again", cache=cache,
                    **args)
  assert again.info.inputs.extra["units"] == {"read": 3, "reused": 2}
  assert_same_but_units(clean, _download(client, "cache-out", "again",
                                         tmp_path / "again"))
  # The cache command lists and clears a folder on the bucket.
  cli = [sys.executable, "-m", "beam_tfrecords", "cache", cache,
         *s3_beam_args(s3)]
  listed = subprocess.run(cli, capture_output=True, text=True, timeout=300)
  assert listed.returncode == 0, listed.stderr[-2000:]
  assert listed.stdout.startswith(f"{cache}: 3 unit(s), 3 batch(es), ")
  cleared = subprocess.run(cli + ["--clear"], capture_output=True,
                           text=True, timeout=300)
  assert cleared.returncode == 0, cleared.stderr[-2000:]
  assert cleared.stdout.startswith(f"{cache}: cleared, ")
  assert not _keys(client, "cache-out", "units/")


def test_a_killed_build_on_s3_reuses_its_finished_units(s3, tmp_path,
                                                       monkeypatch):
  """kill -9 once some units are finished in the output's .units/ on the
  bucket; the same command reuses them, publishes what an uninterrupted
  build does and leaves no .units/."""
  import json
  import signal
  import time
  from tests.helpers.datasets import assert_same_but_units
  from tests.helpers.shard_size import SCHEMA
  monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # croissant.json
  client = boto3.client("s3", endpoint_url=s3)
  inputs = _s3_inputs(client, tmp_path, "killed-raw", 12, 20_000)
  client.create_bucket(Bucket="killed-out")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  schema = tmp_path / "schema.json"
  schema.write_text(json.dumps(SCHEMA))
  command = [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
             str(schema), "--output", "s3://killed-out/out", "--num-shards",
             "2", "--direct_num_workers=1", *s3_beam_args(s3)]
  for path in inputs:
    command += ["--input", path]
  build = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)

  def finished():
    return sum(k.endswith("/unit.json")
               for k in _keys(client, "killed-out", "out/.units/"))
  deadline = time.time() + 300
  while time.time() < deadline and build.poll() is None:
    if finished() >= 3:
      break
    time.sleep(0.1)
  assert build.poll() is None, "the build ended before it was killed"
  build.send_signal(signal.SIGKILL)
  build.wait(60)
  done = finished()
  assert 3 <= done < 12
  assert "out/_SUCCESS" not in _keys(client, "killed-out", "out/")
  rerun = subprocess.run(command, env=env, capture_output=True, text=True,
                         timeout=600)
  assert rerun.returncode == 0, rerun.stderr
  meta = json.loads(client.get_object(
      Bucket="killed-out", Key="out/dataset.json")["Body"].read())
  assert meta["inputs"]["units"]["read"] == 12
  assert meta["inputs"]["units"]["reused"] >= done
  assert not _keys(client, "killed-out", "out/.units/")
  whole = btr.build(SCHEMA, inputs, "s3://killed-out/whole", num_shards=2,
                    resume=False, beam_args=s3_beam_args(s3))
  assert whole.info.counts.rows_written == 12 * 20_000
  assert_same_but_units(
      _download(client, "killed-out", "whole", tmp_path / "whole"),
      _download(client, "killed-out", "out", tmp_path / "out"))


def test_append_on_s3_adds_shards_as_a_clean_build_holds_them(s3, tmp_path,
                                                             monkeypatch):
  """--append into s3://: the old shards copied by the store under their
  new names, the new ones after them; records, counts and statistics as
  a clean build of all the inputs."""
  import json
  from beam_tfrecords.read.stream import RecordStream
  from tests.helpers.shard_size import SCHEMA
  monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # croissant.json
  client = boto3.client("s3", endpoint_url=s3)
  inputs = _s3_inputs(client, tmp_path, "append-raw", 3, 2000)
  client.create_bucket(Bucket="append-out")
  args = dict(beam_args=s3_beam_args(s3), num_shards=2)
  btr.build(SCHEMA, inputs[:2], "s3://append-out/out", **args)
  btr.build(SCHEMA, inputs[2:], "s3://append-out/out", append=True, **args)
  btr.build(SCHEMA, inputs, "s3://append-out/clean", **args)
  out = _download(client, "append-out", "out", tmp_path / "out")
  clean = _download(client, "append-out", "clean", tmp_path / "clean")
  assert sorted(n for n in os.listdir(out) if n.endswith(".tfrecord.gz")) \
      == [f"train-{i:05d}-of-00004.tfrecord.gz" for i in range(4)]
  assert sorted(RecordStream(out, "train")) == \
      sorted(RecordStream(clean, "train"))
  a, b = (json.load(open(os.path.join(d, "dataset.json")))
          for d in (out, clean))
  assert a["counts"] == b["counts"] and a["statistics"] == b["statistics"]
  assert btr.verify("s3://append-out/out", beam_args=s3_beam_args(s3)).ok
  assert not [k for k in _keys(client, "append-out", "out/")
              if "/.staging-" in k]


def test_a_local_cache_serves_an_output_on_s3(s3, tmp_path, monkeypatch):
  """--cache on local disk, output on the bucket: part files are streamed
  across both ways (kept from the bucket's staging folder, served into
  it), a reused unit publishes what a clean build does, and a kept part
  file damaged in place (same size: the bucket's own check is the size)
  is caught by its CRC-32 in the store and computed again."""
  from tests.helpers.datasets import assert_same_but_units
  from tests.helpers.shard_size import SCHEMA
  monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # croissant.json
  client = boto3.client("s3", endpoint_url=s3)
  inputs = _s3_inputs(client, tmp_path, "local-cache-raw", 3, 3000)
  client.create_bucket(Bucket="local-cache-out")
  args = dict(beam_args=s3_beam_args(s3), num_shards=2)
  cache = str(tmp_path / "cache")
  btr.build(SCHEMA, inputs, "s3://local-cache-out/clean", resume=False,
            **args)
  clean = _download(client, "local-cache-out", "clean", tmp_path / "clean")
  first = btr.build(SCHEMA, inputs[:2], "s3://local-cache-out/more",
                    cache=cache, **args)
  assert first.info.inputs.extra["units"] == {"read": 2, "reused": 0}
  parts = sorted(str(p) for p in (tmp_path / "cache").rglob("*.part"))
  assert len(parts) == 2
  more = btr.build(SCHEMA, inputs, "s3://local-cache-out/more", cache=cache,
                   overwrite=True, **args)
  assert more.info.inputs.extra["units"] == {"read": 3, "reused": 2}
  assert_same_but_units(clean, _download(client, "local-cache-out", "more",
                                         tmp_path / "more"))
  data = bytearray(open(parts[0], "rb").read())
  data[len(data) // 2] ^= 0x40
  open(parts[0], "wb").write(bytes(data))  # (the same size)
  again = btr.build(SCHEMA, inputs, "s3://local-cache-out/again",
                    cache=cache, **args)
  assert again.info.inputs.extra["units"] == {"read": 3, "reused": 2}
  assert_same_but_units(clean, _download(client, "local-cache-out", "again",
                                         tmp_path / "again"))
  assert not [k for k in _keys(client, "local-cache-out", "again/")
              if "/.staging-" in k or "kept-" in k]


def test_grouped_units_kept_on_s3_from_a_local_output(s3, tmp_path,
                                                      monkeypatch):
  """Grouped SequenceExamples, a local output whose steps are spilled to
  files, --cache on the bucket: a kept unit's spilled steps go into the
  store as bytes (a bucket cannot hold a link), its kept parts are
  fetched from the bucket to local disk and checked there, and a rebuild
  with one more input reuses the others and publishes what a clean build
  does."""
  from beam_tfrecords.transforms import grouped  # pylint: disable=import-outside-toplevel
  from tests.e2e.test_resume_grouped import OPTS, SCHEMA, _inputs
  from tests.e2e.test_resume import _files, _units
  monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # croissant.json
  monkeypatch.setattr(grouped, "SPILL_BYTES", 0)
  client = boto3.client("s3", endpoint_url=s3)
  client.create_bucket(Bucket="grouped-cache")
  inputs = _inputs(tmp_path, 4)
  cache = "s3://grouped-cache/units"
  args = dict(OPTS, beam_args=s3_beam_args(s3))
  btr.build(SCHEMA, inputs[:3], str(tmp_path / "a"), cache=cache, **args)
  kept = _keys(client, "grouped-cache", "units/")
  assert sum(k.endswith("/unit.json") for k in kept) > 3  # (and buckets)
  assert not [k for k in kept if k.endswith(".file")]
  out = str(tmp_path / "b")
  btr.build(SCHEMA, inputs, out, cache=cache, **args)
  assert {k: v for k, v in _units(out).items()
          if k in ("read", "reused")} == {"read": 4, "reused": 3}
  clean = str(tmp_path / "clean")
  btr.build(SCHEMA, inputs, clean, resume=False, **args)
  assert _files(out) == _files(clean)

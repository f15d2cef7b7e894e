"""Cloud paths: a whole build reads its input from and writes its dataset
to s3:// on a real S3-compatible server (moto's, on 127.0.0.1)."""

import gzip
import os
import subprocess
import sys

import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.tfrecord_files import decode_example, unframe_records

from tests.helpers.s3 import s3_beam_args


boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto")


def test_build_from_and_to_s3(s3, tmp_path):
  client = boto3.client("s3", endpoint_url=s3)
  client.create_bucket(Bucket="raw-events")
  client.create_bucket(Bucket="datasets")
  rows = [f"{i},{i * 10}" for i in range(50)] + ["oops,7"]
  client.put_object(Bucket="raw-events", Key="2026/11/21/a.csv",
                    Body=("id,v\n" + "\n".join(rows[:25]) + "\n").encode())
  client.put_object(Bucket="raw-events", Key="2026/11/21/b.csv",
                    Body=("id,v\n" + "\n".join(rows[25:]) + "\n").encode())
  beam_args = [f"--s3_endpoint_url={s3}", "--s3_access_key_id=test",
               "--s3_secret_access_key=test", "--s3_region_name=us-east-1"]
  schema = {"name": "events", "features": {
      "id": {"type": "int64", "required": True}, "v": "int64"}}
  result = btr.build(schema, "s3://raw-events/2026/11/21/*.csv",
                     "s3://datasets/events", beam_args=beam_args,
                         max_bad_fraction=1.0)
  assert result.info.counts.rows_written == 50
  assert result.rows_rejected == 1
  keys = sorted(o["Key"] for o in client.list_objects_v2(
      Bucket="datasets")["Contents"])
  assert keys == ["events/README.md", "events/_SUCCESS",
                  "events/croissant.json", "events/dataset.json",
                  "events/errors/errors-00000-of-00001.jsonl",
                  "events/index/train-00000-of-00001.tfrecord.gz.index",
                  "events/preview/train.parquet",
                  "events/report.html", "events/schema.pbtxt",
                  "events/statistics.pb", "events/statistics.state.json",
                  "events/train-00000-of-00001.tfrecord.gz"]
  # No staging or part files are left on the bucket.
  shard = client.get_object(
      Bucket="datasets", Key="events/train-00000-of-00001.tfrecord.gz")
  records = list(unframe_records(gzip.decompress(shard["Body"].read())))
  ids = sorted(decode_example(r)["id"][1][0] for r in records)
  assert ids == list(range(50))
  # Read back through Beam's FileSystems, and the rebuild is up to date.
  assert sorted(r["id"] for r in btr.iter_records("s3://datasets/events")) \
      == list(range(50))
  errors = list(btr.open("s3://datasets/events").errors())
  assert errors[0]["raw"]["id"] == "oops"
  again = btr.build(schema, "s3://raw-events/2026/11/21/*.csv",
                    "s3://datasets/events", beam_args=beam_args,
                        max_bad_fraction=1.0)
  assert again.up_to_date
  # Every file checks against its recorded SHA-256, and what changes is
  # named.
  _verified_then_damaged(s3, client, tmp_path, "datasets", "events")


def test_the_cli_reads_its_schema_from_s3_with_the_s3_options(s3, tmp_path):
  """The launcher reads the schema through FileSystems with the command's
  S3 options (workers never open it: it travels in the pipeline)."""
  client = boto3.client("s3", endpoint_url=s3)
  client.create_bucket(Bucket="config")
  client.put_object(Bucket="config", Key="events.yaml", Body=(
      b"name: events\nfeatures:\n  id: {type: int64, required: true}\n"))
  (tmp_path / "in.csv").write_text("id\n7\n8\n")
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
       "s3://config/events.yaml", "--input", "in.csv", "--output", "out",
       f"--s3_endpoint_url={s3}", "--s3_access_key_id=test",
       "--s3_secret_access_key=test", "--s3_region_name=us-east-1"],
      cwd=tmp_path, capture_output=True, text=True, timeout=300)
  assert run.returncode == 0, run.stderr[-2000:]
  assert [r["id"] for r in btr.iter_records(str(tmp_path / "out"))] == [7, 8]


def test_dataflow_refuses_a_local_image_base_dir(s3, tmp_path):
  client = boto3.client("s3", endpoint_url=s3)
  client.create_bucket(Bucket="pics")
  client.put_object(Bucket="pics", Key="t.csv", Body=b"path\na.png\n")
  schema = {"name": "i", "features": {"img": {
      "type": "image", "source": "path", "base_dir": str(tmp_path)}}}
  with pytest.raises(btr.InputError, match=(
      rf"workers cannot see this machine's files, but {tmp_path} is local")):
    btr.build(schema, "s3://pics/t.csv", "s3://pics/out", beam_args=[
        "--runner=DataflowRunner", f"--s3_endpoint_url={s3}",
        "--s3_access_key_id=test", "--s3_secret_access_key=test",
        "--s3_region_name=us-east-1"])


def test_array_record_shards_are_built_locally_and_copied_to_s3(s3,
                                                                 tmp_path):
  """array-record writes local files only: each shard is made in a local
  temporary file and copied through Beam's FileSystems."""
  if os.environ.get("BTR_REQUIRE_EXTRAS"):  # CI installs the extra
    from array_record.python import array_record_module
  else:
    array_record_module = pytest.importorskip(
        "array_record.python.array_record_module")
  from beam_tfrecords.core.array_record_files import read_array_record
  from beam_tfrecords.core.shard_reader import iter_tfrecords
  client = boto3.client("s3", endpoint_url=s3)
  client.create_bucket(Bucket="datasets")
  source = tmp_path / "in.csv"
  source.write_text("id,v\n" + "".join(f"{i},{i * 10}\n" for i in range(40)))
  beam_args = s3_beam_args(s3)
  schema = {"name": "events", "features": {
      "id": {"type": "int64", "required": True}, "v": "int64"}}
  local = str(tmp_path / "tfrecord")
  btr.build(schema, str(source), local, num_shards=2)
  # (Last: Beam's FileSystems keep the S3 options of the last build, for
  # the reads below.)
  btr.build(schema, str(source), "s3://datasets/ar_events", num_shards=2,
            beam_args=beam_args, file_format="array_record")
  keys = sorted(o["Key"] for o in client.list_objects_v2(
      Bucket="datasets", Prefix="ar_events/")["Contents"])
  assert [k for k in keys if "-of-" in k] == [
      "ar_events/train-00000-of-00002.array_record",
      "ar_events/train-00001-of-00002.array_record"]
  assert not [k for k in keys if ".staging" in k or k.endswith(".part")]
  for shard in (0, 1):
    name = f"train-0000{shard}-of-00002"
    path = tmp_path / f"{name}.array_record"
    path.write_bytes(client.get_object(
        Bucket="datasets",
        Key=f"ar_events/{name}.array_record")["Body"].read())
    reader = array_record_module.ArrayRecordReader(str(path))
    records = reader.read(0, reader.num_records())
    reader.close()
    assert records == list(iter_tfrecords(f"{local}/{name}.tfrecord.gz"))
    # core's reader copies a remote file to a local one first.
    assert list(read_array_record(
        f"s3://datasets/ar_events/{name}.array_record")) == records
  assert sum(decode_example(r)["id"][1][0] for shard in (0, 1)
             for r in read_array_record(
                 f"s3://datasets/ar_events/train-0000{shard}-of-00002"
                 ".array_record")) == sum(range(40))


# --- beam-tfrecords verify on a bucket ----------------------------------------


def _verified_then_damaged(s3, client, tmp_path, bucket, prefix):
  """The dataset at s3://bucket/prefix verifies intact; then a shard with
  a flipped byte, a deleted index, a stray object and a truncated copy of
  statistics.pb: the four problems, from btr.verify and from the command
  line with the S3 flags. (On test_build_from_and_to_s3's dataset: a
  build to S3 takes a while.)"""
  import hashlib
  url = f"s3://{bucket}/{prefix}"
  objects = {o["Key"][len(prefix) + 1:]: o["Size"]
             for o in client.list_objects_v2(
                 Bucket=bucket, Prefix=prefix + "/")["Contents"]}
  result = btr.verify(url, beam_args=s3_beam_args(s3))
  assert result.ok, result.problems
  assert result.path == url
  # All but _SUCCESS, dataset.json and croissant.json have a checksum.
  assert result.checked == len(objects) - 3
  assert result.num_bytes == sum(size for key, size in objects.items()
                                 if key != "_SUCCESS")

  def get(key):
    return client.get_object(Bucket=bucket,
                             Key=f"{prefix}/{key}")["Body"].read()

  def put(key, body):
    client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=body)

  shard = "train-00000-of-00001.tfrecord.gz"
  data = bytearray(get(shard))
  before = hashlib.sha256(data).hexdigest()
  data[30] ^= 0x01
  put(shard, bytes(data))
  after = hashlib.sha256(data).hexdigest()
  index = "index/train-00000-of-00001.tfrecord.gz.index"
  client.delete_object(Bucket=bucket, Key=f"{prefix}/{index}")
  put("notes.txt", b"left here")
  stats = get("statistics.pb")
  put("statistics.pb", stats[:len(stats) // 2])
  expected = [
      ("missing", index, "listed in dataset.json, not there"),
      ("extra", "notes.txt", "9 bytes, not listed in dataset.json"),
      ("truncated", "statistics.pb",
       f"{len(stats) // 2:,} bytes, {len(stats):,} written"),
      ("damaged", shard, f"SHA-256 {after[:16]}..., {before[:16]}... "
       "written: its bytes changed"),
  ]
  # What is still intact: the shard, the index and statistics.pb are not.
  checked = len(objects) - 3 - 3
  result = btr.verify(url + "/", beam_args=s3_beam_args(s3))
  assert [(p.kind, p.file, p.detail) for p in result.problems] == expected
  assert result.checked == checked
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "verify", url,
       *s3_beam_args(s3)],
      cwd=tmp_path, capture_output=True, text=True, timeout=300)
  assert run.returncode == 1, run.stderr[-2000:]
  assert run.stdout.splitlines() == [
      f"{kind}: {file}: {detail}" for kind, file, detail in expected] + [
          f"{url}: 4 problem(s); {checked} file(s) intact"]

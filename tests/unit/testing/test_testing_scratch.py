"""What a stopped engine cluster leaves in its folder: its logs, not its
copies of jars."""

import os

from beam_tfrecords.testing.flink import LocalFlink
from beam_tfrecords.testing.spark import LocalSpark


def _touch(root, *paths):
  for path in paths:
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
      f.write(path)


def _files(root):
  return sorted(os.path.relpath(os.path.join(d, f), root)
                for d, _, files in os.walk(root) for f in files)


def test_a_stopped_spark_cluster_keeps_its_logs_not_its_jars(tmp_path):
  _touch(tmp_path, "master.out", "worker0.out", "jobserver.out",
         "worker0/app-1/0/beam.jar", "worker0/app-1/0/stderr",
         "worker1/app-1/1/spark-core.jar", "worker1/app-1/1/stdout",
         "local/spark-1/userFiles/beam.jar", "events/app-1")
  LocalSpark(str(tmp_path)).close()
  assert _files(tmp_path) == [
      "events/app-1", "jobserver.out", "master.out",
      "worker0.out", "worker0/app-1/0/stderr", "worker1/app-1/1/stdout"]


def test_a_stopped_flink_cluster_keeps_its_logs_not_its_blobs(tmp_path):
  _touch(tmp_path, "log/flink-taskexecutor-0.log", "taskmanager0.out",
         "tmp/tm_localhost:1-a/blobStorage/job_1/blob_p", "tmp/x.jar")
  LocalFlink(str(tmp_path)).close()
  assert _files(tmp_path) == ["log/flink-taskexecutor-0.log",
                              "taskmanager0.out"]

"""Builds on a real Spark 3.5.8 standalone cluster (a master and two
workers on 127.0.0.1), cross-version (Beam 2.70 job server, assembled),
submitted both ways docs/operations.md tells a user: SparkRunner with
--spark_job_server_jar (the movie ratings), and the cluster's standing
job server with --job_endpoint (the rest). Every published file equals
the DirectRunner's byte for byte, the application's event log shows tasks
on the executors of both workers, and a worker killed mid-build never
leaves a half-written dataset."""

import os
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords.testing.spark import LocalSpark

from tests.cluster.docker_builds import cluster_docker_build, worker_image
from tests.cluster.engine_builds import (assert_failed_cleanly,
                           assert_same_but_units, beam_sink_build, cases,
                           direct_cli, finished_units, grouped_build,
                           killed_build, movie_ratings_build, resumed_build,
                           started, transform_build)

__all__ = ["cases", "worker_image"]  # (fixtures, from engine_builds and
# docker_builds)


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
  cluster = started(LocalSpark, tmp_path_factory.mktemp("spark"))
  yield cluster
  cluster.close()


@pytest.fixture
def spark_env(spark, monkeypatch):
  """The launcher's environment: Spark's driver (the job server) on
  127.0.0.1, as the cluster is."""
  for k, v in spark.env.items():
    if k.startswith("SPARK_"):
      monkeypatch.setenv(k, v)
  return dict(os.environ)


def _apps(spark):
  return {a["id"]: a for a in spark.applications()}


def _finished_on_both(spark, before):
  """The one application since `before`: FINISHED, with tasks on the
  executors of both workers."""
  deadline = time.time() + 30  # the master lists an app once it ended
  while len(_apps(spark)) <= len(before) and time.time() < deadline:
    time.sleep(0.5)
  new = [a for aid, a in _apps(spark).items() if aid not in before]
  assert [a["state"] for a in new] == ["FINISHED"], new
  tasks = spark.tasks_per_executor(new[0]["id"])
  workers = spark.executors_per_worker(new[0]["id"])
  assert len(workers) == 2 and all(
      any(tasks.get(e, 0) > 0 for e in ids) for ids in workers.values()), (
          tasks, workers)


def test_movie_ratings_with_a_hash_split_on_the_cli(spark, spark_env, cases,
                                                    tmp_path):
  before = _apps(spark)
  movie_ratings_build(cases, tmp_path, spark.args, spark_env)
  _finished_on_both(spark, before)


def test_grouped_sequences_with_rejected_groups_through_btr_build(
    spark, spark_env, cases, tmp_path):
  before = _apps(spark)
  grouped_build(cases, tmp_path, spark.endpoint_args)
  _finished_on_both(spark, before)


def test_tensorflow_transform_with_the_users_preprocessing_fn(
    spark, spark_env, cases, tmp_path):
  transform_build(cases, tmp_path, spark.endpoint_args, spark_env,
                  spark.pool)


def test_beams_own_sink(spark, spark_env, cases, tmp_path, tf):
  beam_sink_build(cases, tmp_path, spark.endpoint_args, spark_env, tf)


def test_a_killed_worker_never_half_publishes_and_a_million_flights_equal_direct(  # noqa: E501
    spark, spark_env, cases, tmp_path, capsys):
  """A million real flight rows (resume: the default); worker 1 (and its executor)
  is killed once its executor runs and a read unit is finished. Spark
  runs the lost tasks again on the other executor: the build either
  publishes what the DirectRunner publishes, or fails in one line with
  nothing published, and then the same command, with the worker back,
  reuses the finished units and does."""
  work = os.path.join(spark.workdir, "worker1")
  before = set(os.listdir(work))

  def running():  # an executor of a new application on worker 1
    return any(os.listdir(os.path.join(work, d))
               for d in set(os.listdir(work)) - before)

  out = tmp_path / "killed"
  code, stderr, out, folder, base = killed_build(
      cases, tmp_path, spark.endpoint_args, spark_env,
      lambda: running() and finished_units(out), 0,
      lambda: spark.kill_worker(1))
  spark.restart_worker(1)
  if code == 0:  # Spark's retries finished the job
    with capsys.disabled():
      print("\nSpark finished the build without the killed worker")
    direct = direct_cli(folder, base)
    assert btr.dataset_info(str(direct)).counts.rows_read == 1_000_000
    assert_same_but_units(direct, out)
    return
  assert_failed_cleanly(code, stderr, out, "SparkRunner")
  finished = finished_units(out)
  before = _apps(spark)
  resumed_build(folder, base, out, spark.endpoint_args, spark_env, finished)
  _finished_on_both(spark, before)


def test_docker_workers_of_the_worker_image(
    spark, spark_env, s3, worker_image, tmp_path):
  """The job server starts the SDK workers as containers of the worker
  image (--environment_type DOCKER; they read and write S3 on
  127.0.0.1); the build equals the DirectRunner's, and no container is
  left behind."""
  cluster_docker_build(spark, "spark", s3, worker_image, tmp_path)

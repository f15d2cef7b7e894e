"""Builds on a real Flink 1.20.5 session cluster (a JobManager and two
TaskManagers on 127.0.0.1), cross-version (Beam 2.70 job server,
assembled), submitted both ways docs/operations.md tells a user:
FlinkRunner with --flink_job_server_jar (the movie ratings), and the
cluster's standing job server with --job_endpoint (the rest: one JVM for
them all, not one per build). Every published file equals the DirectRunner's byte for
byte, Flink's REST API shows each job FINISHED with work on both
TaskManagers, and a TaskManager killed mid-build publishes nothing; the
same command then reuses the units it finished (resume: the default)."""


import pytest

from beam_tfrecords.testing.flink import LocalFlink

from tests.cluster.docker_builds import cluster_docker_build, worker_image
from tests.cluster.engine_builds import (assert_failed_cleanly, beam_sink_build,
                           cases, finished_units, grouped_build,
                           killed_build, movie_ratings_build,
                           resumed_build, started, transform_build)

__all__ = ["cases", "worker_image"]  # (fixtures, from engine_builds and
# docker_builds)


@pytest.fixture(scope="module")
def flink(tmp_path_factory):
  cluster = started(LocalFlink, tmp_path_factory.mktemp("flink"))
  yield cluster
  cluster.close()


def _jobs(flink):
  return {j["jid"]: j for j in flink.jobs()}


def _finished_on_both(flink, before):
  """The one job since `before`: FINISHED, with records read on both
  TaskManagers."""
  new = [j for jid, j in _jobs(flink).items() if jid not in before]
  assert [j["state"] for j in new] == ["FINISHED"], new
  read = flink.taskmanagers_of(new[0]["jid"])
  assert sum(1 for n in read.values() if n > 0) == 2, read


def test_movie_ratings_with_a_hash_split_on_the_cli(flink, cases, tmp_path):
  before = _jobs(flink)
  movie_ratings_build(cases, tmp_path, flink.args, None)
  _finished_on_both(flink, before)


def test_grouped_sequences_with_rejected_groups_through_btr_build(
    flink, cases, tmp_path):
  before = _jobs(flink)
  grouped_build(cases, tmp_path, flink.endpoint_args)
  _finished_on_both(flink, before)


def test_tensorflow_transform_with_the_users_preprocessing_fn(
    flink, cases, tmp_path):
  # One slot: TFT's graph has 96 vertices, and at parallelism 2 Flink
  # deployed 192 subtasks for 400 rows (78 s of job).
  transform_build(cases, tmp_path,
                  flink.endpoint_args + ["--parallelism=1"], None, flink.pool)


def test_beams_own_sink(flink, cases, tmp_path, tf):
  beam_sink_build(cases, tmp_path, flink.endpoint_args, None, tf)


def test_a_killed_taskmanager_publishes_nothing_then_a_million_flights_resume_to_direct(  # noqa: E501
    flink, cases, tmp_path):
  """A million real flight rows (resume: the default). TaskManager 1 is killed once
  the job runs and a read unit is finished: with one slot left for a job
  of parallelism 2 and no restart strategy (Flink's default without
  checkpoints), the job fails, and the CLI says so in one line, exits 1
  and publishes nothing. With the TaskManager back (as a cluster manager
  restarts one), the same command reuses the finished units and
  publishes what the DirectRunner does."""
  before = _jobs(flink)
  out = tmp_path / "killed"

  def running():
    return any(j["state"] == "RUNNING" and jid not in before
               for jid, j in _jobs(flink).items()) and finished_units(out)

  code, stderr, out, folder, base = killed_build(
      cases, tmp_path, flink.endpoint_args, None, running, 0,
      lambda: flink.kill_taskmanager(1))
  assert_failed_cleanly(code, stderr, out, "FlinkRunner")
  finished = finished_units(out)
  flink.restart_taskmanager(1)
  before = _jobs(flink)
  resumed_build(folder, base, out, flink.endpoint_args, None, finished)
  new = [j for jid, j in _jobs(flink).items() if jid not in before]
  assert [j["state"] for j in new] == ["FINISHED"], new


def test_docker_workers_of_the_worker_image(
    flink, s3, worker_image, tmp_path):
  """The job server starts the SDK workers as containers of the worker
  image (--environment_type DOCKER; they read and write S3 on
  127.0.0.1); the build equals the DirectRunner's, and no container is
  left behind."""
  cluster_docker_build(flink, "flink", s3, worker_image, tmp_path)

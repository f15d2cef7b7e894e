"""A worker pool of the worker image (`docker run IMAGE --worker_pool`,
--environment_type EXTERNAL: how Kubernetes deployments run Beam's
Python workers, beside Flink or Spark), with Prism as the runner (issue
63). The pool's container mounts this test run's folder and the tools'
data folder at their own paths, as a deployment mounts a shared volume,
so that its builds read and write local paths: TensorFlow Transform with
the user's preprocessing_fn (TFT writes its graph with TensorFlow's file
system, which has no s3://) and a million real flights; the movie
ratings go through S3 (moto on 127.0.0.1). Each equals the
DirectRunner's build file for file. A launcher killed mid-build leaves
no worker in the pool (the image's entrypoint ends it), and the pool
serves on."""

import os
import socket
import subprocess
import sys
import time

import pytest

from beam_tfrecords.testing.portable import free_port
from beam_tfrecords.testing.tools import flights_csv, prism_binary

from tests.cluster.docker_builds import movies_on, s3_store, worker_image
from tests.cluster.engine_builds import (FLIGHT_ROWS, assert_same_dataset,
                                         cases, cli_build_pair, flights,
                                         movie_ratings_build, prepared, tool,
                                         transform_build)
from tests.helpers.kill_build import kill_when
from tests.helpers.paths import ROOT

__all__ = ["cases", "worker_image"]  # (the fixtures)



class _Mounted:
  """The pool's view of the user's code: the transform case's folder is
  mounted and on the container's PYTHONPATH (a deployment puts the
  module in the image or on a volume)."""

  def __init__(self, folder):
    self.folder = str(folder)

  def install(self, *paths):
    for path in paths:
      assert os.path.dirname(str(path)) == self.folder, path


def _logs(container):
  logs = subprocess.run(["docker", "logs", container], capture_output=True,
                        text=True, timeout=60)
  return logs.stdout + logs.stderr


@pytest.fixture(scope="module")
def pool(worker_image, cases):
  """The pool's container (host network; the run's folder, the tools'
  data folder and the repository (bundled data) mounted at their paths)
  and its address; how long
  it took to answer is printed; removed afterwards."""
  data = os.path.dirname(flights_csv(FLIGHT_ROWS))
  run = str(cases.parent)
  user = cases / "transform"
  # (not Beam's default 50000: in Linux's ephemeral range, another
  # test's connection may hold it)
  port = free_port()
  started = time.time()
  container = subprocess.run(
      ["docker", "run", "-d", "--network", "host", "-v", f"{run}:{run}",
       "-v", f"{data}:{data}:ro", "-v", f"{ROOT}:{ROOT}:ro",
       "-e", f"PYTHONPATH={user}",
       "-e", "BTR_WORKER_GRACE_SECONDS=10", worker_image, "--worker_pool",
       f"--service_port={port}"],
      capture_output=True, text=True, check=True, timeout=120).stdout.strip()
  try:
    deadline = time.time() + 60
    while True:
      try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        break
      except OSError:
        assert time.time() < deadline, (
            "the worker pool did not start: " + _logs(container)[-2000:])
        time.sleep(0.1)
    print(f"the worker pool answered {time.time() - started:.1f} s after "
          "docker run")
    yield (["--runner", "PrismRunner", "--prism_location",
            tool(prism_binary), "--environment_type=EXTERNAL",
            f"--environment_config=localhost:{port}"], _Mounted(user),
           container)
    # The builds' workers were the pool's (not the launcher's), started
    # through the image's entrypoint.
    logs = _logs(container)
    assert logs.count("Starting worker with command ['/opt/beam-tfrecords/"
                      "bin/beam-tfrecords-worker'") >= 1, logs[-2000:]
  finally:
    subprocess.run(["docker", "rm", "-f", container], capture_output=True,
                   timeout=120, check=True)


def test_movie_ratings_on_s3(pool, s3, tmp_path):
  args = pool[0]
  movies_on(s3_store(s3), tmp_path, args)


def test_tensorflow_transform_with_the_users_preprocessing_fn(
    pool, cases, tmp_path):
  args, user, _ = pool
  assert os.path.basename(user.folder) == "transform"
  transform_build(cases, tmp_path, args, None, user)


def test_a_million_flights(pool, cases, tmp_path):
  args = pool[0]
  folder, (schema, src) = prepared(cases, "flights", flights)
  started = time.time()
  direct, engine, direct_dir = cli_build_pair(
      folder, schema, [src], [], args, None, tmp_path / "engine")
  print(f"a million flights on the worker pool (and the DirectRunner's "
        f"build, if this test made it): {time.time() - started:.0f} s")
  assert direct.counts.rows_read == FLIGHT_ROWS
  assert_same_dataset(direct, engine, direct_dir, tmp_path / "engine")


def _workers(container):
  """The pool's worker processes (its harnesses and their boots)."""
  top = subprocess.run(["docker", "top", container, "-o", "pid,args"],
                       capture_output=True, text=True, timeout=60,
                       check=True).stdout
  return [line for line in top.splitlines()[1:]
          if "--provision_endpoint" in line or "sdk_worker_main" in line]


def test_a_killed_launcher_leaves_no_worker_in_the_pool(pool, cases,
                                                        tmp_path):
  """kill -9 of the launcher while the pool's worker runs its build:
  the worker, whose runner (Prism, gone with the launcher) no longer
  answers, ends after its grace (10 s here); the pool stays and serves
  the next build."""
  args, _, container = pool
  folder, (schema, src) = prepared(cases, "flights", flights)
  killed = kill_when(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
       "--input", src, "--output", str(tmp_path / "killed")] + args,
      os.environ, lambda: _workers(container), timeout=120, cwd=folder)
  while _workers(container):
    assert time.time() - killed < 60, _workers(container)
    time.sleep(1)
  print(f"after kill -9 of the launcher: no worker left in the pool "
        f"{time.time() - killed:.1f} s later")
  assert not (tmp_path / "killed" / "_SUCCESS").exists()
  movie_ratings_build(cases, tmp_path, args, None)  # the pool serves on

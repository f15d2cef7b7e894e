"""The worker image for real (issue 63): built from this repository
without Docker Hub (testing.worker_image: a Debian base made with
debootstrap, Beam's boot from the Go module proxy, the runtime lock from
a host wheelhouse), then Prism's workers are containers of it
(--environment_type DOCKER), with data on GCS (fake-gcs-server on
127.0.0.1). Every build equals the DirectRunner's file for file, and no
container is left behind after a build or a killed launcher; an image of
other versions is refused. (The worker pool's builds are in
test_worker_pool.py, Flink's and Spark's DOCKER builds in their test
files.)"""

import os
import subprocess
import sys
import time

import pytest

from beam_tfrecords.core.version import __version__
from beam_tfrecords.testing.tools import beam_version, prism_binary
from beam_tfrecords.runners.image_check import image_labels
from beam_tfrecords.testing.worker_image import lock_sha256

from tests.cluster.docker_builds import (BUCKET, containers_of,
                                         docker_args, gcs_store, grouped_on,
                                         image_for, labelled, movies_on,
                                         none_left, s3_store, stamped_cli,
                                         transform_on, worker_image,
                                         worker_start)
from tests.cluster.engine_builds import movie_ratings, tool
from tests.helpers.gcs import object_names
from tests.helpers.kill_build import kill_when
from tests.helpers.paths import ROOT

__all__ = ["worker_image"]  # (the fixture, from docker_builds)

# The image's size at most (issue 63: 3.65 GB by hand with the test
# tools; the runtime lock leaves them out).
MAX_BYTES = 3.2e9


@pytest.fixture(scope="module")
def prism():
  return ["--runner", "PrismRunner", "--prism_location",
          tool(prism_binary)]


def test_the_image_is_labelled_with_what_it_holds(worker_image):
  labels = image_labels(worker_image)
  assert labels["io.beam-tfrecords.version"] == __version__
  assert labels["io.beam-tfrecords.beam"] == beam_version()
  assert labels["io.beam-tfrecords.python"] == "3.11"
  assert labels["io.beam-tfrecords.lock-sha256"] == lock_sha256()
  size = int(subprocess.run(
      ["docker", "image", "inspect", "--format", "{{.Size}}", worker_image],
      capture_output=True, text=True, check=True).stdout)
  assert size <= MAX_BYTES, f"{size / 1e9:.2f} GB"
  ran = subprocess.run(
      ["docker", "run", "--rm", "--network", "none", "--entrypoint",
       "python", worker_image, "-c",
       "import sys, apache_beam, beam_tfrecords, beam_tfrecords_native; "
       "from beam_tfrecords.core import native; "
       "print(sys.version_info[:2], apache_beam.__version__, "
       "beam_tfrecords.__version__, native.core() is not None)"],
      capture_output=True, text=True, timeout=300)
  assert ran.returncode == 0, ran.stderr
  assert ran.stdout.split("\n")[0] == (
      f"(3, 11) {beam_version()} {__version__} True")


@pytest.fixture(scope="module")
def prism_image(worker_image, gcs):
  """The image for Prism's workers: data on the GCS emulator, whose
  address no runner passes to its containers (ENV; Prism mounts the
  launcher's GOOGLE_APPLICATION_CREDENTIALS itself); a worker whose
  runner is gone ends 10 s later (worker_entrypoint's grace)."""
  return image_for(worker_image, "prism", {
      "STORAGE_EMULATOR_HOST": gcs, "BTR_WORKER_GRACE_SECONDS": "10"})


@pytest.fixture
def clean_containers(prism_image):
  """No container of the image before the test, and none after."""
  assert containers_of(prism_image) == []
  yield
  none_left(prism_image)


def test_prism_docker_movie_ratings(prism, gcs, prism_image, tmp_path,
                                    clean_containers):
  lines = movies_on(gcs_store(gcs), tmp_path,
                    prism + docker_args(prism_image), run=stamped_cli)
  start = worker_start(prism_image, lines)
  print(f"Prism DOCKER: the SDK harness logged {start:.1f} s after its "
        "container started")
  assert 0 < start < 60


def test_prism_docker_grouped_sequences(prism, gcs, prism_image, tmp_path,
                                        clean_containers):
  grouped_on(gcs_store(gcs), tmp_path, prism + docker_args(prism_image))


def test_a_killed_launcher_leaves_no_container(prism, gcs, prism_image,
                                               tmp_path, clean_containers):
  """kill -9 of the launcher once its worker container runs: Prism ends
  with it, and the worker, whose runner no longer answers, ends after
  its grace (10 s here, 60 s by default); Prism's containers remove
  themselves. Nothing is published."""
  store = gcs_store(gcs)
  schema, src = movie_ratings(tmp_path)
  store.upload(src, "killed/in/movies.csv")
  killed = kill_when(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
       str(schema), "--input", f"{store.root}/killed/in/movies.csv",
       "--output", f"{store.root}/killed/out"] + prism
      + docker_args(prism_image), os.environ,
      lambda: containers_of(prism_image, running=True), timeout=120,
      cwd=ROOT)
  none_left(prism_image, seconds=60)
  print(f"after kill -9 of the launcher: no container of the image "
        f"{time.time() - killed:.1f} s later")
  assert "killed/out/_SUCCESS" not in object_names(gcs, BUCKET, "killed/")


def test_tensorflow_transform_on_s3_is_refused_before_anything_runs(
    prism, s3, prism_image, tmp_path, clean_containers):
  """TFT writes its graph with TensorFlow's file system, which has no
  s3:// (tensorflow-io's plugin is not installed): a DOCKER build, whose
  workers see no host path, cannot write TFT's output here; the build
  says so before it starts."""
  with pytest.raises(AssertionError, match=(
      "transform: cannot write to s3://worker-image/.*TensorFlow's file "
      "system, which has no s3://")):
    transform_on(s3_store(s3), tmp_path, prism + docker_args(prism_image))


def test_an_image_of_other_versions_is_refused_before_anything_runs(
    prism, worker_image, tmp_path):
  """Labels saying another Beam: refused with one line; an image
  without the labels or the package (the bare base) is run once and
  refused for that; nothing ran."""
  import beam_tfrecords as btr  # pylint: disable=import-outside-toplevel
  from beam_tfrecords import InputError  # pylint: disable=import-outside-toplevel
  other = labelled(worker_image, "beam-tfrecords-worker:other-beam",
                    "LABEL io.beam-tfrecords.beam=2.70.0")
  out = tmp_path / "out"
  with pytest.raises(InputError, match=(
      r"the worker image beam-tfrecords-worker:other-beam has beam 2\.70\.0 "
      rf"\(the launcher: {beam_version()}\): workers and launcher")):
    btr.build("schemas/movie_ratings.yaml",
              "pipelines/data/movie_ratings.csv", str(out),
              beam_args=prism + docker_args(other))
  base = subprocess.run(
      ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}",
       "beam-tfrecords-base"], capture_output=True, text=True,
      check=True).stdout.split()[0]
  with pytest.raises(InputError, match=(
      f"the worker image {base} cannot run beam_tfrecords .*No module "
      "named 'apache_beam'")):
    btr.build("schemas/movie_ratings.yaml",
              "pipelines/data/movie_ratings.csv", str(out),
              beam_args=prism + docker_args(base))
  assert not out.exists()
  subprocess.run(["docker", "rmi", other], capture_output=True)

"""Builds whose workers run in the worker image (issue 63): the image
(testing.worker_image, built once a session: warm, only the package's
layer is made again), and the builds the runners' tests run with
--environment_type DOCKER or a worker pool (EXTERNAL), against the
DirectRunner's.

Containers see no host path: inputs and outputs are on the moto S3 server
of tests/cluster/conftest.py (127.0.0.1; containers have the host's
network). The DirectRunner's build reads the same s3:// inputs, so that
what names them (errors/, dataset.json) is the same; both outputs are
downloaded and compared file by file (engine_builds.assert_same_dataset).
"""

import json
import os
import subprocess
import time
import uuid

import pytest

import beam_tfrecords as btr
from beam_tfrecords.testing.worker_image import IMAGE, build_image

from tests.cluster.engine_builds import (GROUPED, TRANSFORM_GRAPH,
                                         assert_same_dataset, cli,
                                         grouped_input, movie_ratings, tool)
from tests.helpers.paths import ROOT
from tests.helpers.s3 import s3_beam_args

BUCKET = "worker-image"


@pytest.fixture(scope="session")
def worker_image():
  """The worker image's tag (built, or brought up to date); skipped where
  Docker, debootstrap, Go or maturin is missing, unless
  BTR_REQUIRE_CLUSTERS=1 (CI)."""
  built = tool(build_image)
  return built.tags[0]


def docker_args(image):
  return ["--environment_type=DOCKER", f"--environment_config={image}"]


def image_for(worker_image, user):
  """The worker image under an image id of its own for one runner's
  tests (a LABEL on top: the same files and versions), so that what its
  containers leave is told apart from another runner's running at the
  same time (`containers_of` filters by image)."""
  return labelled(worker_image, f"{IMAGE}:for-{user}",
                  f"io.beam-tfrecords.tests={user}")


def labelled(image, tag, label):
  """`tag`: the image with one more LABEL (KEY=VALUE), built at once."""
  subprocess.run(["docker", "build", "-q", "-t", tag, "-"],
                 input=f"FROM {image}\nLABEL {label}\n", text=True,
                 capture_output=True, check=True, timeout=120,
                 env=dict(os.environ, DOCKER_BUILDKIT="0"))
  return tag


def containers_of(image, running=False):
  """The ids of containers made from the image (running ones only, or
  any)."""
  run = subprocess.run(["docker", "ps", "-q"] + ([] if running else ["-a"])
                       + ["--filter", f"ancestor={image}"],
                       capture_output=True, text=True, timeout=60,
                       check=True)
  return run.stdout.split()


def none_left(image, seconds=60, running=False):
  """Waits until no container of the image is left (`running`: none
  running; a runner that keeps its workers for
  --environment_cache_millis stops them after it); fails after
  `seconds`."""
  deadline = time.time() + seconds
  while containers_of(image, running):
    assert time.time() < deadline, (
        f"containers of {image} left: {containers_of(image, running)}")
    time.sleep(1)


def _client(s3):
  import boto3  # pylint: disable=import-outside-toplevel
  client = boto3.client("s3", endpoint_url=s3)
  try:
    client.create_bucket(Bucket=BUCKET)
  except client.exceptions.BucketAlreadyOwnedByYou:
    pass
  return client


def _download(client, prefix, folder):
  pages = client.get_paginator("list_objects_v2").paginate(
      Bucket=BUCKET, Prefix=prefix + "/")
  for page in pages:
    for item in page.get("Contents", []):
      target = os.path.join(folder, item["Key"][len(prefix) + 1:])
      os.makedirs(os.path.dirname(target), exist_ok=True)
      client.download_file(BUCKET, item["Key"], target)


# (moto's URL, case) -> (the s3:// inputs, the DirectRunner's build
# downloaded): made once per server.
_REFERENCES: dict = {}


def s3_build_pair(s3, tmp_path, case, schema, inputs, extra, engine_args,
                  exempt=()):
  """The same CLI build of `inputs` (uploaded to S3) on the DirectRunner
  (once per S3 server and case) and with `engine_args`; asserts their
  outputs are the same; returns the engine's dataset.json."""
  client = _client(s3)
  base = ["build", "--schema", str(schema), "--max-bad-fraction", "1"]
  if (s3, case) not in _REFERENCES:
    prefix = f"{case}-{uuid.uuid4().hex[:8]}"
    urls = []
    for path in inputs:
      key = f"{prefix}/in/{os.path.basename(path)}"
      client.upload_file(str(path), BUCKET, key)
      urls.append(f"s3://{BUCKET}/{key}")
    direct = tmp_path / "direct"
    cli(base + [a for u in urls for a in ("--input", u)] + list(extra)
        + s3_beam_args(s3) + ["--output", f"s3://{BUCKET}/{prefix}/direct"],
        ROOT)
    _download(client, f"{prefix}/direct", str(direct))
    _REFERENCES[s3, case] = (prefix, urls, direct)
  prefix, urls, direct = _REFERENCES[s3, case]
  out = f"{prefix}/engine-{uuid.uuid4().hex[:8]}"
  cli(base + [a for u in urls for a in ("--input", u)] + list(extra)
      + s3_beam_args(s3) + ["--output", f"s3://{BUCKET}/{out}"]
      + list(engine_args), ROOT)
  _download(client, out, str(tmp_path / "engine"))
  engine = btr.dataset_info(str(tmp_path / "engine"))
  assert engine.counts.rows_read > 0
  assert_same_dataset(btr.dataset_info(str(direct)), engine, direct,
                      tmp_path / "engine", exempt=exempt)
  return engine


def movies_on(s3, tmp_path, engine_args):
  """The bundled movie ratings with a hash split, 2 shards."""
  schema, src = movie_ratings(tmp_path)
  engine = s3_build_pair(s3, tmp_path, "movies", schema, [src],
                         ["--num-shards", "2"], engine_args)
  assert engine.counts.records_written == 200
  return engine


def grouped_on(s3, tmp_path, engine_args):
  """Grouped SequenceExamples with rejected groups (engine_builds')."""
  inputs = grouped_input(tmp_path)
  schema = tmp_path / "grouped.json"
  schema.write_text(json.dumps(GROUPED))
  engine = s3_build_pair(s3, tmp_path, "grouped", schema, inputs,
                         ["--num-shards", "3"], engine_args)
  assert engine.counts.rows_rejected == 6 * 40 + 1
  return engine


def transform_on(s3, tmp_path, engine_args):
  """TensorFlow Transform with a preprocessing_fn of a module the image
  holds (beam_tfrecords.pipelines.movie_ratings_tft: a user's module
  goes in the image, or with --extra_package)."""
  with open(os.path.join(ROOT, "schemas", "movie_ratings_tft.yaml")) as f:
    text = f.read()
  schema = tmp_path / "tft.yaml"
  schema.write_text(text.replace(
      "pipelines.movie_ratings_tft:preprocessing_fn",
      "beam_tfrecords.pipelines.movie_ratings_tft:preprocessing_fn"))
  engine = s3_build_pair(
      s3, tmp_path, "transform", schema,
      [os.path.join(ROOT, "pipelines", "data", "ratings.csv")],
      ["--no-statistics", "--no-report"], engine_args,
      exempt=TRANSFORM_GRAPH)
  assert engine.transform.splits["train"].shards
  return engine


def cluster_docker_build(cluster, name, s3, worker_image, tmp_path):
  """The movie ratings on a Flink or Spark cluster whose job server
  starts the SDK workers as containers of the worker image (their own
  image id: `image_for`); Flink's are gone a little after the job
  (workers kept 5 s after their last use, not the clusters' 10 minutes);
  Spark's stay (below)."""
  image = image_for(worker_image, name)
  args = [a for a in cluster.endpoint_args
          if not a.startswith("--environment")] + [
              "--environment_cache_millis=5000"]
  assert containers_of(image) == []
  movies_on(s3, tmp_path, args + docker_args(image))
  if name == "flink":
    none_left(image)
    return
  # Spark's job server neither stops nor removes the SDK containers its
  # executors started: they run until the executors end, then stay,
  # stopped (seen both ways here). Removed here; docs/operations.md
  # tells users (docker container prune).
  left = containers_of(image)
  assert len(left) <= 2, left  # (one per executor at most)
  subprocess.run(["docker", "rm", "-f"] + left, capture_output=True,
                 timeout=120)

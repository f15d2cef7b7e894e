"""The fixtures that start servers on 127.0.0.1 (tests/conftest.py's
CLUSTER_FIXTURES); the engines' own are in their test files."""

import contextlib
import json
import os
import subprocess

import pytest

from beam_tfrecords.testing.portable import free_port, wait_for_port
from beam_tfrecords.testing.tools import fake_gcs_binary

from tests.cluster.engine_builds import tool


@contextlib.contextmanager
def environment(env):
  """os.environ with `env` set, as it was afterwards."""
  old = {k: os.environ.get(k) for k in env}
  os.environ.update(env)
  try:
    yield
  finally:
    for k, v in old.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
  """A moto S3 server on 127.0.0.1 (its URL), AWS test credentials in the
  environment; stopped afterwards."""
  import sys  # pylint: disable=import-outside-toplevel
  pytest.importorskip("boto3")
  pytest.importorskip("moto")
  port = free_port()
  log = open(tmp_path_factory.mktemp("moto") / "server.log", "w")
  server = subprocess.Popen(
      [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
       str(port)], stdout=log, stderr=subprocess.STDOUT)
  wait_for_port(port, server, "moto S3 server", 30)
  env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
         "AWS_DEFAULT_REGION": "us-east-1"}
  try:
    with environment(env):
      yield f"http://127.0.0.1:{port}"
  finally:
    server.terminate()
    server.wait(10)
    log.close()


# Application default credentials that need no refresh: an emulator
# takes any. Without credentials, Beam's GCS client looks for them four
# times with backoff, about 20 s in every process that touches gs://
# (the launcher, each worker).
EMULATOR_CREDENTIALS = {
    "type": "authorized_user", "client_id": "emulator",
    "client_secret": "emulator", "refresh_token": "emulator",
    "token": "emulator", "expiry": "2999-01-01T00:00:00Z"}


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
  """fake-gcs-server on 127.0.0.1 (its URL), in memory; Beam's and
  google-cloud-storage's clients pointed at it (STORAGE_EMULATOR_HOST),
  with emulator credentials (GOOGLE_APPLICATION_CREDENTIALS, which Prism
  also mounts into its DOCKER workers); stopped afterwards. Skipped
  where Go is missing, unless BTR_REQUIRE_CLUSTERS=1 (CI)."""
  binary = tool(fake_gcs_binary)
  port = free_port()
  folder = tmp_path_factory.mktemp("gcs")
  credentials = folder / "credentials.json"
  credentials.write_text(json.dumps(EMULATOR_CREDENTIALS))
  log = open(folder / "server.log", "w")
  server = subprocess.Popen(
      [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
       "-backend", "memory", "-log-level", "error"],
      stdout=log, stderr=subprocess.STDOUT)
  wait_for_port(port, server, "fake-gcs-server", 30)
  url = f"http://127.0.0.1:{port}"
  env = {"STORAGE_EMULATOR_HOST": url, "GOOGLE_CLOUD_PROJECT": "test",
         "GOOGLE_APPLICATION_CREDENTIALS": str(credentials)}
  try:
    with environment(env):
      yield url
  finally:
    server.terminate()
    server.wait(10)
    log.close()

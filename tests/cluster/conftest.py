"""The fixtures that start servers on 127.0.0.1 (tests/conftest.py's
CLUSTER_FIXTURES); the engines' own are in their test files."""

import os

import pytest

from beam_tfrecords.testing.portable import free_port, wait_for_port


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
  """A moto S3 server on 127.0.0.1 (its URL), AWS test credentials in the
  environment; stopped afterwards."""
  import subprocess
  import sys
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
  old = {k: os.environ.get(k) for k in env}
  os.environ.update(env)
  try:
    yield f"http://127.0.0.1:{port}"
  finally:
    server.terminate()
    server.wait(10)
    log.close()
    for k, v in old.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v

"""core.beam_files: Beam's S3 client wrappers share one botocore client
per S3 settings, and keep their own read state (no server: making a
client connects to nothing)."""

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_tfrecords.core import beam_files

boto3_client = pytest.importorskip(
    "apache_beam.io.aws.clients.s3.boto3_client")
s3io = pytest.importorskip("apache_beam.io.aws.s3io")


def _options(endpoint, key="test"):
  return PipelineOptions([f"--s3_endpoint_url={endpoint}",
                          f"--s3_access_key_id={key}",
                          "--s3_secret_access_key=test",
                          "--s3_region_name=us-east-1"])


def test_wrappers_of_the_same_settings_share_one_botocore_client():
  assert beam_files.share_s3_clients()
  first = s3io.S3IO(options=_options("http://127.0.0.1:9"))
  second = s3io.S3IO(options=_options("http://127.0.0.1:9"))
  assert first.client is not second.client  # Beam's wrappers: one each
  assert first.client.client is second.client.client
  assert first.client.client.meta.endpoint_url == "http://127.0.0.1:9"
  # Each wrapper's read state is its own, fresh.
  first.client._download_pos = 7  # pylint: disable=protected-access
  assert second.client._download_pos == 0  # pylint: disable=protected-access
  assert second.client._download_request is None  # pylint: disable=protected-access


def test_other_settings_get_their_own_client():
  beam_files.share_s3_clients()
  here = s3io.S3IO(options=_options("http://127.0.0.1:9"))
  there = s3io.S3IO(options=_options("http://127.0.0.1:10"))
  other_key = s3io.S3IO(options=_options("http://127.0.0.1:9", key="k2"))
  assert there.client.client.meta.endpoint_url == "http://127.0.0.1:10"
  assert len({id(c.client.client) for c in (here, there, other_key)}) == 3
  # Beam's dict form of the options is the same settings.
  as_dict = boto3_client.Client(options={
      "s3_endpoint_url": "http://127.0.0.1:9", "s3_access_key_id": "test",
      "s3_secret_access_key": "test", "s3_region_name": "us-east-1",
      "s3_disable_ssl": False})
  assert as_dict.client is here.client.client


def test_sharing_is_made_once():
  beam_files.share_s3_clients()
  init = boto3_client.Client.__init__
  assert beam_files.share_s3_clients()
  assert boto3_client.Client.__init__ is init

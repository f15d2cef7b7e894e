"""Beam's options for the moto S3 server of tests/cluster/conftest.py."""


def s3_beam_args(url):
  """Beam's options for the moto server at `url`."""
  return [f"--s3_endpoint_url={url}", "--s3_access_key_id=test",
          "--s3_secret_access_key=test", "--s3_region_name=us-east-1"]

"""The GCS emulator of tests/cluster/conftest.py (fake-gcs-server): its
buckets and objects, through its JSON API and google-cloud-storage."""

import json
import os
import urllib.error
import urllib.request


def create_bucket(url, name):
  """Makes gs://name on the server at `url` (already there: fine)."""
  request = urllib.request.Request(
      f"{url}/storage/v1/b?project=test", method="POST",
      data=json.dumps({"name": name}).encode(),
      headers={"Content-Type": "application/json"})
  try:
    with urllib.request.urlopen(request, timeout=30) as reply:
      assert reply.status == 200
  except urllib.error.HTTPError as e:
    if e.code != 409:  # (it exists)
      raise


def object_names(url, bucket, prefix):
  """The object names under gs://bucket/prefix (the JSON API's list)."""
  with urllib.request.urlopen(f"{url}/storage/v1/b/{bucket}/o?prefix="
                              f"{prefix}", timeout=30) as reply:
    return sorted(o["name"] for o in json.load(reply).get("items", []))


def _bucket(bucket):
  # (STORAGE_EMULATOR_HOST, set by the fixture, points the client there)
  from google.cloud import storage  # pylint: disable=import-outside-toplevel
  return storage.Client.create_anonymous_client().bucket(bucket)


def upload(bucket, path, key):
  _bucket(bucket).blob(key).upload_from_filename(str(path))


def download(url, bucket, prefix, folder):
  """Every object under gs://bucket/prefix/ into `folder`, by its name
  after the prefix."""
  client_bucket = _bucket(bucket)
  for name in object_names(url, bucket, prefix + "/"):
    target = os.path.join(folder, name[len(prefix) + 1:])
    os.makedirs(os.path.dirname(target), exist_ok=True)
    client_bucket.blob(name).download_to_filename(target)

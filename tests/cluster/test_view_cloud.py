"""`beam-tfrecords view` of datasets on buckets: S3 (moto) and GCS
(fake-gcs-server) on 127.0.0.1, the page's records against TensorFlow's
parser of the same bytes (issue 65)."""

import re
import subprocess
import sys
import urllib.request

import pytest
import tensorflow as tf

import beam_tfrecords as btr
from tests.helpers.gcs import create_bucket
from tests.helpers.paths import ROOT
from tests.helpers.s3 import s3_beam_args

pytest.importorskip("flask")

SCHEMA = {"name": "events",
          "features": {"id": {"type": "int64", "required": True},
                       "text": "string"}}


def _csv(path, rows):
  path.write_text("id,text\n" + "".join(f"{i},t{i * 7}\n" for i in rows))
  return str(path)


def _shown(url, n):
  with urllib.request.urlopen(f"{url}train/{n}") as r:
    page = r.read().decode()
  return {name: value for name, value in re.findall(
      r'<tr data-feature="([^"]+)" class="scalar">\s*<th>[^<]*</th>\s*'
      r'<td>\s*<span class="value">([^<]*)</span>', page)}


def _same_as_tensorflow(dataset, url):
  index = btr.open(dataset).by_number("train")
  for n in (0, len(index) // 2, len(index) - 1):
    example = tf.train.Example.FromString(index[n])
    assert _shown(url, n) == {
        "id": str(example.features.feature["id"].int64_list.value[0]),
        "text": example.features.feature["text"].bytes_list.value[0]
        .decode()}


def test_a_dataset_on_gcs(gcs, tmp_path):
  create_bucket(gcs, "view")
  out = "gs://view/events"
  btr.build(SCHEMA, _csv(tmp_path / "in.csv", range(300)), out,
            num_shards=2)
  with btr.open(out).view() as server:
    _same_as_tensorflow(out, server.url)


def test_a_dataset_on_s3_from_the_command_line(s3, tmp_path):
  import boto3
  boto3.client("s3", endpoint_url=s3).create_bucket(Bucket="view")
  out = "s3://view/events"
  btr.build(SCHEMA, _csv(tmp_path / "in.csv", range(300)), out,
            num_shards=2, beam_args=s3_beam_args(s3))
  proc = subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords", "view", out]
      + s3_beam_args(s3), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True, cwd=ROOT)
  try:
    url = proc.stdout.readline().split()[0]
    _same_as_tensorflow(out, url)
  finally:
    proc.terminate()
    proc.communicate(timeout=60)

"""runners.image_check: which image a build's workers run, and what is
refused when its versions are not the launcher's. The images themselves
(labels, a run of an unlabelled one) are tested with Docker in
tests/cluster/test_worker_image.py."""

import json

import apache_beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_tfrecords import InputError
from beam_tfrecords.runners import image_check


@pytest.mark.parametrize("args, image", [
    (["--environment_type=DOCKER", "--environment_config=reg/img:1"],
     "reg/img:1"),
    (["--environment_type=docker",
      "--environment_config=" + json.dumps({"docker_image": "reg/img:2"})],
     "reg/img:2"),
    (["--sdk_container_image=reg/img:3"], "reg/img:3"),
    (["--environment_type=LOOPBACK"], None),
    (["--environment_type=EXTERNAL", "--environment_config=localhost:5"],
     None),
    ([], None),
])
def test_the_image_of_a_builds_workers(args, image):
  assert image_check.image_of(PipelineOptions(args)) == image


def test_other_versions_are_refused_in_one_line(monkeypatch):
  mine = image_check.launcher_versions()
  assert mine["beam"] == apache_beam.__version__
  monkeypatch.setattr(image_check, "image_versions", lambda image: dict(
      mine, beam="2.70.0", python="2.7"))
  with pytest.raises(InputError) as e:
    image_check.check_worker_image(PipelineOptions(
        ["--environment_type=DOCKER", "--environment_config=reg/img:1"]))
  assert str(e.value) == (
      f"the worker image reg/img:1 has beam 2.70.0 (the launcher: "
      f"{mine['beam']}), python 2.7 (the launcher: {mine['python']}): "
      "workers and launcher must run the same versions; build the image "
      "for this launcher (make worker-image) or launch with the image's "
      "versions")


def test_the_same_versions_and_unknown_images_pass(monkeypatch, caplog):
  options = PipelineOptions(["--sdk_container_image=reg/img:1"])
  monkeypatch.setattr(image_check, "image_versions",
                      lambda image: image_check.launcher_versions())
  image_check.check_worker_image(options)
  monkeypatch.setattr(image_check, "image_versions", lambda image: None)
  with caplog.at_level("INFO"):
    image_check.check_worker_image(options)
  assert "not checked against the launcher's" in caplog.text

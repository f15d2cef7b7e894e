"""The launcher and its workers agree: a build whose workers run in a
container image (--environment_type DOCKER with --environment_config, or
--sdk_container_image: Dataflow, Flink, Spark, Prism) checks before the
job starts that the image's Beam, Python and beam_tfrecords versions are
the launcher's. A mismatch is the common way such jobs fail late, with a
pickling or protocol error far from its cause (tensorflow/tfx#6386).

The versions come from the image's labels (the worker image's Dockerfile
writes them: io.beam-tfrecords.*), or, for an image without them, from
running the image's Python once. An image this machine does not hold
(a registry's, for Dataflow) and a machine without Docker are not
checked: the log says so.
"""

import json
import logging
import shutil
import subprocess
import sys
from typing import Dict, Optional

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.version import __version__

_LOG = logging.getLogger(__name__)

__all__ = ["check_worker_image", "image_of", "image_labels",
           "image_versions", "launcher_versions"]

_LABELS = {"beam": "io.beam-tfrecords.beam",
           "python": "io.beam-tfrecords.python",
           "beam_tfrecords": "io.beam-tfrecords.version"}
_PROBE = ("import sys, apache_beam, beam_tfrecords, json; print(json.dumps("
          "{'beam': apache_beam.__version__, 'python': '%d.%d' % "
          "sys.version_info[:2], 'beam_tfrecords': beam_tfrecords."
          "__version__}))")
_TIMEOUT = 300


def image_of(pipeline_options) -> Optional[str]:
  """The container image the workers run, from Beam's options, or None
  (LOOPBACK, PROCESS, EXTERNAL, the DirectRunner)."""
  # pylint: disable=import-outside-toplevel
  from apache_beam.options.pipeline_options import (PortableOptions,
                                                    WorkerOptions)
  image = pipeline_options.view_as(WorkerOptions).sdk_container_image
  if image:
    return image
  portable = pipeline_options.view_as(PortableOptions)
  if (portable.environment_type or "").upper() == "DOCKER":
    config = portable.environment_config
    if config and config.lstrip().startswith("{"):
      return json.loads(config).get("docker_image")
    return config or None
  return None


def launcher_versions() -> Dict[str, str]:
  import apache_beam  # pylint: disable=import-outside-toplevel
  return {"beam": apache_beam.__version__,
          "python": "%d.%d" % sys.version_info[:2],
          "beam_tfrecords": __version__}


def image_labels(image: str) -> Optional[Dict[str, str]]:
  """The labels of an image this machine's Docker holds, or None where it
  does not hold it."""
  inspect = subprocess.run(
      ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}",
       image], capture_output=True, text=True, timeout=_TIMEOUT)
  if inspect.returncode != 0:
    return None
  return json.loads(inspect.stdout or "null") or {}


def image_versions(image: str) -> Optional[Dict[str, str]]:
  """{beam, python, beam_tfrecords} of a local image (labels, else a run
  of its Python), or None where it cannot be told here."""
  if shutil.which("docker") is None:
    return None
  labels = image_labels(image)
  if labels is None:
    return None
  if all(label in labels for label in _LABELS.values()):
    return {k: labels[label] for k, label in _LABELS.items()}
  probe = subprocess.run(
      ["docker", "run", "--rm", "--network", "none", "--entrypoint",
       "python3", image, "-c", _PROBE], capture_output=True, text=True,
      timeout=_TIMEOUT)
  if probe.returncode != 0:
    found = (probe.stderr.strip().splitlines() or ["no output"])[-1]
    raise InputError(
        f"the worker image {image} cannot run beam_tfrecords ({found}): "
        "its workers would fail; build it with make worker-image "
        "(docs/operations.md, the worker image)")
  return json.loads(probe.stdout.strip().splitlines()[-1])


def check_worker_image(pipeline_options) -> None:
  """Refuses a build whose worker image's versions are not the
  launcher's, with one line saying which (see the module's docstring)."""
  image = image_of(pipeline_options)
  if image is None:
    return
  found = image_versions(image)
  if found is None:
    _LOG.info("the worker image %s is not on this machine (or Docker is "
              "not): its Beam, Python and beam_tfrecords versions are not "
              "checked against the launcher's", image)
    return
  mine = launcher_versions()
  differ = [f"{what} {found.get(what)} (the launcher: {mine[what]})"
            for what in ("beam", "python", "beam_tfrecords")
            if found.get(what) != mine[what]]
  if differ:
    raise InputError(
        f"the worker image {image} has " + ", ".join(differ) + ": workers "
        "and launcher must run the same versions; build the image for this "
        "launcher (make worker-image) or launch with the image's versions")

"""The worker image and the launcher must run the same Beam and Python."""

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

from tests.helpers.packaging import HERE


def _source_files(*roots):
  """Files of the checkout under `roots` (no caches), relative paths."""
  out = set()
  for root in roots:
    for folder, dirs, files in os.walk(os.path.join(HERE, root)):
      dirs[:] = [d for d in dirs if d != "__pycache__"]
      out.update(os.path.relpath(os.path.join(folder, f), HERE)
                 for f in files if not f.endswith(".pyc"))
  return out


# What a worker or a launcher in the container needs: every module, the
# bundled pipelines with their sample data, and the schemas they name.
SHIPPED = ("beam_tfrecords", "pipelines", "schemas")


def test_the_sdist_setup_file_builds_holds_everything(tmp_path):
  """--setup_file ./setup.py: Beam's stager builds this sdist and every
  worker pip-installs it."""
  from apache_beam.runners.portability.stager import Stager
  sdist = Stager._build_setup_package(os.path.join(HERE, "setup.py"),
                                      str(tmp_path))
  with tarfile.open(sdist) as tar:
    names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
  expected = _source_files(*SHIPPED) | {"setup.py", "README.md"}
  assert expected <= names, sorted(expected - names)


def _wheel(source, out):
  """Builds from a copy: an in-place build leaves build/lib behind, and a
  stale build/lib (files since renamed) would end up in the next wheel."""
  clean = out / "src"
  # Every virtualenv (.venv, .venv-py313, ...: gigabytes) left out.
  shutil.copytree(source, clean, ignore=shutil.ignore_patterns(
      "build", ".venv*", ".git", ".mypy_cache", ".pytest_cache",
      "*.egg-info", "__pycache__", "out", "site"))
  subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                  "-w", str(out), str(clean)], check=True, timeout=600)
  return next(out.glob("*.whl"))


def _installed_name(name: str) -> str:
  """Where a source file lands in site-packages: pipelines/ as
  beam_tfrecords/pipelines/, schemas/ as beam_tfrecords/pipelines/schemas/
  (no top-level `pipelines` or `schemas` package to collide with another
  distribution's)."""
  if name.startswith(("pipelines/", "schemas/")):
    return ("beam_tfrecords/pipelines/schemas/" + name[len("schemas/"):]
            if name.startswith("schemas/")
            else "beam_tfrecords/" + name)
  return name


@pytest.mark.slow
def test_the_wheel_holds_everything(tmp_path):
  with zipfile.ZipFile(_wheel(HERE, tmp_path)) as whl:
    names = {n for n in whl.namelist() if ".dist-info/" not in n}
  expected = {_installed_name(n) for n in _source_files(*SHIPPED)}
  assert expected <= names, sorted(expected - names)
  assert {n.split("/")[0] for n in names} == {"beam_tfrecords"}


@pytest.mark.slow
def test_the_dockerfile_build_context_is_enough_for_the_package(tmp_path):
  """What the Dockerfile COPYs is in the context `make worker-image`
  assembles (testing.worker_image.CONTEXT, and the native core's wheel),
  and the package COPYed there builds the same wheel as the checkout.
  (The image itself is built and run in the cluster tier:
  tests/cluster/test_worker_image.py.)"""
  from beam_tfrecords.testing.worker_image import CONTEXT
  with open(os.path.join(HERE, "Dockerfile")) as f:
    text = f.read()
  context = tmp_path / "context"
  context.mkdir()
  for line in re.findall(r"^COPY\s+([^-].+)$", text, re.M):
    *sources, dest = line.split()
    for src in sources:
      assert src in CONTEXT + ("native-wheel",), src
      if src == "native-wheel" or not dest.startswith("/tmp/beam_tfrecords"):
        continue
      target = context / src
      if os.path.isdir(os.path.join(HERE, src)):
        shutil.copytree(os.path.join(HERE, src), target,
                        ignore=shutil.ignore_patterns("__pycache__"))
      else:
        shutil.copy(os.path.join(HERE, src), target)
  assert "pip install --no-cache-dir --no-index" in text
  with zipfile.ZipFile(_wheel(context, tmp_path / "a")) as a, \
      zipfile.ZipFile(_wheel(HERE, tmp_path / "b")) as b:
    assert sorted(a.namelist()) == sorted(b.namelist())

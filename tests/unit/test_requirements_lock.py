"""The lock of exact versions (requirements/py3XX.txt) that `make setup`
and CI install: it must still satisfy setup.py's ranges, hold every
requirement with its hashes, and be what the Makefile installs. A change of
setup.py that the lock no longer meets fails here; `make lock` refreshes
it (issue 36: a release of NumPy, pyarrow or protobuf cannot turn a fresh
clone red overnight)."""

import glob
import os
import re
import runpy
import sys
from unittest import mock

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers.paths import ROOT

HERE = ROOT
LOCKS = sorted(glob.glob(os.path.join(HERE, "requirements", "py3*.txt")))


def _setup_kwargs() -> dict:
  """What setup.py passes to setuptools.setup()."""
  with mock.patch("setuptools.setup") as setup:
    runpy.run_path(os.path.join(HERE, "setup.py"))
  return setup.call_args.kwargs


def _locked(path: str) -> dict:
  """{canonical name: (version, [hashes])} of a lock file."""
  out, name = {}, None
  with open(path) as f:
    for line in f:
      m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s\\;]+)", line)
      if m:
        name = canonicalize_name(m.group(1))
        out[name] = (m.group(2), [])
      for digest in re.findall(r"--hash=sha256:([0-9a-f]{64})", line):
        out[name][1].append(digest)
  return out


def _python_of(path: str) -> str:
  digits = re.search(r"py3(\d+)\.txt$", path).group(1)
  return f"3.{digits}"


def test_there_is_a_lock_for_the_python_ci_runs():
  assert os.path.join(HERE, "requirements", "py311.txt") in LOCKS


@pytest.mark.parametrize("lock", LOCKS, ids=os.path.basename)
def test_the_lock_satisfies_setup_py(lock):
  kwargs = _setup_kwargs()
  locked = _locked(lock)
  env = {"python_version": _python_of(lock), "sys_platform": "linux",
         "platform_system": "Linux", "platform_machine": "x86_64",
         "extra": ""}
  wanted = [Requirement(r) for r in kwargs["install_requires"]
            + kwargs["extras_require"]["test"]]
  assert wanted
  for req in wanted:
    if req.marker is not None and not req.marker.evaluate(env):
      continue
    name = canonicalize_name(req.name)
    assert name in locked, f"{req} is not in {lock}: run make lock"
    version = locked[name][0]
    assert req.specifier.contains(version, prereleases=True), (
        f"{lock} pins {req.name}=={version}, outside setup.py's {req}: "
        "run make lock")
  assert all(len(h) == 64 for _, hashes in locked.values() for h in hashes)
  assert all(hashes for _, hashes in locked.values()), \
      "every locked file is hash-checked"
  assert Requirement(f"x{kwargs['python_requires']}").specifier.contains(
      _python_of(lock) + ".0")


def test_make_setup_installs_the_lock_with_hashes():
  with open(os.path.join(HERE, "Makefile")) as f:
    makefile = f.read()
  assert "LOCK := requirements/py$(PY_VERSION).txt" in makefile
  assert "--require-hashes --no-deps -r $(LOCK)" in makefile
  assert "pip check" in makefile


def test_this_environment_is_the_locked_one():
  """make setup writes the lock it installed into the venv's .installed;
  every package the lock names is then installed at exactly its version."""
  from importlib import metadata
  marker = os.path.join(sys.prefix, ".installed")
  if not os.path.exists(marker):
    pytest.skip("this environment was not set up by make setup")
  with open(marker) as f:
    lock = f.read().strip()
  if not lock.startswith("requirements/"):
    pytest.skip(f"make setup installed from setup.py's ranges ({lock})")
  mismatched = {}
  for name, (version, _) in _locked(os.path.join(HERE, lock)).items():
    try:
      got = metadata.version(name)
    except metadata.PackageNotFoundError:
      got = None
    if got != version:
      mismatched[name] = (version, got)
  assert not mismatched


def test_the_worker_images_lock_is_the_full_locks_runtime_part():
  """requirements/runtime-py311.txt (what the worker image installs) pins
  every install requirement of setup.py at the full lock's version, with
  the same hashes, and none of the test tools."""
  runtime = _locked(os.path.join(HERE, "requirements", "runtime-py311.txt"))
  full = _locked(os.path.join(HERE, "requirements", "py311.txt"))
  assert runtime
  for name, pinned in runtime.items():
    assert full.get(name) == pinned, f"{name}: run make lock"
  kwargs = _setup_kwargs()
  for req in map(Requirement, kwargs["install_requires"]):
    if req.marker is None or req.marker.evaluate({
        "python_version": "3.11", "sys_platform": "linux", "extra": ""}):
      assert canonicalize_name(req.name) in runtime, req
  for tool in ("pytest", "hypothesis", "moto", "mypy"):
    assert tool not in runtime

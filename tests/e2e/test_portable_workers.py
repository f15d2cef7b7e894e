"""beam_tfrecords/testing/portable.py: what the workers' Python is given
(a child process builds wheels)."""

import os
import subprocess
import sys

from beam_tfrecords.testing.portable import LocalPortable


def _wheel(tmp_path, module: str) -> str:
  """A wheel of the package `pkgx` 1.0 holding only pkgx/<module>.py."""
  src = tmp_path / f"src-{module}"
  (src / "pkgx").mkdir(parents=True)
  (src / "pkgx" / "__init__.py").write_text("")
  (src / "pkgx" / f"{module}.py").write_text(f"NAME = {module!r}\n")
  (src / "setup.py").write_text(
      "from setuptools import setup\n"
      "setup(name='pkgx', version='1.0', packages=['pkgx'])\n")
  out = tmp_path / f"wheel-{module}"
  subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                  "--no-build-isolation", "-w", str(out), str(src)],
                 check=True, capture_output=True)
  (name,) = os.listdir(out)
  return str(out / name)


def test_a_workdir_used_before_gets_the_new_wheel(tmp_path):
  """The same version again (a tree that changed since the workdir was
  made): its modules replace the old ones; `pip install --target` alone
  left the old package and the workers lacked the new module."""
  cluster = LocalPortable(str(tmp_path / "cluster"), servers=False)
  cluster.purelib = str(tmp_path / "purelib")
  cluster.install(_wheel(tmp_path, "old"))
  cluster.install(_wheel(tmp_path, "new"))
  package = os.path.join(cluster.purelib, "pkgx")
  assert sorted(n for n in os.listdir(package) if n.endswith(".py")) == [
      "__init__.py", "new.py"]

"""The worker image and the launcher must run the same Beam and Python."""

import os
import re
import sys

import apache_beam

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _setup_beam_version():
  with open(os.path.join(HERE, "setup.py")) as f:
    return re.search(r'BEAM_VERSION = "([^"]+)"', f.read()).group(1)


def test_dockerfile_base_matches_pinned_beam_and_python():
  with open(os.path.join(HERE, "Dockerfile")) as f:
    base = re.search(r"^FROM\s+(\S+)", f.read(), re.M).group(1)
  m = re.fullmatch(r"apache/beam_python(\d+)\.(\d+)_sdk:(\S+)", base)
  assert m, f"unexpected base image {base}"
  assert m.group(3) == _setup_beam_version() == apache_beam.__version__
  assert (int(m.group(1)), int(m.group(2))) == sys.version_info[:2]

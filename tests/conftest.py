"""Shared fixtures, and the tiers: a test's folder is its tier."""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The debug logs of failed builds (beam_tfrecords.cli) go to a folder of
# the test run's, not the system's temporary folder.
os.environ.setdefault("BTR_LOG_DIR", os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"btr-test-logs-{os.getpid()}"))

# croissant.json holds the build time, the one thing in a dataset that
# differs between two runs of the same build: the suite fixes it the
# reproducible-builds way, so that its comparisons of whole datasets
# (rebuilt, killed and resumed, on other runners) hold.
# tests/e2e/test_croissant.py checks the time without it.
os.environ.setdefault("SOURCE_DATE_EPOCH", "1795000000")

import pytest

# Fixtures that tests in more than one folder use (a plugin registers them
# for every test, without an import in each file).
pytest_plugins = ["tests.helpers.publish_kills", "tests.helpers.schedule"]


@pytest.fixture(scope="session")
def tf():
  import tensorflow
  return tensorflow


# The tiers (pytest.ini, docs/development.md): the folder under tests/ is
# the marker. tests/unit/<package>/test_<module>.py tests a module of the
# library on values (no pipeline, no child process: tests/unit/conftest.py
# fails one that starts either), tests/e2e/ runs builds and the CLI,
# tests/cluster/ starts servers on 127.0.0.1. A test that uses one of
# these fixtures starts servers, so it belongs in tests/cluster/
# (tests/unit/test_layout.py checks that each is defined).
CLUSTER_FIXTURES = {"s3", "portable_pool", "portable", "bare_pool",
                    "cluster", "flink", "spark"}
TIERS = ("unit", "e2e", "cluster")
LONGEST_FILES = ("test_spark.py", "test_flink.py")
TESTS = pathlib.Path(__file__).resolve().parent


def tier_of(path) -> str:
  """tests/<tier>/... -> tier; anything else is no test file of ours."""
  parts = pathlib.Path(path).resolve().relative_to(TESTS).parts
  return parts[0] if len(parts) > 1 and parts[0] in TIERS else ""


def pytest_collection_modifyitems(items):
  wrong = []
  for item in items:
    tier = tier_of(item.path)
    servers = sorted(CLUSTER_FIXTURES & set(getattr(item, "fixturenames",
                                                   ())))
    if not tier:
      wrong.append(f"{item.nodeid}: not in tests/unit, tests/e2e or "
                   "tests/cluster")
    elif servers and tier != "cluster":
      wrong.append(f"{item.nodeid}: its fixtures {', '.join(servers)} start "
                   "servers: it belongs in tests/cluster/")
    item.add_marker(getattr(pytest.mark, tier or "e2e"))
  assert not wrong, "tests in the wrong tier:\n  " + "\n  ".join(wrong)
  # The longest files first (pytest-xdist's --dist loadfile hands files
  # out in this order): the two engines' take about 7 minutes each, and
  # started last one of them would run alone at the end of the tier.
  items.sort(key=lambda item: item.path.name not in LONGEST_FILES)

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
CLUSTER_FIXTURES = {"s3", "gcs", "portable_pool", "portable", "bare_pool",
                    "cluster", "flink", "spark", "prism"}
TIERS = ("unit", "e2e", "cluster")
LONGEST_FILES = ("test_spark.py", "test_flink.py")
# The fast tier's longest files, longest first (seconds each on 2 cores,
# `--durations=0`, issue 61: 6-15 s; TensorFlow Transform's builds and
# child processes). Handed out first as well, so that the tier ends with
# the short files on both workers, not one of these running alone.
LONG_FAST_FILES = tuple(f"e2e/test_{name}.py" for name in (
    "croissant", "preprocessing_fn", "native_fallback", "bad_input",
    "expectations", "signals", "windows", "readers_never_lie",
    "bundled_bytes", "preprocess", "schedule", "values", "tft_sequences",
    "transform"))
TESTS = pathlib.Path(__file__).resolve().parent


def tier_of(path) -> str:
  """tests/<tier>/... -> tier; anything else is no test file of ours."""
  parts = pathlib.Path(path).resolve().relative_to(TESTS).parts
  return parts[0] if len(parts) > 1 and parts[0] in TIERS else ""


def pytest_configure(config):
  """pytest-xdist hands `--dist loadfile`'s files out by their number of
  tests, most first, unless told not to (--loadscope-reorder is its
  default, 3.8 here): files of one or two long tests (TensorFlow
  Transform's builds, the engines' in the cluster tier) then started
  last and ran alone at the tier's end. The order
  pytest_collection_modifyitems gives, the longest files first, is kept
  instead."""
  if getattr(config.option, "loadscopereorder", False):
    config.option.loadscopereorder = False


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
  first = LONGEST_FILES + LONG_FAST_FILES

  def rank(item):
    for name in (item.path.name,
                 item.path.resolve().relative_to(TESTS).as_posix()):
      if name in first:
        return first.index(name)
    return len(first)
  items.sort(key=rank)

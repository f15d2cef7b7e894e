"""What tests/e2e/test_publish_kills.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import pytest

import beam_tfrecords as btr

from tests.helpers.datasets import _files


SCHEMA = {"name": "k", "features": {"id": {"type": "int64",
                                          "required": True}}}
OPTIONS = {"max_bad_fraction": 1.0}
STAGING = ".staging-0123456789ab"


class Killed(BaseException):
  """Stands for a kill: nothing of ours catches it."""


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
  """An old dataset (3 shards) and a new one (2 shards), both with an
  errors file; their inputs."""
  root = tmp_path_factory.mktemp("kills")
  made = {}
  for name, ids, shards in (("old", range(9), 3), ("new", range(100, 120), 2)):
    src = root / f"{name}.csv"
    src.write_text("id\n" + "".join(f"{i}\n" for i in ids) + "oops\n")
    btr.build(SCHEMA, str(src), str(root / name), num_shards=shards,
              **OPTIONS)
    made[name] = {"dir": str(root / name), "src": str(src),
                  "shards": shards, "files": _files(root / name)}
  return made


def _kill_at(k):
  count = [0]

  def hook(operation, paths):
    if count[0] == k:
      raise Killed(operation, paths)
    count[0] += 1
  return hook, count

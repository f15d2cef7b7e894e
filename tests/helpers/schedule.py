"""What tests/e2e/test_schedule.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import os

import pytest


SCHEMA = "name: s\nfeatures:\n  id: {type: int64, required: true}\n  v: int64\n"


def _csv(path, rows):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    f.write("id,v\n" + "".join(f"{r}\n" for r in rows))


@pytest.fixture
def tree(tmp_path):
  for day in ("2026-11-19", "2026-11-20", "2026-11-21"):
    y, m, d = day.split("-")
    _csv(tmp_path / "logs" / y / m / d / "part-0.csv", [f"1,{d}", f"2,{d}"])
  for span, versions in ((3, (1, 2)), (12, (1,)), (7, (4,))):
    for v in versions:
      _csv(tmp_path / "spans" / f"span-{span:05d}" / f"v{v}" / "a.csv",
           [f"{span},{v}"])
  (tmp_path / "s.yaml").write_text(SCHEMA)
  return tmp_path

"""Scheduled builds: placeholders, ranges, latest, skip-if-unchanged, exit
codes and the JSON summary."""

import json
import os
import time

from beam_tfrecords import cli

from tests.helpers.schedule import SCHEMA, _csv


def _run(capsys, *argv):
  code = cli.main(["build", *argv, "--summary-json"])
  lines = [l for l in capsys.readouterr().out.splitlines() if l.strip()]
  summary = json.loads(lines[-1])
  assert summary["exit_code"] == code
  return summary


def test_skip_if_unchanged_and_exit_codes(tree, capsys):
  args = ["--schema", str(tree / "s.yaml"), "--input",
          str(tree / "logs/{YYYY}/{MM}/{DD}/*.csv"), "--output",
          str(tree / "out/{YYYY}{MM}{DD}"), "--date", "2026-11-21"]
  first = _run(capsys, *args)
  assert first["status"] == "built" and first["records"] == 2
  assert first["schedule"] == {"date": "2026-11-21"}
  again = _run(capsys, *args)
  assert again["status"] == "up_to_date" and again["exit_code"] == 0
  assert _run(capsys, *args, "--overwrite")["status"] == "up_to_date"
  assert _run(capsys, *args, "--force", "--overwrite")["status"] == "built"
  # A changed input rebuilds (with --overwrite: it replaces a dataset).
  time.sleep(0.01)
  _csv(tree / "logs/2026/11/21/part-0.csv", ["1,5", "2,6", "3,7"])
  changed = _run(capsys, *args)
  assert changed["status"] == "error" and changed["exit_code"] == 2
  assert "already holds a finished dataset" in changed["error"]
  rebuilt = _run(capsys, *args, "--overwrite")
  assert rebuilt["status"] == "built" and rebuilt["records"] == 3
  # So does a changed schema.
  (tree / "s.yaml").write_text(SCHEMA + "description: now described\n")
  assert _run(capsys, *args, "--overwrite")["status"] == "built"
  assert _run(capsys, *args, "--overwrite")["status"] == "up_to_date"
  # Nothing for the date: exit 4; too many bad rows: exit 3.
  missing = _run(capsys, *args[:-1], "2026-12-01")
  assert missing == {**missing, "status": "no_input", "exit_code": 4}
  _csv(tree / "logs/2026/11/20/part-0.csv", ["1,1", "x,2", "y,3"])
  bad = _run(capsys, *args[:-1], "2026-11-20", "--max-bad-rows", "1")
  assert bad["status"] == "too_many_bad_rows" and bad["exit_code"] == 3
  assert not os.path.exists(tree / "out/20261120/_SUCCESS")

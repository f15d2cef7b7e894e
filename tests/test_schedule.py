"""Scheduled builds: placeholders, ranges, latest, skip-if-unchanged, exit
codes and the JSON summary."""

import json
import os
import time

import pytest

from beam_tfrecords import InputError, cli
from beam_tfrecords.building.schedule import NoInputError, Schedule, resolve_patterns

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


def test_placeholders_dates_ranges_and_latest(tree):
  logs = str(tree / "logs" / "{YYYY}" / "{MM}" / "{DD}" / "*.csv")
  out = str(tree / "out" / "{YYYY}{MM}{DD}")
  inputs, output, chosen = resolve_patterns([logs], out,
                                            Schedule(date="2026-11-20"))
  assert inputs == [str(tree / "logs/2026/11/20/*.csv")]
  assert output == str(tree / "out/20261120")
  assert chosen == {"date": "2026-11-20"}
  inputs, output, chosen = resolve_patterns([logs], out,
                                            Schedule(date="latest"))
  assert chosen == {"date": "2026-11-21"} and output.endswith("20261121")
  inputs, output, chosen = resolve_patterns(
      [logs], out, Schedule(date="2026-11-19..2026-11-21"))
  assert inputs == [str(tree / f"logs/2026/11/{d}/*.csv")
                    for d in (19, 20, 21)]
  assert output.endswith("20261121")  # a range: its last value
  with pytest.raises(NoInputError, match="nothing matches .*2026/11/22"):
    resolve_patterns([logs], out, Schedule(date="2026-11-22"))
  with pytest.raises(InputError, match="give --date"):
    resolve_patterns([logs], out, Schedule())
  with pytest.raises(InputError, match="give YYYY-MM-DD"):
    resolve_patterns([logs], out, Schedule(date="21.11.2026"))
  with pytest.raises(InputError, match="ends before it starts"):
    resolve_patterns([logs], out, Schedule(date="2026-11-21..2026-11-19"))


def test_spans_and_versions(tree):
  spans = str(tree / "spans" / "span-{SPAN:5}" / "v{VERSION}" / "*.csv")
  out = str(tree / "out" / "span-{SPAN}")
  inputs, output, chosen = resolve_patterns(
      [spans], out, Schedule(span="latest", version="latest"))
  assert chosen == {"span": 12, "version": 1}
  assert inputs == [str(tree / "spans/span-00012/v1/*.csv")]
  assert output == str(tree / "out/span-12")
  _, _, chosen = resolve_patterns([spans], out,
                                  Schedule(span="3", version="latest"))
  assert chosen == {"span": 3, "version": 2}  # the span's newest version
  inputs, _, chosen = resolve_patterns([spans], out,
                                       Schedule(span="7", version="4"))
  assert chosen == {"span": 7, "version": 4}
  with pytest.raises(NoInputError, match="span-00004"):
    resolve_patterns([spans], out, Schedule(span="3..7", version="1"))
  with pytest.raises(InputError, match="give --version"):
    resolve_patterns([spans], out, Schedule(span="3"))


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

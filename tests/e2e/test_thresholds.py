"""Strict by default about rejected rows: more than --max-bad-fraction
(1%) fails the build and publishes nothing, a split left empty fails it."""

import glob
import os
import textwrap

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli

from tests.helpers.cli_builds import SCHEMA_YAML, _bad_rows, _build, _write_inputs


@pytest.mark.parametrize("good,bad", [(0, 4), (1, 49), (3, 1)],
                         ids=["all", "98_percent", "25_percent"])
def test_rejected_rows_over_one_percent_fail_by_default(tmp_path, capsys,
                                                        good, bad):
  assert _build(tmp_path, rows=_bad_rows(good, bad)) == cli.EXIT_BAD_ROWS
  err = capsys.readouterr().err
  total = good + bad
  assert f"{bad:,} of {total:,} rows ({bad / total:.2%}) were rejected: " \
      "more than --max-bad-fraction 0.01 (the default) allow" in err
  assert "; the dataset was not published" in err
  assert f"  {bad:,} rows: In feature \"score\": could not parse … as " \
      "float\n    e.g. " in err
  assert "row " + str(good + 1) + ": In feature \"score\": could not parse " \
      "'x' as float" in err
  assert not os.path.exists(tmp_path / "out" / "_SUCCESS")
  assert not glob.glob(str(tmp_path / "out" / "*.tfrecord.gz"))


def test_one_percent_or_less_publishes_and_reports_reasons(tmp_path, capsys):
  assert _build(tmp_path, rows=_bad_rows(99, 1)) == 0
  out = capsys.readouterr().out
  assert "rejected: 1 (see" in out
  assert "  top reasons for rejected rows:\n    1 rows: In feature " \
      "\"score\": could not parse … as float\n      e.g. " in out
  assert "row 100: In feature \"score\": could not parse 'x' as float" in out
  assert os.path.exists(tmp_path / "out" / "_SUCCESS")


def test_an_explicit_threshold_replaces_the_default(tmp_path, capsys):
  assert _build(tmp_path, "--max-bad-fraction", "1",
                rows=_bad_rows(1, 3)) == 0
  assert btr.dataset_info(
      str(tmp_path / "out")).counts.rows_rejected == 3
  # The schema key does the same.
  schema = SCHEMA_YAML + "max_bad_rows: 5\n"
  schema_path, data = _write_inputs(tmp_path, _bad_rows(1, 3), schema)
  assert cli.main(["build", "--schema", schema_path, "--input", data,
                   "--output", str(tmp_path / "out2")]) == 0


SPLIT_SCHEMA = textwrap.dedent("""\
    name: t
    features:
      id: {type: int64}
      score: {type: float}
      part: {type: string}
    splits:
      column: part
      values: [train, eval]
    """)


def test_a_split_left_empty_by_rejections_fails_by_default(tmp_path, capsys):
  rows = [f"{i},0.5,train\n" for i in range(300)] + ["999,oops,eval\n"]
  (tmp_path / "s.yaml").write_text(SPLIT_SCHEMA)
  (tmp_path / "in.csv").write_text("id,score,part\n" + "".join(rows))
  args = ["build", "--schema", str(tmp_path / "s.yaml"), "--input",
          str(tmp_path / "in.csv"), "--output", str(tmp_path / "out")]
  # 1 of 301 rows (0.33%) is under the 1% default, but it was eval's only.
  assert cli.main(args) == cli.EXIT_BAD_ROWS
  err = capsys.readouterr().err
  assert "1 of 301 rows (0.33%) were rejected: the split eval got no " \
      "records; the dataset was not published" in err
  assert cli.main(args + ["--max-bad-rows", "1"]) == 0
  info = btr.dataset_info(str(tmp_path / "out"))
  assert info.splits["eval"].num_records == 0
  assert info.splits["train"].num_records == 300

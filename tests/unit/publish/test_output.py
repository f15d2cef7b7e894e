"""beam_tfrecords/publish/output.py, on values: The output folder as a publish
sees it: its path checked (no root, no pattern, not a file), its _SUCCESS
and its finished dataset.json read."""

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError, cli

from tests.helpers.cli_builds import _write_inputs
from tests.helpers.faults import SCHEMA, write_rows


def test_output_paths_with_glob_characters_are_refused(tmp_path):
  src = write_rows(tmp_path / "in.csv", 3)
  with pytest.raises(InputError, match=r"cannot hold \*, \?, \[ or \]"):
    btr.build(SCHEMA, src, str(tmp_path / "exp[1]"))


# --- Messages ----------------------------------------------------------------

def test_an_output_that_is_a_file_is_refused(tmp_path, capsys):
  schema, data = _write_inputs(tmp_path, [(1, 0.5)])
  assert cli.main(["build", "--schema", schema, "--input", data,
                   "--output", data]) == cli.EXIT_INPUT
  assert f"error: output {data} is a file; a dataset is a folder" in \
      capsys.readouterr().err

"""beam_tfrecords/cli/args.py, on values: The command line's arguments:
`parser()` and the build's own flags."""

import os

import pytest

from beam_tfrecords import cli

from tests.helpers.cli_builds import _build


# --- No argument is silently discarded -----------------------------------

@pytest.mark.parametrize("extra,message", [
    (["--num_shards", "4"], "unknown argument --num_shards; did you mean "
     "--num-shards?"),
    (["--overwite"], "unknown argument --overwite; did you mean "
     "--overwrite?"),
    (["--max_bad_rows", "0"], "unknown argument --max_bad_rows; did you "
     "mean --max-bad-rows?"),
    (["--direct_num_worker", "2"], "did you mean --direct_num_workers?"),
    (["--no_such_thing=1"], "unknown argument --no_such_thing=1 Neither "),
    # An unquoted glob: the shell expanded it to more files.
    (["b.csv", "c.csv"], "unexpected argument(s) b.csv c.csv: --input takes "
     "one file or glob: quote a glob so that the shell does not expand it "
     "(--input 'data/*.csv'), or repeat --input for each file"),
    (["--runner", "Nonexistent"], "--runner Nonexistent: Beam has no runner "
     "of that name. Known runners: DataflowRunner,"),
    (["--runner", "DirectRuner"], "did you mean DirectRunner?"),
], ids=["underscore", "typo", "threshold_flag", "beam_typo", "with_value",
        "unquoted_glob", "unknown_runner", "runner_typo"])
def test_unknown_arguments_are_refused(tmp_path, capsys, extra, message):
  assert _build(tmp_path, *extra) == cli.EXIT_INPUT
  err = capsys.readouterr().err
  assert message in err, err
  assert not os.path.exists(tmp_path / "out" / "_SUCCESS")

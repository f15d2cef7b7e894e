"""An error of ours is one line (issue 44): Beam's tracebacks go to a
debug log that the error names; --verbose still shows them, and a bug
still shows its traceback."""

import os
import textwrap

import pyarrow as pa
import pytest

from beam_tfrecords import cli

from tests.helpers.bad_input import damaged_parquet
from tests.helpers.inputs import write_csv
from tests.helpers.signals import _cli, _csv


# The CLI with a full disk for the shards (FileSystems.create fails as a
# full disk does), in a subprocess as the real command.
FULL_DISK = textwrap.dedent("""
    import sys
    from apache_beam.io.filesystems import FileSystems
    real = FileSystems.create
    def full(path, *args, **kwargs):
      if "train-" in path:
        raise OSError(28, "No space left on device")
      return real(path, *args, **kwargs)
    FileSystems.create = staticmethod(full)
    from beam_tfrecords.cli import main
    sys.exit(main(sys.argv[1:]))
""")

# The CLI with a bug in the last step (not an error of ours).
A_BUG = textwrap.dedent("""
    import sys
    from beam_tfrecords.publish import finish
    def bug(*args, **kwargs):
      raise ZeroDivisionError("a bug")
    finish.check_thresholds = bug
    from beam_tfrecords.cli import main
    sys.exit(main(sys.argv[1:]))
""")


# --- One line per error ------------------------------------------------------

def _broken_inputs(tmp_path, case):
  """(extra CLI flags, exit code, the error line's start, script) of each
  failure inside the pipeline."""
  if case == "bad_rows":
    return (["--input", _csv(tmp_path, 3, bad=True), "--max-bad-rows", "0"],
            cli.EXIT_BAD_ROWS, "error: 1 of 4 rows (25.00%) were rejected",
            None)
  if case == "truncated_gzip":
    path = write_csv(tmp_path / "t.csv.gz",
                     [{"id": i, "score": 0.5} for i in range(20000)], gz=True)
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 2])
    return (["--input", path], cli.EXIT_INPUT,
            f"error: {path}: the gzip data ends early", None)
  if case == "corrupt_tfrecord":
    path = tmp_path / "c.tfrecord"
    path.write_bytes(b"\x10" + b"\x00" * 7 + b"garbage" * 20)
    return (["--input", str(path), "--format", "tfrecord"], cli.EXIT_INPUT,
            f"error: {path}: corrupt length CRC at record 1", None)
  if case == "damaged_parquet":
    table = pa.table({"id": pa.array(range(3000), pa.int64()),
                      "score": pa.array([i / 8 for i in range(3000)])})
    path = damaged_parquet(tmp_path / "d.parquet", table, "checksummed_page")
    return (["--input", path], cli.EXIT_INPUT,
            f"error: {path}: row group 1 (of 3, counted from 0; rows "
            "1,001-2,000) cannot be read: could not verify page integrity",
            None)
  assert case == "full_disk"
  return (["--input", _csv(tmp_path)], cli.EXIT_INPUT,
          "error: cannot write the dataset to ", FULL_DISK)


CASES = ["bad_rows", "truncated_gzip", "corrupt_tfrecord", "damaged_parquet",
         "full_disk"]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_an_error_in_the_pipeline_is_one_line_and_a_debug_log(tmp_path,
                                                              case):
  flags, code, start, script = _broken_inputs(tmp_path, case)
  out = tmp_path / "out"
  done = _cli(tmp_path, *flags, "--output", str(out), script=script)
  assert done.returncode == code, done.stderr
  lines = done.stderr.splitlines()
  assert "Traceback" not in done.stderr
  assert not [line for line in lines if line.startswith("ERROR apache_beam")]
  (error,) = [i for i, line in enumerate(lines) if line.startswith("error:")]
  assert lines[error].startswith(start)
  # The error comes last (its message may go on, indented).
  assert all(line.startswith("  ") for line in lines[error + 1:])
  (details,) = [i for i, line in enumerate(lines)
                if line.startswith("details: ")]
  assert details < error
  details = lines[details]
  log = details[len("details: "):]
  assert os.path.dirname(log) == str(tmp_path / "logs")
  assert os.listdir(tmp_path / "logs") == [os.path.basename(log)]
  text = open(log, encoding="utf-8").read()
  # Beam's log of the failed step, and our error's full traceback.
  assert "ERROR apache_beam." in text
  assert "Traceback (most recent call last):" in text
  assert "ERROR beam_tfrecords.cli: the command failed" in text
  assert start[len("error: "):] in text
  assert len(lines) <= 5  # (the rejected rows' reasons: 2 more lines)
  assert not (out / "_SUCCESS").exists()


@pytest.mark.slow
def test_verbose_still_shows_beam_on_stderr(tmp_path):
  flags, code, start, _ = _broken_inputs(tmp_path, "bad_rows")
  done = _cli(tmp_path, *flags, "--output", str(tmp_path / "out"),
              "--verbose")
  assert done.returncode == code
  lines = done.stderr.splitlines()
  assert [line for line in lines if line.startswith("ERROR apache_beam")]
  assert "Traceback (most recent call last):" in done.stderr
  assert [line for line in lines if line.startswith("INFO ")]
  assert [line for line in lines if line.startswith("error:")][0].startswith(
      start)
  assert not [line for line in lines if line.startswith("details:")]
  assert not (tmp_path / "logs").exists()


def test_an_error_before_the_run_names_no_log(tmp_path):
  done = _cli(tmp_path, "--input", str(tmp_path / "missing.csv"),
              "--output", str(tmp_path / "out"))
  assert done.returncode == cli.EXIT_INPUT
  assert done.stderr.startswith("error: ")
  assert len(done.stderr.splitlines()) == 1
  assert not os.listdir(tmp_path / "logs")  # made, then removed


@pytest.mark.slow
def test_a_bug_still_shows_its_traceback(tmp_path):
  done = _cli(tmp_path, "--input", _csv(tmp_path), "--output",
              str(tmp_path / "out"), script=A_BUG)
  assert done.returncode == cli.EXIT_FAILED
  assert "Traceback (most recent call last):" in done.stderr
  assert done.stderr.splitlines()[-1].startswith("ZeroDivisionError: a bug")
  (details,) = [line for line in done.stderr.splitlines()
                if line.startswith("details: ")]
  assert os.path.exists(details[len("details: "):])

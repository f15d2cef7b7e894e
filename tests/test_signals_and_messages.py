"""SIGTERM is a Ctrl-C said as such, and an error of ours is one line
(issue 44): Beam's tracebacks go to a debug log that the error names;
--verbose still shows them, and a bug still shows its traceback."""

import glob
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import textwrap
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.core.errors import PublishInterruptedError
from beam_tfrecords.runners import run

from test_build import write_csv
from test_publish_kills import _files
from test_trust import SLOW_MODULE

SCHEMA_YAML = "name: t\nfeatures:\n  id: {type: int64}\n  score: {type: float}\n"
TERMINATED = ("terminated (SIGTERM): nothing was published (this build's "
              "staging folder was removed)\n")

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


def _env(tmp_path):
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(tmp_path),
              BTR_LOG_DIR=str(tmp_path / "logs"))


def _cli(tmp_path, *args, script=None):
  command = ["-c", script] if script else ["-m", "beam_tfrecords"]
  return subprocess.run(
      [sys.executable, *command, "build", "--schema", _schema(tmp_path),
       *args], capture_output=True, text=True, env=_env(tmp_path),
      cwd=str(tmp_path), timeout=300)


def _schema(tmp_path):
  path = tmp_path / "s.yaml"
  path.write_text(SCHEMA_YAML)
  return str(path)


def _csv(tmp_path, rows=100, bad=False, name="in.csv"):
  path = tmp_path / name
  path.write_text("id,score\n" + "".join(f"{i},0.5\n" for i in range(rows))
                  + ("999,oops\n" if bad else ""))
  return str(path)


def _start_slow_build(tmp_path, out, *extra):
  (tmp_path / "slowmod.py").write_text(SLOW_MODULE)
  proc = subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
       _schema(tmp_path), "--input", _csv(tmp_path, 20, name="slow.csv"),
       "--output", str(out), "--preprocess", "slowmod:slow", *extra],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=_env(tmp_path), cwd=str(tmp_path))
  deadline = time.monotonic() + 120
  # The staging folder appears when the pipeline starts.
  while not glob.glob(str(out / ".staging-*")):
    assert proc.poll() is None, proc.communicate()
    assert time.monotonic() < deadline
    time.sleep(0.1)
  time.sleep(2)  # well inside the sleeping step
  return proc


# --- SIGTERM -----------------------------------------------------------------

def test_sigterm_during_a_build_exits_143_and_removes_staging(tmp_path):
  out = tmp_path / "out"
  proc = _start_slow_build(tmp_path, out)
  proc.send_signal(signal.SIGTERM)  # to the build only, as a scheduler does
  stdout, stderr = proc.communicate(timeout=60)
  assert proc.returncode == cli.EXIT_TERMINATED == 143, stderr
  assert stderr == TERMINATED
  assert stdout == ""
  # Nothing published, nothing left: the folder the build made is gone.
  assert not glob.glob(str(out / ".staging-*"))
  assert not (out / "_SUCCESS").exists()
  assert not out.exists()
  assert not (tmp_path / "logs").exists() or not os.listdir(
      tmp_path / "logs")


def test_sigterm_during_an_overwrite_keeps_the_previous_dataset(tmp_path):
  out = tmp_path / "out"
  run_ = _cli(tmp_path, "--input", _csv(tmp_path, 30), "--output", str(out))
  assert run_.returncode == 0, run_.stderr
  before = _files(out)
  proc = _start_slow_build(tmp_path, out, "--overwrite", "--summary-json")
  proc.send_signal(signal.SIGTERM)
  stdout, stderr = proc.communicate(timeout=60)
  assert proc.returncode == 143, stderr
  assert stderr == TERMINATED
  summary = json.loads(stdout)
  assert summary["status"] == "terminated" and summary["exit_code"] == 143
  assert not glob.glob(str(out / ".staging-*"))
  assert not [n for n in os.listdir(out) if n.startswith(".")]
  # The previous dataset, whole and readable.
  assert _files(out) == before
  assert sorted(r["id"] for r in btr.iter_records(str(out))) == list(
      range(30))


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signal handlers are set in the main thread only")
def test_sigint_and_sigterm_wait_while_publishing(caplog):
  handlers = {s: signal.getsignal(s) for s in run.STOP_SIGNALS}
  with caplog.at_level(logging.WARNING, logger=run.__name__):
    for signum in (signal.SIGINT, signal.SIGTERM):
      with run.signals_deferred("publishing"):
        os.kill(os.getpid(), signum)
        time.sleep(0.1)  # delivered here: noted, not raised
  assert [r.getMessage() for r in caplog.records] == [
      "interrupted while publishing: finished publishing first",
      "terminated (SIGTERM) while publishing: finished publishing first"]
  assert run.sigint_deferred is run.signals_deferred  # the publish's name
  assert {s: signal.getsignal(s) for s in run.STOP_SIGNALS} == handlers


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
  assert case == "full_disk"
  return (["--input", _csv(tmp_path)], cli.EXIT_INPUT,
          "error: cannot write the dataset to ", FULL_DISK)


CASES = ["bad_rows", "truncated_gzip", "corrupt_tfrecord", "full_disk"]


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


def test_a_bug_still_shows_its_traceback(tmp_path):
  done = _cli(tmp_path, "--input", _csv(tmp_path), "--output",
              str(tmp_path / "out"), script=A_BUG)
  assert done.returncode == cli.EXIT_FAILED
  assert "Traceback (most recent call last):" in done.stderr
  assert done.stderr.splitlines()[-1].startswith("ZeroDivisionError: a bug")
  (details,) = [line for line in done.stderr.splitlines()
                if line.startswith("details: ")]
  assert os.path.exists(details[len("details: "):])


def test_an_interrupted_publish_has_its_own_exit_code(tmp_path, capsys,
                                                      monkeypatch):
  from beam_tfrecords.building import builder as building

  def interrupted(*args, **kwargs):
    raise PublishInterruptedError("the publish of out was interrupted")
  monkeypatch.setattr(building, "build", interrupted)
  monkeypatch.setenv("BTR_LOG_DIR", str(tmp_path / "logs"))
  code = cli.main(["build", "--schema", _schema(tmp_path), "--input",
                   _csv(tmp_path), "--output", str(tmp_path / "out"),
                   "--summary-json"])
  assert code == cli.EXIT_PUBLISH_INTERRUPTED == 6
  captured = capsys.readouterr()
  assert json.loads(captured.out)["status"] == "publish_interrupted"
  assert captured.err == "error: the publish of out was interrupted\n"
  # The diversion of Beam's records ends with the command.
  assert logging.getLogger("apache_beam").propagate


# --- Interruptions between the steps that clean up ---------------------------

class _CreateThenInterrupt:
  """FileSystems for staging.py: its create makes the file, then a
  SIGTERM arrives (Terminated), the staging folder already there."""
  join = staticmethod(__import__(
      "apache_beam.io.filesystems", fromlist=["FileSystems"]).FileSystems.join)

  @staticmethod
  def create(path, *args, **kwargs):
    from apache_beam.io.filesystems import FileSystems
    FileSystems.create(path, *args, **kwargs).close()
    raise run.Terminated()


@pytest.mark.parametrize("where", ["staging_made", "before_the_pipeline"])
def test_a_sigterm_right_after_the_staging_folder_leaves_none(
    tmp_path, monkeypatch, where):
  from beam_tfrecords.building import builder as building
  from beam_tfrecords.publish import staging
  out = tmp_path / "out"
  src = _csv(tmp_path)
  btr.build(_schema(tmp_path), src, str(out))
  before = _files(out)
  if where == "staging_made":
    monkeypatch.setattr(staging, "FileSystems", _CreateThenInterrupt)
  else:
    def interrupted():
      raise run.Terminated()
    monkeypatch.setattr(building, "memoized_dofn_specs", interrupted)
  with pytest.raises(run.Terminated):
    btr.build(_schema(tmp_path), src, str(out), overwrite=True, force=True)
  assert sorted(n for n in os.listdir(out) if n.startswith(".")) == []
  assert _files(out) == before


AFTER_THE_BUILD = textwrap.dedent("""
    import os, signal, sys
    from beam_tfrecords.cli import main
    sys.argv = ["beam-tfrecords"] + sys.argv[1:]
    code = main()  # as the program
    os.kill(os.getpid(), signal.SIGTERM)  # a scheduler, a moment too late
    print("still here", code)
    sys.exit(code)
""")


def test_a_sigterm_after_the_build_changes_nothing(tmp_path):
  out = tmp_path / "out"
  done = _cli(tmp_path, "--input", _csv(tmp_path), "--output", str(out),
              script=AFTER_THE_BUILD)
  assert done.returncode == 0, done.stderr
  assert "still here 0" in done.stdout
  assert btr.dataset_info(str(out)).counts.records_written == 100

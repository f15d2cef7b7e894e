"""SIGTERM is a Ctrl-C said as such, and an error of ours is one line
(issue 44): Beam's tracebacks go to a debug log that the error names;
--verbose still shows them, and a bug still shows its traceback."""

import glob
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.runners import run

from tests.helpers.cli_builds import _write_inputs
from tests.helpers.datasets import _files
from tests.helpers.signals import _cli, _csv, _env, _schema


TERMINATED = ("terminated (SIGTERM): nothing was published (this build's "
              "staging folder was removed)\n")
# A build that sleeps in its --preprocess step, to be interrupted there.
SLOW_MODULE = textwrap.dedent("""\
    import time

    def slow(batch):
      time.sleep(120)
      return batch
    """)


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


EARLY = "terminated (SIGTERM) before the build started: nothing was published\n"


@pytest.mark.parametrize("after", [0.3, 1.0, 2.0], ids=["0.3s", "1s", "2s"])
def test_a_sigterm_while_the_build_starts_is_said_with_its_summary(
    tmp_path, after):
  """Before runners.run's handler (Beam still importing: ~2 s), main's
  own says it (issue 60): exit 143, one line, the --summary-json line."""
  (tmp_path / "slowmod.py").write_text(SLOW_MODULE)
  out = tmp_path / "out"
  proc = subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
       _schema(tmp_path), "--input", _csv(tmp_path, 20), "--output",
       str(out), "--preprocess", "slowmod:slow", "--summary-json"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=_env(tmp_path), cwd=str(tmp_path))
  time.sleep(after)
  proc.send_signal(signal.SIGTERM)
  stdout, stderr = proc.communicate(timeout=60)
  assert proc.returncode == cli.EXIT_TERMINATED == 143, stderr
  # At 0.3 s Beam is still importing; by 2 s the build's own handler may
  # have taken over (it removes the staging folder): one line either way.
  assert stderr in ((EARLY,) if after < 1 else (EARLY, TERMINATED))
  assert json.loads(stdout) == {"status": "terminated", "exit_code": 143,
                                "output": str(out)}
  assert not out.exists()


@pytest.mark.slow
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
  # (but the units it finished, for its rerun: core.unit_cache)
  assert not [n for n in os.listdir(out)
              if n.startswith(".") and n != ".units"]
  # The previous dataset, whole and readable.
  assert _files(out) == before
  assert sorted(r["id"] for r in btr.iter_records(str(out))) == list(
      range(30))


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


@pytest.mark.slow
def test_a_sigterm_after_the_build_changes_nothing(tmp_path):
  out = tmp_path / "out"
  done = _cli(tmp_path, "--input", _csv(tmp_path), "--output", str(out),
              script=AFTER_THE_BUILD)
  assert done.returncode == 0, done.stderr
  assert "still here 0" in done.stdout
  assert btr.dataset_info(str(out)).counts.records_written == 100


# --- Ctrl-C ------------------------------------------------------------------

@pytest.mark.slow
def test_ctrl_c_prints_one_line_exits_130_and_removes_staging(tmp_path):
  schema, data = _write_inputs(tmp_path, [(1, 0.5), (2, 0.25)])
  (tmp_path / "slowmod.py").write_text(SLOW_MODULE)
  out = tmp_path / "out"
  env = dict(os.environ, PYTHONPATH=str(tmp_path))
  proc = subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
       "--input", data, "--output", str(out), "--preprocess", "slowmod:slow"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
      cwd=str(tmp_path), start_new_session=True)
  deadline = time.monotonic() + 120
  # The staging folder appears when the pipeline starts.
  while not glob.glob(str(out / ".staging-*")):
    assert proc.poll() is None, proc.communicate()
    assert time.monotonic() < deadline
    time.sleep(0.1)
  time.sleep(2)  # well inside the sleeping step
  os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C does
  stdout, stderr = proc.communicate(timeout=60)
  assert proc.returncode == 130, stderr
  assert stderr == ("interrupted: nothing was published (this build's "
                    "staging folder was removed)\n")
  assert stdout == ""
  # As it was: the folder this build made for itself (and its lock) is gone.
  assert not out.exists()

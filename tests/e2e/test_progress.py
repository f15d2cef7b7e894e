"""A build's progress: logged where stderr is not a terminal, a live line
on one."""

import logging
import os
import subprocess
import sys

import pytest

import beam_tfrecords as btr

from tests.helpers.cli_builds import _bad_rows, _write_inputs


# --- Progress --------------------------------------------------------------

def test_progress_is_logged_where_stderr_is_not_a_terminal(
    tmp_path, caplog, monkeypatch):
  from beam_tfrecords.runners import progress
  monkeypatch.setattr(progress, "LOG_SECONDS", 0.05)
  schema, data = _write_inputs(tmp_path, _bad_rows(200, 1))
  with caplog.at_level(logging.WARNING, logger="beam_tfrecords.runners.progress"):
    btr.build(schema, data, str(tmp_path / "out"), progress=True)
  lines = [r.getMessage() for r in caplog.records
           if r.name == "beam_tfrecords.runners.progress"]
  size = progress.human_bytes(os.path.getsize(data))
  assert lines[-1] == (f"progress at the end: {size} of {size} read "
                       "(100%), 201 rows (" + lines[-1].split(" rows (")[1]
                       .split(")")[0] + "), 200 records, 1 rejected")
  assert "/s" in lines[-1]
  assert os.environ.get(progress.ENV_DIR) is None


@pytest.mark.slow
def test_progress_draws_a_live_line_on_a_terminal(tmp_path):
  import pty
  schema, data = _write_inputs(tmp_path, [(i, 0.5) for i in range(50)])
  master, slave = pty.openpty()
  proc = subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
       "--input", data, "--output", str(tmp_path / "out")],
      stdout=subprocess.PIPE, stderr=slave, cwd=str(tmp_path))
  os.close(slave)
  shown = b""
  while True:
    try:
      chunk = os.read(master, 4096)
    except OSError:  # the child closed the terminal
      break
    if not chunk:
      break
    shown += chunk
  proc.wait(timeout=120)
  os.close(master)
  assert proc.returncode == 0
  text = shown.decode("utf-8", "replace")
  assert "building" in text and "rows (" in text and "records" in text
  # --quiet: nothing on the terminal.
  master, slave = pty.openpty()
  proc = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
       "--input", data, "--output", str(tmp_path / "out2"), "--quiet"],
      stdout=subprocess.PIPE, stderr=slave, cwd=str(tmp_path), timeout=120)
  os.close(slave)
  os.set_blocking(master, False)
  try:
    quiet = os.read(master, 4096)
  except (BlockingIOError, OSError):
    quiet = b""
  os.close(master)
  assert proc.returncode == 0 and b"building" not in quiet

"""What tests/e2e/test_signals.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import os
import subprocess
import sys


SCHEMA_YAML = "name: t\nfeatures:\n  id: {type: int64}\n  score: {type: float}\n"


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

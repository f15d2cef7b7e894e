"""tests/unit: functions on values. A test here that starts a Beam
pipeline or a child process fails, saying so: it belongs in tests/e2e/."""

import multiprocessing.process
import subprocess

import pytest


def _refused(what):
  def start(*args, **kwargs):
    raise AssertionError(f"a unit test started {what}: move it to "
                         "tests/e2e/ (docs/development.md, Tiers)")
  return start


@pytest.fixture(autouse=True)
def _no_pipeline_and_no_child_process(monkeypatch):
  from apache_beam import pipeline
  monkeypatch.setattr(pipeline.Pipeline, "run", _refused("a Beam pipeline"))
  monkeypatch.setattr(subprocess.Popen, "__init__",
                      _refused("a child process"))
  monkeypatch.setattr(multiprocessing.process.BaseProcess, "start",
                      _refused("a child process"))

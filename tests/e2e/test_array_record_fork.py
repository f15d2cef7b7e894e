"""ArrayRecord and fork: array-record's threads do not survive a fork (a
DataLoader worker crashed with SIGSEGV in riegeli's background cleaner),
so a process forked from one that had loaded it refuses it with an error
saying what to do, and one forked before reads it
(core/array_record_files.py)."""

import multiprocessing
import os
import random
import subprocess
import sys

import pytest

from beam_tfrecords import InputError
from beam_tfrecords.core import array_record_files as arf

if os.environ.get("BTR_REQUIRE_EXTRAS"):
  from array_record.python import array_record_module
else:
  array_record_module = pytest.importorskip(
      "array_record.python.array_record_module")


def _write(path, n):
  rng = random.Random(0)
  writer = array_record_module.ArrayRecordWriter(str(path), arf.DEFAULT_OPTIONS)
  for _ in range(n):
    writer.write(bytes(rng.getrandbits(8) for _ in range(rng.randrange(5, 400))))
  writer.close()



def _read_in_child(path, answers):
  try:
    answers.put(("records", len(list(arf.read_array_record(path)))))
  except InputError as e:
    answers.put(("error", str(e)))


def test_a_process_forked_after_array_record_was_loaded_refuses_it(
    tmp_path):
  """An error saying what to do, never a crash; a forkserver's child
  (the server started clean) reads."""
  path = str(tmp_path / "train-00000-of-00001.array_record")
  _write(path, 20)
  # The forkserver this starts is the one every later "forkserver" worker
  # of this process comes from: it preloads what the PyTorch loaders'
  # workers import (read.torch's own preload comes too late once it runs;
  # without this, each loader worker of a later test imported torch).
  multiprocessing.set_forkserver_preload(["beam_tfrecords.read.torch"])
  assert len(list(arf.read_array_record(path))) == 20  # loaded here
  for method, want in (("fork", "error"), ("forkserver", "records")):
    context = multiprocessing.get_context(method)
    answers = context.Queue()
    child = context.Process(target=_read_in_child, args=(path, answers))
    child.start()
    kind, answer = answers.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert kind == want, (method, answer)
    if kind == "error":
      assert f"(pid {child.pid})" in answer
      assert ("it was forked from a process that had loaded array-record"
              in answer)
      assert "multiprocessing_context='forkserver' or 'spawn'" in answer
    else:
      assert answer == 20


def test_a_process_forked_before_array_record_was_loaded_reads_it(
    tmp_path):
  """Only a fork of a process that had loaded it is refused."""
  path = str(tmp_path / "train-00000-of-00001.array_record")
  _write(path, 20)
  code = (
      "import os, sys\n"
      "from beam_tfrecords.core import array_record_files as arf\n"
      "assert 'array_record.python.array_record_module' not in sys.modules\n"
      "pid = os.fork()\n"
      "if pid == 0:\n"
      f"  os._exit(0 if len(list(arf.read_array_record({path!r}))) == 20 "
      "else 3)\n"
      "_, status = os.waitpid(pid, 0)\n"
      "sys.exit(os.waitstatus_to_exitcode(status))\n")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, timeout=120, check=False)
  assert done.returncode == 0, done.stderr

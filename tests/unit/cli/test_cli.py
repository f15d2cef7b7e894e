"""beam_tfrecords/cli/__init__.py, on values: The beam-tfrecords command
line."""

import json
import logging
import os

from beam_tfrecords import cli
from beam_tfrecords.core.errors import PublishInterruptedError, is_disk_full

from tests.helpers.cli_builds import _build
from tests.helpers.signals import _csv, _schema


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


def test_a_full_disk_is_a_clean_error_and_removes_staging(tmp_path, capsys,
                                                           monkeypatch):
  from apache_beam.io.filesystems import FileSystems
  real_create = FileSystems.create

  def full(path, *args, **kwargs):
    if path.endswith("schema.pbtxt"):
      raise OSError(28, "No space left on device")
    return real_create(path, *args, **kwargs)
  monkeypatch.setattr(FileSystems, "create", full)
  assert _build(tmp_path) == cli.EXIT_INPUT
  err = capsys.readouterr().err
  assert f"error: cannot write the dataset to {tmp_path / 'out'}: no space " \
      "left on the device (the build's staging folder was removed; " \
      "nothing was published; a finished dataset that was there is as it " \
      "was); free space there or write the dataset elsewhere" in err
  assert not os.path.exists(tmp_path / "out") or \
      os.listdir(tmp_path / "out") == []
  # On other runners a worker's full disk arrives as traceback text.
  assert is_disk_full(RuntimeError("... OSError: [Errno 28] No space left"))
  assert not is_disk_full(RuntimeError("[Errno 2] No such file"))


def test_the_allocator_is_tuned_in_the_command_line_s_own_process_only(
    tmp_path, monkeypatch):
  """runners.allocator.tune and imports_frozen: by the program (argv
  from sys.argv, its main thread), not by code that calls main with its
  own arguments or in another thread (the allocator and the collector
  are the whole process's)."""
  from beam_tfrecords.building import builder as building
  from beam_tfrecords.runners import allocator
  tuned = []
  monkeypatch.setattr(allocator, "tune", lambda: tuned.append(1))
  import contextlib
  monkeypatch.setattr(allocator, "imports_frozen",
                      lambda: tuned.append("frozen") or contextlib.nullcontext())
  monkeypatch.setattr(building, "build", lambda *a, **k: (_ for _ in ()).throw(
      PublishInterruptedError("stop here")))
  monkeypatch.setenv("BTR_LOG_DIR", str(tmp_path / "logs"))
  argv = ["build", "--schema", _schema(tmp_path), "--input", _csv(tmp_path),
          "--output", str(tmp_path / "out")]
  assert cli.main(argv) == cli.EXIT_PUBLISH_INTERRUPTED
  assert tuned == []
  monkeypatch.setattr("sys.argv", ["beam-tfrecords"] + argv)
  early = []
  monkeypatch.setattr(cli, "_EarlySigterm", lambda: early.append(1) or None)
  assert cli.main() == cli.EXIT_PUBLISH_INTERRUPTED
  assert tuned == [1, "frozen"]
  # main() as the program, but in a thread of a program of its own
  import threading
  tuned.clear()
  codes = []
  thread = threading.Thread(target=lambda: codes.append(cli.main()))
  thread.start()
  thread.join()
  assert codes == [cli.EXIT_PUBLISH_INTERRUPTED] and tuned == []

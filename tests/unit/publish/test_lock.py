"""beam_tfrecords/publish/lock.py, on values: One build at a time per output: a
lock object with a lease."""

import json
import os
import re
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.publish.lock import LOCK_FILE, OutputLock

from tests.helpers.publish_locks import SCHEMA, _input, _lock_text


def test_a_live_lock_refuses_the_build_with_exit_2(tmp_path, capsys):
  out = tmp_path / "out"
  out.mkdir()
  (out / LOCK_FILE).write_text(_lock_text(host="worker-7", pid=4242))
  (tmp_path / "s.json").write_text(json.dumps(SCHEMA))  # JSON is YAML
  code = cli.main(["build", "--schema", str(tmp_path / "s.json"), "--input",
                   _input(tmp_path), "--output", str(out)])
  assert code == cli.EXIT_INPUT
  err = capsys.readouterr().err
  assert (f"error: {out} is being built by another build (run 0123456789ab "
          "on host worker-7, pid 4242, started ") in err
  # 0 s, or a few on a loaded machine (the lock was renewed just before
  # the build started).
  assert re.search(r"UTC, lease renewed \d s ago; lock ", err), err
  assert ("If it died, its lock is taken over once its lease has not been "
          "renewed for 120 s (at once on the same host)") in err
  # Nothing was touched: the lock is the other build's, no dataset.
  assert sorted(os.listdir(out)) == [LOCK_FILE]
  # For schedulers: a status of its own.
  assert cli.main(["build", "--schema", str(tmp_path / "s.json"),
                   "--input", _input(tmp_path), "--output", str(out),
                   "--summary-json"]) == cli.EXIT_INPUT
  summary = json.loads(capsys.readouterr().out)
  assert (summary["status"], summary["exit_code"]) == ("busy", 2)
  assert json.loads((out / LOCK_FILE).read_text())["host"] == "worker-7"


def test_an_unreadable_lock_is_left_to_a_person(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  (out / LOCK_FILE).write_text("not json")
  with pytest.raises(btr.OutputBusyError) as e:
    btr.build(SCHEMA, _input(tmp_path), str(out))
  assert str(e.value) == (f"{out}: the lock {out}/{LOCK_FILE} is not a lock "
                          "this tool wrote (b'not json'); remove it if no "
                          "build is running")


def test_a_check_racing_the_renewal_keeps_the_lock(tmp_path):
  """The renewal thread and the check before publishing both renew (one
  at a time); a retried write that landed is recognised as this build's."""
  out = str(tmp_path / "out")
  held = OutputLock(out, lease_seconds=0.01).acquire()
  try:
    for _ in range(200):
      held.check()
    # A write whose compare failed but whose content is ours (a client's
    # retry after the first attempt landed) keeps the lock.
    store = held._store
    real = store.replace
    store.replace = lambda data, token: (real(data, token), None)[1]
    assert held.renew()
  finally:
    held.release()
  assert not os.path.exists(out)


def test_the_lease_is_renewed_while_the_build_runs(tmp_path):
  out = str(tmp_path / "out")
  held = OutputLock(out, lease_seconds=0.2).acquire()
  try:
    first = json.loads(open(os.path.join(out, LOCK_FILE)).read())
    time.sleep(0.3)
    second = json.loads(open(os.path.join(out, LOCK_FILE)).read())
    assert second["run"] == first["run"] == held.run
    assert second["renewed"] > first["renewed"]
    held.check()  # still ours
    # Renewed every lease / 4: a second build sees it live.
    time.sleep(0.1)
    with pytest.raises(btr.OutputBusyError, match="is being built by "):
      OutputLock(out, lease_seconds=0.2).acquire()
  finally:
    held.release()
  # The lock is gone, and the folder it made (empty) too.
  assert not os.path.exists(out)


def test_the_lock_is_released_and_a_made_folder_removed_on_failure(
    tmp_path):
  out = tmp_path / "out"
  with pytest.raises(btr.InputError, match="--gzip-level must be 1-9"):
    btr.build(SCHEMA, _input(tmp_path), str(out), gzip_level=11)
  assert not out.exists()
  out.mkdir()
  with pytest.raises(btr.InputError, match="--gzip-level must be 1-9"):
    btr.build(SCHEMA, _input(tmp_path), str(out), gzip_level=11)
  assert os.listdir(out) == []  # given by the user: kept, empty



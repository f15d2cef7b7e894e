"""One build at a time per output (issue 17): the lock, its lease, stale
locks taken over, a lost lock publishing nothing; locally and on a real
S3 server (moto's, on 127.0.0.1)."""

import json
import logging
import os
import re
import socket
import subprocess
import sys
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.publish import lock as lock_module
from beam_tfrecords.publish.lock import LOCK_FILE, OutputLock, stale_reason

from conftest import s3_beam_args

SCHEMA = {"name": "l", "features": {"id": "int64"}}


def _input(tmp_path, ids=(1, 2, 3)):
  path = tmp_path / "in.csv"
  path.write_text("id\n" + "".join(f"{i}\n" for i in ids))
  return str(path)


def _dead_pid() -> int:
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


def _lock_text(**changes) -> str:
  info = {"tool": "beam-tfrecords", "run": "0123456789ab",
          "host": socket.gethostname(), "boot": lock_module._boot_id(),
          "pid_ns": lock_module._pid_namespace(),
          "pid": os.getpid(), "pid_start": lock_module._pid_start(
              os.getpid()),
          "started": time.time() - 60, "renewed": time.time(),
          "lease_seconds": 120.0, "output": "x"}
  info.update(changes)
  return json.dumps(info)


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


@pytest.mark.parametrize("lock,reason", [
    ({"pid": "dead"}, "its process (pid {pid} on this host) has ended"),
    ({"host": "elsewhere", "renewed": -1000.0},
     "its lease expired 88[0-9] s ago"),
    ({"pid_start": "1"}, "its process (pid {pid} on this host) has ended"),
], ids=["dead_pid", "lease_expired", "pid_reused"])
def test_a_stale_lock_is_taken_over_with_a_log_line(tmp_path, caplog, lock,
                                                    reason):
  out = tmp_path / "out"
  out.mkdir()
  if isinstance(lock, dict):
    lock = dict(lock)
    if lock.get("pid") == "dead":
      lock["pid"] = _dead_pid()
    if "renewed" in lock:
      lock["renewed"] += time.time()
    text = _lock_text(**lock)
    reason = reason.replace("{pid}", str(lock.get("pid", os.getpid())))
  else:
    text = lock
  (out / LOCK_FILE).write_text(text)
  with caplog.at_level(logging.WARNING, logger="beam_tfrecords"):
    result = btr.build(SCHEMA, _input(tmp_path), str(out))
  assert sorted(r["id"] for r in btr.iter_records(result.output)) == [1, 2, 3]
  (line,) = [r.getMessage() for r in caplog.records
             if "took over the lock" in r.getMessage()]
  assert line.startswith(f"{out}: took over the lock of a build that is not "
                         "running (")
  assert re.search(r"\): " + reason.replace("(", r"\(").replace(
      ")", r"\)") + "$", line), line
  assert not (out / LOCK_FILE).exists()  # released at the end


def test_stale_reason_judges_host_pid_and_lease():
  now = 1_000_000.0
  base = json.loads(_lock_text(renewed=now - 10, started=now - 100))
  assert stale_reason(base, now) is None
  assert stale_reason(dict(base, host="other"), now) is None
  assert stale_reason(dict(base, host="other", renewed=now - 121),
                      now) == "its lease expired 1 s ago"
  # Another boot of this host: the pid says nothing, the lease does.
  assert stale_reason(dict(base, boot="old-boot", pid=_dead_pid()),
                      now) is None
  # Another pid namespace (a container on this host): only the lease.
  assert stale_reason(dict(base, pid_ns="other", pid=_dead_pid()),
                      now) is None
  assert stale_reason(dict(base, lease_seconds="x"), now) is None


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


def test_a_build_that_lost_its_lock_publishes_nothing(tmp_path, monkeypatch):
  """Its lease ran out (a suspended laptop) and another build took over:
  at publish time it finds out and stops, leaving the other's lock."""
  from beam_tfrecords.publish import finish as pipeline
  out = tmp_path / "out"
  check = pipeline.check_thresholds
  other = _lock_text(run="fedcba987654", host="elsewhere")

  def taken_over(*args):
    (out / LOCK_FILE).write_text(other)
    return check(*args)

  monkeypatch.setattr(pipeline, "check_thresholds", taken_over)
  with pytest.raises(btr.OutputBusyError) as e:
    btr.build(SCHEMA, _input(tmp_path), str(out))
  assert str(e.value) == (f"{out}: the lock was removed or taken over by "
                          "another build; this build publishes nothing")
  assert not (out / "_SUCCESS").exists()
  assert (out / LOCK_FILE).read_text() == other  # not removed by the loser


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


# --- S3: conditional writes on a real S3 server ---------------------------

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto")


def _s3_options(url):
  from apache_beam.options.pipeline_options import PipelineOptions
  client = boto3.client("s3", endpoint_url=url)
  if not client.list_buckets()["Buckets"]:
    client.create_bucket(Bucket="datasets")
  return PipelineOptions(s3_beam_args(url))


def test_s3_lock_uses_conditional_writes(s3):
  options = _s3_options(s3)
  client = boto3.client("s3", endpoint_url=s3)
  out = "s3://datasets/locked"
  first = OutputLock(out, options).acquire()
  try:
    stored = json.loads(client.get_object(
        Bucket="datasets", Key="locked/" + LOCK_FILE)["Body"].read())
    assert stored["run"] == first.run
    with pytest.raises(btr.OutputBusyError, match=(
        f"{out} is being built by another build \\(run {first.run} ")):
      OutputLock(out, options).acquire()
    # The store's compare-and-swap refuses a stale token.
    store = first._store
    assert store.replace(b"x", '"not-the-etag"') is None
    assert store.delete('"not-the-etag"') is False
    assert store.create(b"x") is None
  finally:
    first.release()
  assert "Contents" not in client.list_objects_v2(Bucket="datasets",
                                                  Prefix="locked/")
  # A lease that expired is taken over, by one contender only.
  client.put_object(Bucket="datasets", Key="locked/" + LOCK_FILE,
                    Body=_lock_text(host="gone", renewed=time.time() - 500))
  stale_token = OutputLock(out, options)._store.read()[1]
  taker = OutputLock(out, options).acquire()
  try:
    late = OutputLock(out, options)._store
    assert late.replace(b"mine", stale_token) is None  # already taken
    assert json.loads(late.read()[0])["run"] == taker.run
  finally:
    taker.release()


def test_two_builds_on_s3_one_refused(s3, tmp_path, monkeypatch):
  from beam_tfrecords.publish import finish as pipeline
  _s3_options(s3)
  beam_args = s3_beam_args(s3)
  out = "s3://datasets/two"
  check = pipeline.check_thresholds
  seen = {}

  def meanwhile(*args):
    with pytest.raises(btr.OutputBusyError) as e:
      btr.build(SCHEMA, _input(tmp_path, (7,)), out, beam_args=beam_args)
    seen["error"] = str(e.value)
    return check(*args)

  monkeypatch.setattr(pipeline, "check_thresholds", meanwhile)
  btr.build(SCHEMA, _input(tmp_path), out, beam_args=beam_args)
  assert f"{out} is being built by another build" in seen["error"]
  monkeypatch.undo()
  records = sorted(r["id"] for r in btr.iter_records(out))
  assert records == [1, 2, 3]
  keys = sorted(o["Key"] for o in boto3.client(
      "s3", endpoint_url=s3).list_objects_v2(Bucket="datasets",
                                             Prefix="two/")["Contents"])
  assert keys == ["two/_SUCCESS", "two/dataset.json", "two/report.html",
                  "two/schema.pbtxt", "two/statistics.pb",
                  "two/train-00000-of-00001.tfrecord.gz"]

"""An overwrite killed at any file operation of its publish, and builds
racing into one output (issue 17): the output ends as the old dataset or
the new one, whole; never a mix, never nothing."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import beam_tfrecords as btr
from beam_tfrecords.publish import file_ops, journal as publishing
from beam_tfrecords.publish.lock import LOCK_FILE, OutputLock

from tests.helpers.datasets import _files
from tests.helpers.publish_kills import (OPTIONS, SCHEMA, STAGING, Killed,
                                         _kill_at)


def _prepared(tmp_path, datasets):
  """An output holding the old dataset and a file of someone else's, and
  a committed staging folder holding the new one."""
  out = tmp_path / "out"
  if out.exists():
    shutil.rmtree(out)
  shutil.copytree(datasets["old"]["dir"], out)
  (out / "notes.txt").write_text("someone else's")
  staging = out / STAGING
  for rel, data in datasets["new"]["files"].items():
    if rel != "_SUCCESS":
      (staging / rel).parent.mkdir(parents=True, exist_ok=True)
      (staging / rel).write_bytes(data)
  meta = json.loads(datasets["new"]["files"]["dataset.json"])
  return str(out), str(staging), meta, datasets["new"]["files"][
      "_SUCCESS"].decode()


def _recover(out):
  with OutputLock(out):
    publishing.recover(out, keep="")


def _expect(out, datasets, which="new"):
  assert _files(out) == dict(datasets[which]["files"],
                             **{"notes.txt": b"someone else's"})
  assert sorted(n for n in os.listdir(out) if n.startswith(".")) == []
  assert btr.dataset_info(out).counts.records_written == (
      20 if which == "new" else 9)


# Slow: the fast tier runs the same kills on hand-made datasets,
# tests/unit/publish/test_journal.py::test_a_kill_at_any_operation_is_finished_by_the_next_build.
@pytest.mark.slow
def test_a_kill_before_any_file_operation_ends_in_a_whole_dataset(
    tmp_path, monkeypatch, datasets):
  # Count the operations of one publish.
  out, staging, meta, success = _prepared(tmp_path, datasets)
  hook, count = _kill_at(-1)
  monkeypatch.setattr(file_ops, "before_operation", hook)
  publishing.publish(staging, out, meta, success)
  _expect(out, datasets)
  operations = count[0]
  # Made first: the new _SUCCESS and the marker; the journal; moves of
  # _SUCCESS and of the 15 old files (3 shards and their indexes, the
  # errors file, schema.pbtxt, statistics.pb, statistics.state.json,
  # report.html, README.md, preview/train.parquet, croissant.json,
  # dataset.json); the marker's; moves of the 13 new files (2 shards and
  # their indexes); _SUCCESS's; the journal's removal, the staging
  # folder's.
  assert operations == 36
  journal = 2  # the operation that writes the journal
  old = datasets["old"]["files"]
  for k in range(operations):
    out, staging, meta, success = _prepared(tmp_path, datasets)
    monkeypatch.setattr(file_ops, "before_operation", _kill_at(k)[0])
    with pytest.raises(Killed):
      publishing.publish(staging, out, meta, success)
    now = _files(out)
    if "_SUCCESS" in now:  # finished: the old dataset whole, or the new
      assert now in [dict(datasets[w]["files"],
                          **{"notes.txt": b"someone else's"})
                     for w in ("old", "new")], k
    # The old dataset is whole: in place, or moved aside.
    aside = _files(os.path.join(staging, "previous"))
    for rel, data in old.items():
      assert data in (now.get(rel), aside.get(rel)), (k, rel)
    # A later build (holding the lock) finishes the switch; killed again
    # while it does, the one after finishes it.
    for j in (0, 2, None):
      monkeypatch.setattr(file_ops, "before_operation",
                          _kill_at(j)[0] if j is not None else None)
      try:
        _recover(out)
      except Killed:
        continue
      break
    # Killed before its journal was written, the publish had not begun:
    # the staging folder is a leftover (removed), the old dataset stays.
    _expect(out, datasets, "new" if k > journal else "old")


KILLED_BUILD = textwrap.dedent("""
    import json, os, signal, sys
    import beam_tfrecords as btr
    from beam_tfrecords.publish import file_ops
    k, count = int(sys.argv[1]), [0]
    def hook(operation, paths):
      if count[0] == k:
        os.kill(os.getpid(), signal.SIGKILL)
      count[0] += 1
    file_ops.before_operation = hook
    btr.build(json.loads(sys.argv[2]), sys.argv[3], sys.argv[4],
              overwrite=True, num_shards=2, max_bad_fraction=1.0)
""")


@pytest.mark.slow
@pytest.mark.parametrize("k", [3, 10, 17])
def test_a_build_killed_while_publishing_is_finished_by_the_next(
    tmp_path, datasets, k, caplog):
  out = str(tmp_path / "out")
  shutil.copytree(datasets["old"]["dir"], out)
  run = subprocess.run(
      [sys.executable, "-c", KILLED_BUILD, str(k), json.dumps(SCHEMA),
       datasets["new"]["src"], out], capture_output=True, text=True,
      timeout=300)
  assert run.returncode == -9, run.stderr
  assert os.path.exists(os.path.join(out, LOCK_FILE))  # the dead build's
  # The same build again: it takes the dead build's lock over, finishes
  # its publish, and then has nothing to do.
  result = btr.build(SCHEMA, datasets["new"]["src"], out, overwrite=True,
                     num_shards=2, **OPTIONS)
  assert result.up_to_date
  assert _files(out) == datasets["new"]["files"]
  assert not [n for n in os.listdir(out) if n.startswith(".")]
  messages = " ".join(r.getMessage() for r in caplog.records)
  assert "took over the lock of a build that is not running" in messages
  assert "finished the publish of an earlier build that was interrupted" \
      in messages


RACE = textwrap.dedent("""
    import json, os, sys, time, traceback
    import beam_tfrecords as btr
    import beam_tfrecords.building.builder  # imported once, before the forks
    from beam_tfrecords.core.errors import OutputBusyError, InputError
    root, pairs = sys.argv[1], int(sys.argv[2])
    schema = json.loads(sys.argv[3])
    results = []
    for i in range(pairs):
      out = os.path.join(root, "out%d" % i)
      start = time.time() + 0.2
      pids = []
      for name in ("a", "b"):
        pid = os.fork()
        if pid == 0:
          code = 1
          try:
            while time.time() < start:  # both start at the same moment
              pass
            btr.build(schema, os.path.join(root, name + ".csv"), out,
                      num_shards=8)
            code = 0
          except OutputBusyError:
            code = 2
          except InputError as e:
            code = 3 if "already holds a finished dataset" in str(e) else 1
          except BaseException:
            traceback.print_exc()
          finally:
            os._exit(code)
        pids.append(pid)
      results.append([os.waitstatus_to_exitcode(os.waitpid(p, 0)[1])
                      for p in pids])
    print(json.dumps(results))
""")


@pytest.mark.slow
def test_simultaneous_builds_into_one_output_never_mix(tmp_path):
  # (All 20 of 20 pairs met the other's lock when run alone: 10 pairs
  # make the same case with half the builds.)
  pairs = 10
  ids = {"a": range(0, 200), "b": range(1000, 1200)}
  for name, values in ids.items():
    (tmp_path / f"{name}.csv").write_text(
        "id\n" + "".join(f"{i}\n" for i in values))
  run = subprocess.run(
      [sys.executable, "-c", RACE, str(tmp_path), str(pairs),
       json.dumps(SCHEMA)], capture_output=True, text=True, timeout=900)
  assert run.returncode == 0, run.stderr
  results = json.loads(run.stdout)
  assert len(results) == pairs
  busy = 0
  for i, codes in enumerate(results):
    # Exactly one wins; the other is refused (exit 2 on the command line).
    assert sorted(codes) in ([0, 2], [0, 3]), (i, codes, run.stderr)
    busy += 2 in codes
    winner = "ab"[codes.index(0)]
    out = tmp_path / f"out{i}"
    info = btr.dataset_info(str(out))
    assert info.inputs.patterns == (str(tmp_path / f"{winner}.csv"),)
    assert sorted(r["id"] for r in btr.iter_records(str(out))) == list(
        ids[winner]), i
    assert len(info.splits["train"].shards) == 8
    assert not [n for n in os.listdir(out) if n.startswith(".")], i
  # They did race: most pairs met the other's lock.
  assert busy >= pairs // 2, results


def test_an_interrupted_publish_missing_new_files_is_left_for_a_person(
    tmp_path, monkeypatch, datasets):
  out, staging, meta, success = _prepared(tmp_path, datasets)
  monkeypatch.setattr(file_ops, "before_operation", _kill_at(20)[0])
  with pytest.raises(Killed):  # after the old files went aside
    publishing.publish(staging, out, meta, success)
  monkeypatch.setattr(file_ops, "before_operation", None)
  os.remove(os.path.join(staging, "dataset.json"))  # lost, somehow
  with pytest.raises(btr.InputError) as e:
    _recover(out)
  assert str(e.value) == (
      f"an interrupted publish into {out} cannot be finished: dataset.json "
      "of the new dataset are gone; the previous dataset is kept whole in "
      f"{staging}/previous: restore it from there, then remove {staging}")
  aside = _files(os.path.join(staging, "previous"))
  assert {k: v for k, v in aside.items() if k != "ASIDE_DONE"} == \
      datasets["old"]["files"]


def test_a_retried_last_step_finishes_its_own_publish(tmp_path, monkeypatch,
                                                      datasets):
  """Runners retry a failed bundle: the last step run again after its
  publish began (or ended) finishes it instead of failing."""
  out, staging, meta, success = _prepared(tmp_path, datasets)
  monkeypatch.setattr(file_ops, "before_operation", _kill_at(9)[0])
  with pytest.raises(Killed):
    publishing.publish(staging, out, meta, success)
  monkeypatch.setattr(file_ops, "before_operation", None)
  publishing.publish(staging, out, meta, success)  # the retry
  _expect(out, datasets)
  publishing.publish(staging, out, meta, success)  # and once more
  _expect(out, datasets)


@pytest.mark.parametrize("kill_at", [4, 20])
def test_a_retried_finish_step_finishes_the_publish_it_began(
    tmp_path, monkeypatch, datasets, kill_at):
  """The pipeline's last step killed inside its publish and run again (a
  runner's retry), then once more after it ended: the retries skip the
  checks and descriptions (the staging folder is half moved) and finish
  the publish; each returns the published dataset.json."""
  from beam_tfrecords.publish import finish as finishing
  out = tmp_path / "out"
  shutil.copytree(datasets["old"]["dir"], out)
  real = finishing.finish
  returned = []

  def killed_then_retried(info, plan, pipeline_options=None):
    monkeypatch.setattr(file_ops, "before_operation", _kill_at(kill_at)[0])
    with pytest.raises(Killed):
      real(info, plan, pipeline_options)
    monkeypatch.setattr(file_ops, "before_operation", None)
    assert plan.publication.state() == "began"
    returned.append(real(info, plan, pipeline_options))  # the retry
    assert plan.publication.state() == "ended"
    returned.append(real(info, plan, pipeline_options))  # and after it ended
    return returned[0]

  monkeypatch.setattr(finishing, "finish", killed_then_retried)
  btr.build(SCHEMA, datasets["new"]["src"], str(out), num_shards=2,
            overwrite=True, **OPTIONS)
  published = btr.dataset_info(str(out))
  assert returned == [published, published]
  assert published.counts.records_written == 20
  assert btr.verify(str(out)).ok
  assert sorted(n for n in os.listdir(out) if n.startswith(".")) == []

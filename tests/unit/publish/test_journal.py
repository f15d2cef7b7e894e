"""beam_tfrecords/publish/journal.py, on hand-made datasets: the journaled
switch of an output from its old dataset to a staged one, refused before
any change when it would overwrite a file that is not ours, finished by
the next build after a kill at any file operation, undone after a failed
one; the removal of leftover staging folders and part files; which output
folders a build may write into."""

import errno
import json
import logging
import os

import pytest

from beam_tfrecords.core.errors import (InputError, OutputBusyError,
                                        OutputError, PublishInterruptedError)
from beam_tfrecords.core.generations import sealed
from beam_tfrecords.publish import file_ops
from beam_tfrecords.publish.journal import (check_output_files, has_journal,
                                            previous_dataset, publish,
                                            recover, remove_parts,
                                            remove_staging, state)

from tests.helpers.hand_made import SUCCESS_TEXT, example, write_dataset
from tests.helpers.publish_kills import Killed, _kill_at
from tests.helpers.publish_safety import _tree

SCHEMA = {"name": "j", "features": {"id": {"type": "int64",
                                          "required": True}}}
STAGING = ".staging-0123456789ab"
JOURNAL = "publish.json"  # a publish's journal, in its staging folder
NEW_SUCCESS = SUCCESS_TEXT.replace("1d98dad27dc6", "abcdefabcdef")
BAD_ROW = {"source": "in.csv", "row": 3, "rows": 1, "reason": "not a number",
           "problems": [], "raw": {"id": "x"}}


def _records(ids):
  return [example({"id": [i]}) for i in ids]


def _old(out):
  """The old dataset: train in 2 shards, 1 row in errors/."""
  write_dataset(str(out), SCHEMA, {"train": [_records(range(3)),
                                             _records(range(3, 5))]},
                errors=[BAD_ROW])
  return _tree(out)


def _staged(out):
  """A committed staging folder inside `out` holding the new dataset
  (train and test, 1 shard each); (staging, its dataset.json object,
  what the output holds once it is published)."""
  staging = out / STAGING
  write_dataset(str(staging), SCHEMA, {"train": [_records([10, 11])],
                                       "test": [_records([12])]},
                success=None)
  new = _tree(staging)
  meta = json.loads(new["dataset.json"])
  # (_SUCCESS: the publish's line, sealed with the dataset.json it put in)
  return str(staging), meta, dict(new, _SUCCESS=sealed(
      NEW_SUCCESS, new["dataset.json"]).encode())


def _hidden(out):
  return sorted(n for n in os.listdir(out) if n.startswith("."))


@pytest.mark.parametrize("with_old", [False, True], ids=["empty", "old"])
def test_the_staged_dataset_replaces_the_old_and_nothing_else(tmp_path,
                                                               with_old):
  out = tmp_path / "out"
  out.mkdir()
  if with_old:
    _old(out)
  (out / "notes.txt").write_text("someone else's")
  (out / ".hidden").write_text("mine")
  (out / "mine.tfrecord.gz").write_bytes(b"not ours, named like ours")
  staging, meta, new = _staged(out)
  assert state(staging, str(out), NEW_SUCCESS) == ""
  publish(staging, str(out), meta, NEW_SUCCESS)
  assert _tree(out) == dict(new, **{
      "notes.txt": b"someone else's", ".hidden": b"mine",
      "mine.tfrecord.gz": b"not ours, named like ours"})
  # The old dataset's second shard and its index are gone.
  assert sorted(os.listdir(out / "index")) == [
      "test-00000-of-00001.tfrecord.gz.index",
      "train-00000-of-00001.tfrecord.gz.index"]
  assert _hidden(out) == [".hidden"]
  assert state(staging, str(out), NEW_SUCCESS) == "ended"
  assert state(staging, str(out), SUCCESS_TEXT) == ""
  assert not has_journal(staging)


def _foreign_shard(out):
  (out / "test-00000-of-00001.tfrecord.gz").write_bytes(b"theirs")
  return "test-00000-of-00001.tfrecord.gz", "it"


def _foreign_success(out):
  (out / "_SUCCESS").write_text("written by another tool\n")
  return "_SUCCESS", "it"


def _both(out):
  _foreign_shard(out)
  _foreign_success(out)
  return "test-00000-of-00001.tfrecord.gz, _SUCCESS", "them"


@pytest.mark.parametrize("make", [_foreign_shard, _foreign_success, _both],
                         ids=["shard", "success", "both"])
def test_a_file_it_would_overwrite_and_no_dataset_lists_stops_it_unchanged(
    tmp_path, make):
  out = tmp_path / "out"
  out.mkdir()
  staging, meta, _ = _staged(out)
  names, pronoun = make(out)
  before = _tree(out)
  with pytest.raises(InputError) as raised:
    publish(staging, str(out), meta, NEW_SUCCESS)
  assert str(raised.value) == (
      f"{out} holds {names}, which the new dataset would overwrite and no "
      f"dataset of ours lists: nothing was published (the new files are in "
      f"{staging}); move {pronoun} away and build again")
  assert _tree(out) == before
  assert not has_journal(staging)


def test_a_staged_file_that_is_missing_stops_it_unchanged(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  old = _old(out)
  staging, meta, _ = _staged(out)
  os.remove(os.path.join(staging, "test-00000-of-00001.tfrecord.gz"))
  with pytest.raises(RuntimeError, match=r"^staged files are missing: "
                     r"\['test-00000-of-00001.tfrecord.gz'\]; not "
                     "publishing$"):
    publish(staging, str(out), meta, NEW_SUCCESS)
  assert {k: v for k, v in _tree(out).items()
          if not k.startswith(STAGING)} == old


def _publish_counting(tmp_path):
  """The number of file operations of one publish over the old dataset."""
  out = tmp_path / "count"
  out.mkdir()
  _old(out)
  staging, meta, new = _staged(out)
  hook, count = _kill_at(-1)
  file_ops.before_operation = hook
  try:
    publish(staging, str(out), meta, NEW_SUCCESS)
  finally:
    file_ops.before_operation = None
  assert _tree(out) == new
  return count[0]


def test_a_kill_at_any_operation_is_finished_by_the_next_build(
    tmp_path, monkeypatch):
  """Killed at operation k, the old dataset is whole (in place or moved
  aside); recover() ends in the new one once the journal is written, in
  the old one before (the staging folder is a leftover), and after the
  journal's removal only removes the staging folder."""
  operations = _publish_counting(tmp_path)
  # The new _SUCCESS and the marker, the journal, _SUCCESS and the 6 old
  # files aside (2 shards, their indexes, the errors file, dataset.json),
  # the marker, the 5 new files in (2 shards, their indexes,
  # dataset.json), _SUCCESS, the journal's removal, the staging folder's.
  assert operations == 19
  journal = 2  # the operation that writes the journal
  for k in range(operations):
    out = tmp_path / f"kill{k}"
    out.mkdir()
    old = _old(out)
    staging, meta, new = _staged(out)
    monkeypatch.setattr(file_ops, "before_operation", _kill_at(k)[0])
    with pytest.raises(Killed):
      publish(staging, str(out), meta, NEW_SUCCESS)
    monkeypatch.setattr(file_ops, "before_operation", None)
    now, aside = _tree(out), _tree(os.path.join(staging, "previous"))
    for rel, data in old.items():
      assert data in (now.get(rel), aside.get(rel)), (k, rel)
    began = journal < k < operations - 1
    assert has_journal(staging) == began, k
    assert state(staging, str(out), NEW_SUCCESS) == (
        "began" if began else ""), k
    # The next build finishes it; killed while it does (at its first or
    # third operation), the one after that.
    for j in (0, 2, None):
      monkeypatch.setattr(file_ops, "before_operation",
                          None if j is None else _kill_at(j)[0])
      try:
        done = recover(str(out), keep="")
      except Killed:
        continue
      break
    assert _tree(out) == (new if k > journal else old), k
    assert _hidden(out) == [], k
    assert len(done) <= 1, k


def _failing(k, every_after=False):
  """Operation k fails with ENOSPC (and every one after it, with
  every_after)."""
  count = [0]

  def hook(operation, paths):
    count[0] += 1
    if count[0] - 1 == k or (every_after and count[0] - 1 > k):
      raise OSError(errno.ENOSPC, "No space left on device", paths[0])
  return hook


def test_a_failed_write_before_the_switch_publishes_nothing_and_says_why(
    tmp_path, monkeypatch):
  out = tmp_path / "out"
  out.mkdir()
  old = _old(out)
  staging, meta, _ = _staged(out)
  monkeypatch.setattr(file_ops, "before_operation", _failing(0))
  with pytest.raises(OutputError) as raised:
    publish(staging, str(out), meta, NEW_SUCCESS)
  assert str(raised.value) == (
      f"could not publish {out}: no space left on device ({staging}/"
      f"SUCCESS_NEXT); nothing was published and {out} keeps its previous "
      "content (its staging folder was removed). Free space there, or "
      "write the dataset elsewhere")
  assert _tree(out) == old and _hidden(out) == []


def test_a_failed_rename_mid_switch_is_undone(tmp_path, monkeypatch):
  out = tmp_path / "out"
  out.mkdir()
  old = _old(out)
  staging, meta, _ = _staged(out)
  # Operation 5: an old file moving aside (after _SUCCESS's).
  monkeypatch.setattr(file_ops, "before_operation", _failing(5))
  with pytest.raises(OutputError, match=(
      f"^could not publish {out}: no space left on device .*; the switch "
      f"was undone: {out} holds its previous content, whole. Free space "
      "there, or write the dataset elsewhere$")):
    publish(staging, str(out), meta, NEW_SUCCESS)
  assert _tree(out) == old and _hidden(out) == []


def test_a_switch_that_cannot_be_undone_either_is_finished_next_time(
    tmp_path, monkeypatch):
  out = tmp_path / "out"
  out.mkdir()
  _old(out)
  staging, meta, new = _staged(out)
  monkeypatch.setattr(file_ops, "before_operation", _failing(5, True))
  with pytest.raises(PublishInterruptedError) as raised:
    publish(staging, str(out), meta, NEW_SUCCESS)
  assert str(raised.value).endswith(
      f"{out} holds no finished dataset now, and nothing is lost: the new "
      f"dataset is whole in {staging}, the previous one in "
      f"{staging}/previous. Run the same build again (once the cause is "
      "fixed) to finish the publish")
  monkeypatch.setattr(file_ops, "before_operation", None)
  assert has_journal(staging)
  assert state(staging, str(out), NEW_SUCCESS) == "began"
  assert recover(str(out), keep="") == [
      "finished the publish of an earlier build that was interrupted "
      f"({STAGING})"]
  assert _tree(out) == new and _hidden(out) == []


def test_a_failed_operation_anywhere_loses_nothing(tmp_path, monkeypatch):
  """An error (not a kill) at file operation k, once or from k on: the
  publish either ended (the failure was in the cleanup), or was undone
  (the old dataset in place, the staging folder removed unless removing
  failed too), or says it was interrupted, and then the next build
  finishes it. Never a stray temporary file."""
  operations = _publish_counting(tmp_path)
  outcomes = {}
  for k in range(operations):
    for every_after in (False, True):
      out = tmp_path / f"fail{k}{'-on' if every_after else ''}"
      out.mkdir()
      old = _old(out)
      staging, meta, new = _staged(out)
      monkeypatch.setattr(file_ops, "before_operation",
                          _failing(k, every_after))
      try:
        publish(staging, str(out), meta, NEW_SUCCESS)
        said = "published"
      except OutputError as e:
        said = "not published"
        assert "no space left on device" in str(e), e
      except PublishInterruptedError as e:
        said = "interrupted"
        assert "Run the same build again" in str(e), e
      monkeypatch.setattr(file_ops, "before_operation", None)
      outcomes[(k, every_after)] = said
      tree = {n: d for n, d in _tree(out).items()
              if not n.startswith(STAGING)}
      if said == "published":
        assert tree == new, (k, every_after)
      elif said == "not published":
        assert tree == old, (k, every_after)
        assert os.path.exists(staging) == every_after, (k, every_after)
      else:
        recover(str(out), keep="")
        assert _tree(out) in (new, old), (k, every_after)
      assert not [n for n in _tree(out) if n.endswith(".tmp")]
  # One failed step is undone; a failure that lasts is left to finish;
  # once published (the last two operations clean up), it stays so.
  assert outcomes[(0, False)] == outcomes[(5, False)] == "not published"
  assert outcomes[(5, True)] == "interrupted"
  assert outcomes[(operations - 1, True)] == "published"
  assert outcomes[(operations - 2, True)] == "published"


@pytest.mark.parametrize("lost_at,journal_left", [(1, False), (3, True)],
                         ids=["before_the_journal", "after_the_journal"])
def test_a_lost_lock_stops_the_publish_for_the_build_that_has_it(
    tmp_path, lost_at, journal_left):
  """`guard` raises OutputBusyError once another build has the lock:
  nothing is undone (that build finishes the switch, or starts anew)."""
  out = tmp_path / "out"
  out.mkdir()
  old = _old(out)
  staging, meta, new = _staged(out)
  calls = [0]

  def guard():
    calls[0] += 1
    if calls[0] > lost_at:
      raise OutputBusyError("the lock was taken over")
  with pytest.raises(OutputBusyError, match="the lock was taken over"):
    publish(staging, str(out), meta, NEW_SUCCESS, guard=guard)
  assert has_journal(staging) == journal_left
  assert file_ops.guard is None  # not left for the next publish
  recover(str(out), keep="")
  assert _tree(out) == (new if journal_left else old)


def test_recover_removes_dead_builds_staging_folders_but_the_kept_one(
    tmp_path, caplog):
  out = tmp_path / "out"
  out.mkdir()
  old = _old(out)
  dead = out / ".staging-aaaaaaaaaaaa"
  (dead / "train-00000-of-00001.tfrecord.gz").parent.mkdir()
  (dead / "train-00000-of-00001.tfrecord.gz").write_bytes(b"x" * 250_000)
  kept = out / ".staging-bbbbbbbbbbbb"
  kept.mkdir()
  (kept / "dataset.json").write_text("{}")
  other = out / ".staging-not-ours"  # not a run id: not ours to remove
  other.mkdir()
  with caplog.at_level(logging.WARNING, logger="beam_tfrecords"):
    assert recover(str(out), keep=str(kept) + "/") == [
        "removed .staging-aaaaaaaaaaaa, the staging folder of an earlier "
        "build that did not finish (0.2 MB)"]
  assert [r.getMessage() for r in caplog.records] == [
      f"{out}: removed .staging-aaaaaaaaaaaa, the staging folder of an "
      "earlier build that did not finish (0.2 MB)"]
  assert _hidden(out) == [".staging-bbbbbbbbbbbb", ".staging-not-ours"]
  assert {k: v for k, v in _tree(out).items() if not k.startswith(".")} \
      == old
  assert recover(str(tmp_path / "no-such-output"), keep="") == []


def test_remove_staging_says_what_it_freed_and_never_removes_a_journal(
    tmp_path):
  staging = tmp_path / STAGING
  (staging / "errors").mkdir(parents=True)
  (staging / "errors" / "e.jsonl").write_bytes(b"e" * 100)
  (staging / "a.tfrecord.gz").write_bytes(b"a" * 23)
  assert remove_staging(str(staging)) == 123
  assert not staging.exists()
  assert remove_staging(str(staging)) == 0  # gone already
  staging.mkdir()
  (staging / JOURNAL).write_text("{}")
  assert has_journal(str(staging))
  with pytest.raises(RuntimeError, match=(
      f"^{staging} holds a publish's journal; only the publish's own steps "
      "remove it$")):
    remove_staging(str(staging))
  assert (staging / JOURNAL).exists()


def test_remove_parts_keeps_the_shards_errors_and_dataset_json(tmp_path):
  staging = tmp_path / STAGING
  kept = ["train-00000-of-00001.tfrecord.gz", "dataset.json",
          "errors/errors-00000-of-00001.jsonl",
          "transformed/train-00000-of-00001.tfrecord.gz"]
  parts = [".parts/train/0.part", ".parts/steps/a.steps",
           "errors/.parts/0.part", "transformed/.parts/1.part",
           ".tft-tmp/analysis/x"]
  for rel in kept + parts:
    (staging / rel).parent.mkdir(parents=True, exist_ok=True)
    (staging / rel).write_bytes(rel.encode())
  remove_parts(str(staging))
  assert sorted(_tree(staging)) == sorted(kept)
  for folder in (".parts", "errors/.parts", "transformed/.parts", ".tft-tmp"):
    assert not (staging / folder).exists(), folder
  remove_parts(str(staging))  # nothing left to remove: no error


@pytest.mark.parametrize("content,ours", [
    (None, False),
    (b"not json", False),
    (b"[1, 2]", False),
    (b'{"tool": {"name": "other"}}', False),
    (b'{"tool": {"name": "beam-tfrecords", "version": "0.0.1"}, "x": 1}',
     True),
], ids=["absent", "not_json", "not_an_object", "another_tool", "ours"])
def test_previous_dataset_is_only_a_dataset_json_of_ours(tmp_path, content,
                                                         ours):
  if content is not None:
    (tmp_path / "dataset.json").write_bytes(content)
  found = previous_dataset(str(tmp_path))
  assert (found is not None) == ours
  if ours:
    assert found["x"] == 1


def _empty(out):
  pass


def _only_hidden_and_our_success(out):
  (out / ".beam-tfrecords.lock").write_text("{}")
  (out / STAGING).mkdir()
  (out / STAGING / "dataset.json").write_text("{}")
  (out / "_SUCCESS").write_text(SUCCESS_TEXT)


def _our_dataset_and_a_file_of_yours(out):
  _old(out)
  (out / "notes.txt").write_text("kept beside it")


@pytest.mark.parametrize("make", [
    _empty, _only_hidden_and_our_success, _our_dataset_and_a_file_of_yours],
                         ids=["empty", "hidden_and_our_success",
                              "our_dataset"])
def test_a_build_may_write_into(tmp_path, make):
  out = tmp_path / "out"
  out.mkdir()
  make(out)
  check_output_files(str(out))
  check_output_files(str(tmp_path / "not-made-yet"))


def _seven_files(out):
  for i in range(7):
    (out / f"f{i}.txt").write_text("x")
  return (f"output {out} holds files that no beam-tfrecords build wrote "
          "(f0.txt, f1.txt, f2.txt, f3.txt, f4.txt and 2 more); a dataset "
          "gets a folder of its own (new, empty, or holding a dataset of "
          "ours): give another --output, or move those files away")


def _a_success_of_another_tool(out):
  (out / "_SUCCESS").write_text("")
  return (f"output {out} holds files that no beam-tfrecords build wrote "
          "(_SUCCESS); a dataset gets a folder of its own")


def _a_card_our_dataset_does_not_list(out):
  _old(out)
  (out / "README.md").write_text("# my notes")
  (out / "preview").mkdir()
  (out / "preview" / "train.parquet").write_bytes(b"PAR1")
  return (f"output {out} holds README.md, preview/train.parquet, which a "
          "build writes (the dataset card, croissant.json, the previews) "
          "and the dataset there does not list")


@pytest.mark.parametrize("make", [
    _seven_files, _a_success_of_another_tool,
    _a_card_our_dataset_does_not_list],
                         ids=["foreign_files", "foreign_success",
                              "unlisted_card"])
def test_a_build_may_not_write_into(tmp_path, make):
  out = tmp_path / "out"
  out.mkdir()
  message = make(out)
  before = _tree(out)
  with pytest.raises(InputError) as raised:
    check_output_files(str(out))
  assert str(raised.value).startswith(message)
  assert _tree(out) == before

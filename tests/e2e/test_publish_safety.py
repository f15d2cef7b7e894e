"""Publishing that never destroys (issue 17, first part): outputs that are
refused, statistics that do not depend on merge order, image paths that
cannot leave base_dir through a symbolic link."""

import os

import pytest

import beam_tfrecords as btr

from tests.helpers.publish_safety import _tree


DICT = {"name": "t", "features": {"id": {"type": "int64"}}}


def test_a_symbolic_link_cannot_lead_out_of_base_dir(tmp_path):
  base = tmp_path / "images"
  base.mkdir()
  secret = tmp_path / "secret.png"
  secret.write_bytes(b"\x89PNG not really")
  os.symlink(tmp_path, base / "up")  # a link inside base_dir to outside
  (tmp_path / "in.csv").write_text("path\nup/secret.png\n")
  schema = {"name": "i", "features": {"image": {
      "type": "image", "source": "path", "base_dir": str(base)}}}
  out = str(tmp_path / "out")
  btr.build(schema, str(tmp_path / "in.csv"), out, max_bad_fraction=1.0)
  (error,) = list(btr.open(out).errors())
  assert "the path 'up/secret.png' leads outside base_dir" in \
      error["reason"]
  assert f"through a symbolic link (to '{secret}')" in error["reason"]
  assert "PNG not really" not in str(error)


def test_hidden_files_do_not_make_a_folder_foreign(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  (out / ".gitkeep").write_text("")
  (tmp_path / "in.csv").write_text("id\n1\n")
  btr.build(DICT, str(tmp_path / "in.csv"), str(out))
  assert (out / ".gitkeep").exists() and (out / "_SUCCESS").exists()


def test_a_foreign_file_in_the_way_stops_the_publish(tmp_path):
  (tmp_path / "in.csv").write_text("id\n" + "".join(
      f"{i}\n" for i in range(10)))
  out = tmp_path / "out"
  btr.build(DICT, str(tmp_path / "in.csv"), str(out), num_shards=2)
  before = _tree(out)
  # Someone's file where the next build's only shard goes.
  (out / "train-00000-of-00001.tfrecord.gz").write_bytes(b"mine")
  with pytest.raises(btr.InputError) as e:
    btr.build(DICT, str(tmp_path / "in.csv"), str(out), num_shards=1,
              overwrite=True)
  assert str(e.value).startswith(
      f"{out} holds train-00000-of-00001.tfrecord.gz, which the new dataset "
      "would overwrite and no dataset of ours lists: nothing was published "
      f"(the new files are in {out}/.staging-")
  after = _tree(out)
  assert after.pop("train-00000-of-00001.tfrecord.gz") == b"mine"
  assert {k: v for k, v in after.items()
          if not k.startswith(".staging-")} == before


@pytest.mark.parametrize("where", ["shard", "csv", "base_dir"])
def test_inputs_inside_the_output_are_refused(tmp_path, where):
  out = tmp_path / "x"
  (tmp_path / "in.csv").write_text("id\n" + "".join(
      f"{i}\n" for i in range(8)))
  btr.build(DICT, str(tmp_path / "in.csv"), str(out), num_shards=4)
  before = _tree(out)
  if where == "shard":  # the case: it deleted the shards it did
    # not read
    src, schema = str(out / "train-00000-of-00004.tfrecord.gz"), DICT
    bad = src
  elif where == "csv":
    (out / "more.csv").write_text("id\n1\n")
    before = _tree(out)
    src = bad = str(out / "more.csv")
    schema = DICT
  else:
    (tmp_path / "p.csv").write_text("path\na.png\n")
    src, bad = str(tmp_path / "p.csv"), str(out)
    schema = {"name": "i", "features": {"image": {
        "type": "image", "source": "path", "base_dir": str(out)}}}
  with pytest.raises(btr.InputError) as e:
    btr.build(schema, src, str(out), overwrite=True, force=True)
  assert str(e.value) == (
      f"input {bad} is inside the output folder {out}; a build replaces "
      "what it published there, so its inputs live elsewhere: move them "
      "out, or write the dataset to another folder")
  assert _tree(out) == before


# Slow: tests/unit/publish/test_journal.py::test_recover_removes_dead_builds_staging_folders_but_the_kept_one
# removes (and logs) leftovers in the fast tier; test_faults checks that
# a build over its threshold keeps its staging folder.
@pytest.mark.slow
def test_leftover_staging_folders_of_dead_builds_are_removed(tmp_path,
                                                             caplog):
  import logging
  (tmp_path / "in.csv").write_text("id\n1\noops\n")
  out = tmp_path / "out"
  # A build over its threshold keeps its staging folder for a look ...
  with pytest.raises(btr.BadRowsError):
    btr.build(DICT, str(tmp_path / "in.csv"), str(out), max_bad_rows=0)
  (kept,) = [n for n in os.listdir(out) if n.startswith(".staging-")]
  # ... and a killed one leaves its parts.
  dead = out / ".staging-deadbeef0000" / ".parts" / "train"
  dead.mkdir(parents=True)
  (dead / "p-0.gz").write_bytes(b"x" * 2_000_000)
  with caplog.at_level(logging.WARNING, logger="beam_tfrecords"):
    btr.build(DICT, str(tmp_path / "in.csv"), str(out),
              max_bad_fraction=1.0)
  assert sorted(n for n in os.listdir(out) if n.startswith(".")) == []
  lines = [r.getMessage() for r in caplog.records
           if "staging folder of an earlier build" in r.getMessage()]
  assert len(lines) == 2
  assert (f"{out}: removed .staging-deadbeef0000, the staging folder of an "
          "earlier build that did not finish (2.0 MB)") in lines
  assert any(line.startswith(f"{out}: removed {kept}, the staging folder")
             for line in lines)

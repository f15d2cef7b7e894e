"""Publishing that never destroys (issue 17, first part): outputs that are
refused, statistics that do not depend on merge order, image paths that
cannot leave base_dir through a symbolic link."""

import itertools
import os
from fractions import Fraction

import numpy as np
import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.encoding.exact_sums import sums
from beam_tfrecords.encoding.stats import finish, merge

SCHEMA = "name: t\nfeatures:\n  id: {type: int64}\n"
DICT = {"name": "t", "features": {"id": {"type": "int64"}}}


@pytest.mark.parametrize("output,message", [
    ("/", "output '/' is the file system root; a dataset gets a folder of "
     "its own"),
    ("", "output is empty; give the dataset's folder"),
    (".", "output '.' is the current directory; a dataset gets a folder of "
     "its own"),
    ("./", "output './' is the current directory"),
    ("sub/..", "output 'sub/..' is the current directory"),
    ("gs://bucket", "output 'gs://bucket' is the root of a bucket; give a "
     "folder for the dataset inside it (gs://bucket/datasets/NAME)"),
    ("s3://bucket/", "output 's3://bucket/' is the root of a bucket"),
], ids=["root", "empty", "dot", "dot_slash", "dot_dot", "gcs_bucket",
        "s3_bucket"])
def test_outputs_among_unrelated_files_are_refused(tmp_path, monkeypatch,
                                                   capsys, output, message):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "s.yaml").write_text(SCHEMA)
  (tmp_path / "in.csv").write_text("id\n1\n")
  before = sorted(os.listdir(tmp_path))
  assert cli.main(["build", "--schema", "s.yaml", "--input", "in.csv",
                   "--output", output]) == cli.EXIT_INPUT
  assert message in capsys.readouterr().err
  assert sorted(os.listdir(tmp_path)) == before


def _part(value):
  total, squares = sums(np.array([value]))
  return {"present": 1, "missing": 0, "values": 1, "min": value,
          "max": value, "sum": total, "sumsq": squares, "counted": 1}


def test_the_mean_does_not_depend_on_the_merge_order():
  # Values whose float sum depends on the order of the additions.
  values = [1e16, 1.0, -1e16, 3.3, 0.1, 0.2, 1e-3]
  means = set()
  for order in itertools.permutations(values):
    folded = None
    for v in order:
      folded = merge(folded, _part(v))
    means.add(finish(folded)["mean"])
    parts = [_part(v) for v in order]
    tree = merge(merge(parts[0], parts[1]),
                 merge(merge(parts[2], parts[3]),
                       merge(parts[4], merge(parts[5], parts[6]))))
    means.add(finish(tree)["mean"])
  # One value, and the correctly rounded one.
  assert means == {float(sum(map(Fraction, values)) / len(values))}
  # Plain float addition would not have been order-free.
  assert len({sum(order) for order in itertools.permutations(values)}) > 1


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


@pytest.mark.parametrize("where", ["default", "vocabulary", "shape"])
def test_yaml_aliases_are_refused_before_any_value_is_formatted(tmp_path,
                                                                where):
  # "Billion laughs": nine levels of nine aliases would be 9**9 strings.
  lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
  for i in range(1, 9):
    lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
  text = "\n".join(lines) + f"\nname: t\nfeatures:\n  a: {{type: string, " \
      f"{where}: *l8}}\n"
  (tmp_path / "s.yaml").write_text(text)
  with pytest.raises(btr.SchemaError) as e:
    btr.load_schema(str(tmp_path / "s.yaml"))
  assert str(e.value) == (f"{tmp_path / 's.yaml'}: not valid YAML: line 2, "
                          "column 10: aliases (*l0) are not allowed in a "
                          "schema; write the value out")


# --- Foreign files, inputs inside the output, leftovers --------------------

def _tree(folder) -> dict:
  return {os.path.relpath(os.path.join(root, f), folder):
          open(os.path.join(root, f), "rb").read()
          for root, _, files in os.walk(folder) for f in files}


def test_a_folder_of_someone_elses_files_is_refused_and_kept(tmp_path,
                                                             capsys):
  # What looks like a dataset, but no build of ours wrote it (no _SUCCESS,
  # a dataset.json of another tool).
  out = tmp_path / "theirs"
  for rel in ("train-00000-of-00002.tfrecord.gz",
              "eval-00001-of-00002.tfrecord.gz",
              "errors/errors-00000-of-00001.jsonl",
              "transform_fn/saved_model.pb", "schema.pbtxt"):
    (out / rel).parent.mkdir(parents=True, exist_ok=True)
    (out / rel).write_bytes(b"theirs " + rel.encode())
  (out / "dataset.json").write_text('{"tool": {"name": "other"}}')
  before = _tree(out)
  (tmp_path / "s.yaml").write_text(SCHEMA)
  (tmp_path / "in.csv").write_text("id\n1\n")
  assert cli.main(["build", "--schema", str(tmp_path / "s.yaml"), "--input",
                   str(tmp_path / "in.csv"), "--output", str(out),
                   "--overwrite"]) == cli.EXIT_INPUT
  assert (f"error: output {out} holds files that no beam-tfrecords build "
          "wrote (dataset.json, errors/errors-00000-of-00001.jsonl, "
          "eval-00001-of-00002.tfrecord.gz, schema.pbtxt, "
          "train-00000-of-00002.tfrecord.gz and 1 more); a dataset gets a "
          "folder of its own (new, empty, or holding a dataset of ours): "
          "give another --output, or move those files away"
          ) in capsys.readouterr().err
  assert _tree(out) == before


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
  if where == "shard":  # the issue's case: it deleted the shards it did
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


def test_schema_errors_show_a_bounded_preview_of_a_value(tmp_path):
  big = list(range(100_000))
  with pytest.raises(btr.SchemaError) as e:
    btr.load_schema({"name": "t", "features": {
        "a": {"type": "int64", "shape": [2], "default": big}}})
  message = str(e.value)
  assert len(message) < 400, len(message)
  assert "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, " \
      in message
  assert "… (688,890 characters)" in message


def test_a_pipeline_that_cannot_be_made_leaves_no_staging_folder(
    tmp_path, monkeypatch):
  """The output's set-up (staging.py) makes the staging folder before the
  pipeline is made; a failure in between removes it again."""
  from beam_tfrecords.building import builder as pipeline

  def broken(*args, **kwargs):
    raise ImportError("a transform's module is missing")
  monkeypatch.setattr(pipeline, "WriteBatches", broken)
  (tmp_path / "in.csv").write_text("id\n1\n2\n")
  out = tmp_path / "out"
  with pytest.raises(ImportError, match="module is missing"):
    btr.build({"name": "s", "features": {"id": "int64"}},
              str(tmp_path / "in.csv"), str(out))
  # The output folder this build made is removed with its lock, or at
  # least holds no staging folder.
  left = os.listdir(out) if out.exists() else []
  assert [p for p in left if p.startswith(".staging-")] == []

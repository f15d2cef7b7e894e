"""beam_tfrecords/publish/staging.py, on values: Everything a build does to its
output before it writes, the same for `btr.build` and `btr.WriteDataset`:
the output checked and locked, the publishes of killed builds finished and
their staging folders removed, a finished dataset kept unless overwritten
(or, for build(), reported up to date), the staging folder with TensorFlow
Metadata's schema.pbtxt."""

import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli

from tests.helpers.publish_safety import _tree


SCHEMA = "name: t\nfeatures:\n  id: {type: int64}\n"


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

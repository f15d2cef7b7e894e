"""Publishing that never destroys (issue 17, first part): outputs that are
refused, statistics that do not depend on merge order, image paths that
cannot leave base_dir through a symbolic link."""

import itertools
import math
import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.encoding.stats import exact_sum, finish, merge

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


def _part(value):
  return {"present": 1, "missing": 0, "values": 1, "min": value,
          "max": value, "sum": [value], "counted": 1}


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
  assert means == {math.fsum(values) / len(values)}
  # Plain float addition would not have been order-free.
  assert len({sum(order) for order in itertools.permutations(values)}) > 1
  assert math.fsum(exact_sum([0.1, 0.2, -0.3])) == 2.7755575615628914e-17


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
  (error,) = list(btr.iter_errors(out))
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

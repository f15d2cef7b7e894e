"""beam_tfrecords/schema/media_features.py, on values: The checks of image,
tensor and vocabulary declarations."""

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError, SchemaError, cli


@pytest.mark.parametrize("features,key,message", [
    ({"x": {"type": "image", "resize": [0, 3]}}, "features.x.resize",
     "must be [height, width]"),
    ({"x": {"type": "image", "method": "bilinear"}}, "features.x.method",
     "add resize"),
    ({"x": {"type": "image", "encode": "gif"}}, "features.x.encode",
     "must be one of"),
    ({"x": {"type": "tensor", "dtype": "complex", "shape": [2]}},
     "features.x.dtype", "must be one of"),
    ({"x": {"type": "tensor", "dtype": "uint8", "shape": [-1],
            "storage": "list"}}, "features.x.shape", "every dimension fixed"),
    ({"x": {"type": "tensor", "dtype": "uint8", "shape": [3],
            "source": ["a", "b"]}}, "features.x.source",
     "2 columns cannot fill shape [3]"),
    ({"x": {"type": "string", "vocabulary": []}}, "features.x.vocabulary",
     "must be auto"),
    ({"x": {"type": "int64", "vocabulary": ["a"]}}, "features.x.vocabulary",
     "goes with a scalar string feature"),
    ({"x": {"type": "image"}, "x_width": "int64"}, "features.x",
     "makes the feature 'x_width', which is also declared"),
])
def test_media_schema_mistakes(features, key, message):
  with pytest.raises(SchemaError) as e:
    btr.load_schema({"name": "m", "features": features})
  assert f"<dict>: {key}: " in str(e.value)
  assert message in str(e.value)


def test_auto_vocabulary_needs_an_image_folder(tmp_path):
  src = tmp_path / "l.csv"
  src.write_text("label\na\n")
  with pytest.raises(InputError, match="features.label.vocabulary: auto "
                     "takes the class folder names of an image folder"):
    btr.build({"name": "v", "features": {"label": {
        "type": "string", "vocabulary": "auto"}}}, str(src),
              str(tmp_path / "o"), max_bad_fraction=1.0)


def test_vocabulary_auto_on_a_table_names_the_schema_key(tmp_path, capsys):
  schema = ("name: t\nfeatures:\n  id: {type: int64}\n"
            "  label: {type: string, vocabulary: auto}\n")
  (tmp_path / "s.yaml").write_text(schema)
  (tmp_path / "in.csv").write_text("id,label\n1,cat\n")
  assert cli.main(["build", "--schema", str(tmp_path / "s.yaml"), "--input",
                   str(tmp_path / "in.csv"), "--output",
                   str(tmp_path / "out")]) == cli.EXIT_INPUT
  assert (f"error: {tmp_path / 's.yaml'}: features.label.vocabulary: auto "
          "takes the class folder names of an image folder (--format "
          "images, column label), but this build reads csv input; list the "
          "values in index order instead: vocabulary: [cat, dog, ...]"
          ) in capsys.readouterr().err

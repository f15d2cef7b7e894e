"""dataset.json as typed values (beam_tfrecords/core/info.py): btr.DatasetInfo,
SplitInfo. Every dataset.json a build writes reads into the model and
writes back byte for byte; the typed values are what the files hold.
(The bundled pipelines' dataset.json, of every variant: Examples,
SequenceExamples, TensorFlow Transform's part, lists, are checked where
they are built, tests/e2e/test_bundled_bytes.py.)"""

import json
import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.info import DatasetInfo, SplitInfo


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  root = tmp_path_factory.mktemp("labelled")
  # Labels and rejected rows, which no bundled pipeline has.
  src = root / "rows.csv"
  src.write_text("id,score,label,split\n" + "".join(
      f"{i},{i / 4 if i % 11 else 'bad'},{i % 3},"
      f"{'eval' if i % 5 == 0 else 'train'}\n" for i in range(300)))
  schema = {"name": "labelled", "label": "label",
            "splits": {"column": "split", "values": ["train", "eval"]},
            "features": {"id": {"type": "int64", "required": True},
                         "score": {"type": "float", "required": True},
                         "label": {"type": "int64", "required": True}}}
  result = btr.build(schema, str(src), str(root / "labelled"),
                     max_bad_fraction=1.0, num_shards=2)
  return root, result


def test_the_dataset_json_round_trips_byte_for_byte(built):
  root, _ = built
  text = (root / "labelled" / "dataset.json").read_text()
  info = DatasetInfo.from_directory(str(root / "labelled"))
  assert info.to_text() == text
  assert info.to_json() == json.loads(text)


def test_typed_values_are_what_the_file_holds(built):
  root, result = built
  path = str(root / "labelled")
  info = btr.dataset_info(path)
  raw = json.loads((root / "labelled" / "dataset.json").read_text())
  assert isinstance(info, btr.DatasetInfo)
  assert (info.name, info.record, info.label) == ("labelled", "example",
                                                  ("label",))
  assert sorted(info.splits) == ["eval", "train"]
  train = info.splits["train"]
  assert isinstance(train, SplitInfo)
  assert train.num_records == raw["splits"]["train"]["records"]
  assert train.num_bytes == raw["splits"]["train"]["bytes"]
  assert train.num_shards == 2
  assert train.files == ["train-00000-of-00002.tfrecord.gz",
                         "train-00001-of-00002.tfrecord.gz"]
  assert sum(s.num_records for s in train.shards) == train.num_records
  assert btr.feature_spec(path).keys() == info.feature_spec.keys()
  # 300 rows, every 11th unparsable.
  bad = len([i for i in range(300) if i % 11 == 0])
  assert info.counts.rows_read == 300
  assert info.counts.rows_rejected == bad == info.errors.rows
  assert info.counts.records_written == 300 - bad
  assert info.counts.steps_written is None
  assert info.errors.reasons[0].rows == bad
  assert "could not parse" in info.errors.reasons[0].reason
  assert [f.file for f in info.errors.files] == [
      "errors/errors-00000-of-00001.jsonl"]
  # The build's result carries the same object.
  assert result.info == info
  assert result.splits["train"] == train
  assert result.rows_rejected == bad


def test_old_dict_access_still_reads_the_json(built):
  """Code written when dataset_info() returned a dict keeps working."""
  root, result = built
  info = btr.dataset_info(str(root / "labelled"))
  assert info.label == ("label",)
  assert info.splits["train"].shards[0].file == \
      "train-00000-of-00002.tfrecord.gz"
  assert info.transform is None and info.splits
  with open(root / "labelled" / "dataset.json") as f:
    assert info.to_json() == json.load(f)
  assert result.splits["train"] == result.info.splits["train"]
  assert info != {"name": "labelled"}
  assert result.splits["train"].num_records == \
      result.info.splits["train"].num_records


def test_an_unfinished_dataset_is_refused(built, tmp_path):
  root, _ = built
  (tmp_path / "half").mkdir()
  with open(root / "labelled" / "dataset.json") as f:
    (tmp_path / "half" / "dataset.json").write_text(f.read())
  with pytest.raises(InputError, match="not a finished dataset"):
    btr.dataset_info(str(tmp_path / "half"))
  # The model itself reads it (a staged dataset.json, say).
  assert DatasetInfo.from_directory(str(tmp_path / "half")).name == \
      "labelled"
  assert os.path.exists(root / "labelled" / "_SUCCESS")

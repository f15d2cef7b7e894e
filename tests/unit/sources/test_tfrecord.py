"""beam_tfrecords/sources/tfrecord.py, on values: Existing TFRecord files of
tf.train.Example -> Arrow batches."""

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError

from tests.helpers.input_checks import GZIPPED, HALF, _truncated, _whole_records
from tests.helpers.tfrecord_input import _example, _write


@pytest.mark.parametrize("cut", [HALF, len(GZIPPED) - 3],
                         ids=["cut_in_the_middle", "trailer_cut"])
def test_a_truncated_gzip_tfrecord_on_a_cloud_file_system_is_not_read_short(
    tmp_path, monkeypatch, cut):
  """Beam's gzip reader (gs://, s3://) ends a truncated stream without a
  word: the records after the cut were left out, or the last one was
  called a truncated record. Taken for a cloud path, a local file is read
  through Beam's file systems."""
  from beam_tfrecords.core import fs
  from beam_tfrecords.sources import tfrecord as source
  monkeypatch.setattr(fs, "is_local", lambda path: False)
  path = tmp_path / "t.tfrecord.gz"
  path.write_bytes(GZIPPED[:cut])
  unit = btr.sources.ReadUnit(str(path), "tfrecord",
                              options=(("scalar_columns", ("id",)),))
  with pytest.raises(InputError) as e:
    list(source.TFRecordFormat().read(unit, ["id"]))
  assert _whole_records(cut) > 0  # inflated, and still not handed out
  assert str(e.value) == _truncated(str(path))


def test_a_column_read_both_as_one_value_and_as_a_list_is_refused(tmp_path,
                                                                  tf):
  _write(tf, tmp_path / "in.tfrecord", [_example(tf, x=[1])])
  schema = {"name": "t", "features": {
      "a": {"type": "int64", "source": "x"},
      "b": {"type": "int64", "shape": [-1], "source": "x"}}}
  with pytest.raises(InputError, match=(
      r"TFRecord input: the feature 'x' is read as one value \(by a\) and "
      r"as a list \(by b\)")):
    btr.build(schema, str(tmp_path / "in.tfrecord"), str(tmp_path / "out"))


def test_batches_are_capped_in_bytes(tmp_path, tf, monkeypatch):
  from beam_tfrecords.sources import tfrecord as source
  monkeypatch.setattr(source, "BATCH_BYTES", 1000)
  _write(tf, tmp_path / "in.tfrecord", [
      _example(tf, id=i, title=b"x" * 300, pair=[i, i]) for i in range(20)])
  unit = btr.sources.ReadUnit(str(tmp_path / "in.tfrecord"), "tfrecord",
                              options=(("scalar_columns", ("id",)),))
  batches = list(source.TFRecordFormat().read(unit, ["id", "title"]))
  assert [b.num_rows for b in batches] == [3] * 6 + [2]
  assert [b.first_row for b in batches] == list(range(1, 21, 3))
  assert [v for b in batches for v in b.columns["id"].to_pylist()] == \
      list(range(20))

"""beam_tfrecords/read/dataset_reader.py, on values: One handle to read a
finished dataset (or a window of them) every way."""

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError


def test_open_refuses_what_is_not_a_finished_dataset(tmp_path):
  with pytest.raises(InputError):
    btr.open(str(tmp_path / "nothing"))

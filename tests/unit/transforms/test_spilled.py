"""Records that cross a stage as part files (transforms.spilled, used
where the runner holds a stage's output in memory: Dask)."""

import os
import pickle

import numpy as np
import pytest

from beam_tfrecords.encoding.ragged import Ragged, offsets_of
from beam_tfrecords.transforms.spilled import spill


def _ragged(records):
  buf = np.frombuffer(b"".join(records), dtype=np.uint8)
  return Ragged(buf, offsets_of(np.array([len(r) for r in records])))


def test_spilled_records_read_back_as_the_list_they_were(tmp_path):
  records = [b"a", b"", b"\x00\xff" * 1000, "é".encode("utf-8")]
  spilled = spill(str(tmp_path), _ragged(records))
  assert len(spilled) == 4 and bool(spilled)
  assert list(spilled) == records and spilled.load() == records
  # What the runner carries: a path and a count, pickled as such.
  again = pickle.loads(pickle.dumps(spilled))
  assert (again.path, again.count) == (spilled.path, 4)
  assert list(again) == records
  assert len(pickle.dumps(spilled)) < 200


def test_a_slice_of_a_larger_buffer_and_no_records(tmp_path):
  whole = _ragged([b"skip", b"keep1", b"keep22", b"tail"])
  middle = Ragged(whole.buf, whole.offsets[1:4])  # starts at byte 4
  assert list(spill(str(tmp_path), middle)) == [b"keep1", b"keep22"]
  empty = spill(str(tmp_path), _ragged([]))
  assert len(empty) == 0 and not empty and list(empty) == []


def test_a_part_file_cut_short_is_an_error_naming_it(tmp_path):
  spilled = spill(str(tmp_path), _ragged([b"x" * 100, b"y" * 100]))
  size = os.path.getsize(spilled.path)
  with open(spilled.path, "r+b") as f:
    f.truncate(size - 5)
  with pytest.raises(IOError, match=r"records-.*\.part: a part file of 2 "
                     r"records is damaged or cut short"):
    list(spilled)


def test_the_part_file_is_compressed(tmp_path):
  records = [b"carrier=UA origin=EWR dest=IAH %d" % (i % 50)
             for i in range(10_000)]
  spilled = spill(str(tmp_path), _ragged(records))
  raw = sum(map(len, records)) + 8 * (len(records) + 1)
  assert os.path.getsize(spilled.path) < raw / 4
  assert list(spilled) == records

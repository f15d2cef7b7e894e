"""beam_tfrecords/transforms/inputs.py, on values: about how many input
bytes each read unit reads (for progress), and ReadInputs refusing to read
nothing."""

import pytest

from beam_tfrecords.sources import ReadUnit
from beam_tfrecords.transforms.inputs import ReadInputs, unit_bytes


@pytest.mark.parametrize("units,files,sizes", [
    ([ReadUnit("a.csv", "csv", 0, 100), ReadUnit("a.csv", "csv", 100, 250)],
     [("a.csv", 250)], [100, 150]),
    ([ReadUnit("a.jsonl", "jsonl"), ReadUnit("b.jsonl", "jsonl")],
     [("a.jsonl", 70), ("b.jsonl", 30)], [70, 30]),
    ([ReadUnit("p.parquet", "parquet", 0, 1),
      ReadUnit("p.parquet", "parquet", 1, 2),
      ReadUnit("p.parquet", "parquet", 2, 3)],
     [("p.parquet", 1000)], [333, 333, 333]),
    ([ReadUnit("imgs", "images", 0, 1), ReadUnit("imgs", "images", 1, 2)],
     [("imgs/a.png", 60), ("imgs/sub/b.png", 40), ("other/c.png", 99)],
     [50, 50]),
    ([ReadUnit("gone.csv", "csv")], [], [0]),
], ids=["byte_ranges", "whole_files", "parquet_row_groups", "image_folder",
        "a_file_not_listed"])
def test_each_unit_reads_its_range_or_a_share_of_its_file(units, files,
                                                          sizes):
  assert unit_bytes(units, files) == sizes


def test_read_inputs_needs_a_unit():
  with pytest.raises(ValueError, match="^ReadInputs needs at least one read "
                     "unit$"):
    ReadInputs([], ["id"])

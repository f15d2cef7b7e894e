"""beam_tfrecords/building/planning.py, on values: Planning a build on the
launcher: what the inputs are, how the output is cut and described
(`dataset_plan`), where it may go; decided before any pipeline runs, the
same on every run of the same inputs."""

import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError

from tests.helpers.inputs import write_csv
from tests.helpers.movies import ROWS, SCHEMA
from tests.helpers.shuffle import SCHEMA as SHUFFLE_SCHEMA, _csv


def test_input_errors_before_the_run(tmp_path):
  with pytest.raises(InputError, match="matches no file"):
    btr.build(SCHEMA, str(tmp_path / "*.csv"), str(tmp_path / "o"))
  write_csv(tmp_path / "a.csv", ROWS)
  (tmp_path / "b.csv").write_text("Age,Movie\n1,x\n")
  with pytest.raises(InputError, match="CSV headers differ"):
    btr.build(SCHEMA, str(tmp_path / "*.csv"), str(tmp_path / "o"))
  (tmp_path / "c.csv").write_text("Age,Film\n1,x\n")
  with pytest.raises(InputError, match=r"column\(s\) \['Code', 'Movie', "
                     r"'Movie Ratings', 'Suggestion'\] named by the schema are "
                     r"not in the csv input"):
    btr.build(SCHEMA, str(tmp_path / "c.csv"), str(tmp_path / "o"))
  (tmp_path / "d.dat").write_text("x")
  with pytest.raises(InputError, match="cannot tell the format of .*d.dat"):
    btr.build(SCHEMA, str(tmp_path / "d.dat"), str(tmp_path / "o"))
  assert not os.path.exists(tmp_path / "o")


def test_shuffle_needs_the_deterministic_sink(tmp_path):
  with pytest.raises(InputError, match="--shuffle-seed works with the "
                     "deterministic sink"):
    btr.build(SHUFFLE_SCHEMA, _csv(tmp_path / "a.csv", 3), str(tmp_path / "o"),
              shuffle_seed=1, sink="beam")

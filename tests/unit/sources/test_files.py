"""beam_tfrecords/sources/files.py, on values: Input files on any file system
(local, gs://, s3://, ...; beam_tfrecords.core.fs)."""

import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError
from beam_tfrecords.sources import base

from tests.helpers.bad_input import SCHEMA


@pytest.mark.parametrize("data", [b"a\n\nb\r\n\r\nc\nd", b"\n\n\nx\n", b"abc",
                                  b"a\nb\n"], ids=["mixed", "leading_empty",
                                                   "no_newline", "plain"])
def test_record_and_line_counts_before_any_offset(tmp_path, data):
  from beam_tfrecords.sources.files import (count_lines_before,
                                            count_records_before)
  path = tmp_path / "f.csv"
  path.write_bytes(data)
  for chunk in (1, 2, 3, 100):
    for offset in range(len(data) + 1):
      lines = data[:offset].split(b"\n")[:-1]
      assert count_records_before(str(path), offset, chunk) == sum(
          1 for line in lines if line.replace(b"\r", b""))
      assert count_lines_before(str(path), offset, chunk) == len(lines)


def test_records_counted_on_from_earlier_offsets_equal_a_fresh_count(
    tmp_path):
  """Offsets asked in any order count on from the nearest one counted
  before (units of one file); a file changed since (its size or time) is
  counted afresh."""
  import random
  from beam_tfrecords.sources import files
  rng = random.Random(3)
  lines = [rng.choice([b"", b"\r", b"ab", b"x\r", b"1,2,3"])
           for _ in range(3000)]
  data = b"\n".join(lines) + b"\ntail"
  path = tmp_path / "f.csv"
  path.write_bytes(data)

  def fresh(offset):
    return sum(1 for line in data[:offset].split(b"\n")[:-1]
               if line.replace(b"\r", b""))

  offsets = [rng.randrange(len(data) + 1) for _ in range(60)]
  for offset in offsets:
    assert files.count_records_before(str(path), offset, 512) == \
        fresh(offset)
  ident = files._identity(str(path))  # pylint: disable=protected-access
  assert len(files._COUNTED[ident]) >= 50  # pylint: disable=protected-access
  # Without \r (the fast path), and then the same size, another time.
  plain = data.replace(b"\r", b"-")
  path.write_bytes(plain)
  os.utime(path, ns=(1, 1))
  for offset in sorted(offsets):
    assert files.count_records_before(str(path), offset, 700) == sum(
        1 for line in plain[:offset].split(b"\n")[:-1] if line)


def test_a_format_saying_splittable_is_refused_not_ignored():
  """Byte ranges are chunks now: a format still saying `splittable =
  False` would be cut into ranges if the old name were silently ignored."""
  class OldFormat(base.Format):
    name = "old-names"
    splittable = False

  with pytest.raises(TypeError, match=r"format 'old-names' defines "
                     r"splittable: rename to chunkable / chunkable_with"):
    base.register_format(OldFormat())
  assert "old-names" not in base.FORMATS


@pytest.mark.parametrize("inputs,message", [
    ("nothing/*.csv", r"nothing/\*.csv' matches no file; check the path"),
    ("missing.csv", "missing.csv' matches no file"),
], ids=["glob_matches_nothing", "path_does_not_exist"])
def test_missing_inputs_fail_before_the_run(tmp_path, inputs, message):
  with pytest.raises(InputError, match=message):
    btr.build(SCHEMA, str(tmp_path / inputs), str(tmp_path / "out"))
  assert not os.path.exists(tmp_path / "out")

"""The read fuzz, bounded (issue 60): seeded mutations of a built
dataset's shards, indexes and dataset.json (bit flips, cuts at bytes and
at members, members dropped, swapped or duplicated, garbage appended,
index fields changed, JSON of the wrong shape), each read by the stream,
iter_records, random access, verify and validate, on the native core and
on the pure-Python path. No record that differs from the source reaches
a caller without an error, no raw exception, no hang.
benchmarks/read_fuzz.py runs the long one (5,000 cases) with its table."""

import pytest

import beam_tfrecords as btr

from tests.helpers import read_fuzz
from tests.helpers.shard_size import SCHEMA, _csv

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
  folder = tmp_path_factory.mktemp("fuzz")
  out = str(folder / "ds")
  btr.build(SCHEMA, _csv(folder / "in.csv", 600), out, num_shards=2,
            member_size="1KiB")
  return out


@pytest.mark.parametrize("native", ["", "0"], ids=["native", "pure_python"])
def test_no_reader_hands_out_a_wrong_record(pristine, tmp_path, monkeypatch,
                                            native):
  monkeypatch.setenv("BTR_NATIVE", native)
  results = read_fuzz.run(pristine, str(tmp_path), cases=200,
                          seed=60 + len(native))
  assert read_fuzz.failures(results) == []
  # Every mutation was tried, and damage to shard or index bytes was
  # caught by every reader that reads those bytes.
  assert {r["mutation"] for r in results} == set(read_fuzz.MUTATIONS)
  for r in results:
    if r["mutation"] in read_fuzz.SHARD:
      assert {r["stream"], r["records"], r["random"], r["verify"],
              r["validate"]} <= {"error", "late"}, r
    if r["mutation"] in read_fuzz.INDEX:
      assert (r["stream"], r["random"], r["verify"]) == (
          "same", "error", "error"), r

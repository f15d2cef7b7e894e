"""btr.BuildOptions, declared once (issue 30): build(), WriteDataset and
the command line take the same options, to the same dataset; the flags,
the build key and docs/cli.md come from the one declaration."""

import dataclasses
import pathlib

import apache_beam as beam
import pytest

import beam_tfrecords as btr
from beam_tfrecords.building.options import BuildOptions
from beam_tfrecords.cli.args import parser

from conftest import ROWS, SCHEMA

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def _csv(tmp_path):
  import pyarrow as pa
  import pyarrow.parquet as pq
  path = tmp_path / "in.parquet"
  pq.write_table(pa.Table.from_pylist(ROWS), str(path))
  return str(path)


def _files(out):
  """relative path -> bytes; a _SUCCESS without its last word (the run id
  of the build that published)."""
  root = pathlib.Path(out)
  return {str(p.relative_to(root)): (
      p.read_bytes().rsplit(b" ", 1)[0] if p.name == "_SUCCESS"
      else p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()}


def test_options_and_keywords_build_the_same_dataset(tmp_path):
  src = _csv(tmp_path)
  a, b = str(tmp_path / "a"), str(tmp_path / "b")
  btr.build(SCHEMA, src, a, options=btr.BuildOptions(
      num_shards=3, max_bad_fraction=0.05, report=False))
  btr.build(SCHEMA, src, b, num_shards=3, max_bad_fraction=0.05,
            report=False)
  assert _files(a) == _files(b)
  info = btr.dataset_info(a)
  assert info.options.num_shards == {"train": 3}
  assert info.options.max_bad_fraction == 0.05
  assert info.report is None and "report.html" not in _files(a)
  assert [s.num_shards for s in info.splits.values()] == [3]


def test_a_keyword_replaces_the_field_of_options(tmp_path):
  src = _csv(tmp_path)
  out = str(tmp_path / "out")
  base = btr.BuildOptions(num_shards=2, statistics=False)
  btr.build(SCHEMA, src, out, options=base, num_shards=1)
  info = btr.dataset_info(out)
  assert [s.num_shards for s in info.splits.values()] == [1]
  assert info.statistics is None  # statistics=False kept from `base`
  with pytest.raises(btr.InputError, match="already holds a finished"):
    btr.build(SCHEMA, src, out, options=base)
  result = btr.build(SCHEMA, src, out, options=base, overwrite=True)
  assert [s.num_shards for s in result.splits.values()] == [2]


def test_force_is_an_option(tmp_path):
  src = _csv(tmp_path)
  out = str(tmp_path / "out")
  btr.build(SCHEMA, src, out)
  assert btr.build(SCHEMA, src, out).up_to_date
  again = btr.build(SCHEMA, src, out, options=btr.BuildOptions(
      force=True, overwrite=True))
  assert not again.up_to_date


def test_an_unknown_keyword_is_refused_as_python_does(tmp_path):
  with pytest.raises(TypeError, match="build\\(\\) got an unexpected "
                     "keyword argument 'num_shard'; did you mean "
                     "'num_shards'"):
    btr.build(SCHEMA, _csv(tmp_path), str(tmp_path / "o"), num_shard=2)
  with pytest.raises(TypeError, match="WriteDataset\\(\\) got an "
                     "unexpected keyword argument 'sharding'$"):
    btr.WriteDataset(SCHEMA, str(tmp_path / "o"), sharding=2)
  with pytest.raises(TypeError, match="options must be a "
                     "btr.BuildOptions, got dict"):
    btr.build(SCHEMA, _csv(tmp_path), str(tmp_path / "o"),
              options={"num_shards": 2})


def test_write_dataset_takes_the_options(tf, tmp_path):
  out = str(tmp_path / "out")
  with beam.Pipeline() as p:
    _ = p | beam.Create(ROWS) | btr.WriteDataset(
        SCHEMA, out, options=btr.BuildOptions(num_shards=2, gzip_level=9))
  info = btr.dataset_info(out)
  assert [s.num_shards for s in info.splits.values()] == [2]
  assert info.options.gzip_level == 9
  # The same defaults as build(): the report is written.
  assert info.report == "report.html"
  assert (pathlib.Path(out) / "report.html").read_text().startswith(
      "<!doctype html>")
  with pytest.raises(btr.InputError, match="WriteDataset writes with the "
                     "deterministic sink"):
    btr.WriteDataset(SCHEMA, out, sink="beam")


def _parsed(argv):
  args = parser().parse_args(["build", "--schema", "s.yaml", "--input",
                              "i.csv", "--output", "o", *argv])
  return BuildOptions.from_args(args)


def test_the_flags_are_the_options():
  assert _parsed([]) == BuildOptions()
  assert _parsed([
      "--num-shards", "train=8,eval=1", "--max-shard-size", "1MiB",
      "--shuffle-seed", "7", "--sink", "beam", "--gzip-level", "3",
      "--no-report", "--no-statistics", "--max-bad-rows", "4",
      "--max-bad-fraction", "0.5", "--overwrite", "--force"]) == \
      BuildOptions(num_shards={"train": 8, "eval": 1},
                   max_shard_size=1 << 20, shuffle_seed=7, sink="beam",
                   gzip_level=3, report=False, statistics=False,
                   max_bad_rows=4, max_bad_fraction=0.5, overwrite=True,
                   force=True)


def test_every_option_has_one_flag_in_the_help_and_the_docs():
  cli = (DOCS / "cli.md").read_text()
  flags = {a.dest: a.option_strings for a in
           parser()._subparsers._group_actions[0].choices[  # pylint: disable=protected-access
               "build"]._actions}
  for name in BuildOptions.names():
    [flag] = flags[name]
    assert f"`{flag}" in cli or f"{flag}" in cli, flag


def test_the_build_key_takes_what_decides_the_output():
  assert BuildOptions().key() == {
      "num_shards": None, "max_shard_size": None, "shuffle_seed": None,
      "sink": "deterministic", "gzip_level": None, "statistics": True,
      "max_bad_rows": None, "max_bad_fraction": None}
  # Later options enter the key only when changed: earlier datasets keep
  # theirs. Overwrite and force do not change what is built.
  assert BuildOptions(report=False).key()["report"] is False
  assert BuildOptions(overwrite=True, force=True).key() == \
      BuildOptions().key()
  assert BuildOptions(max_shard_size="1KiB").key()["max_shard_size"] == 1024


def test_groups_read_as_values():
  opts = BuildOptions(num_shards=4, max_bad_rows=3)
  assert opts.shards.num_shards == 4 and opts.shards.max_shard_size is None
  assert tuple(opts.thresholds) == (3, None)
  assert dataclasses.is_dataclass(opts)
  with pytest.raises(dataclasses.FrozenInstanceError):
    opts.num_shards = 2  # type: ignore[misc]

"""beam_tfrecords/building/options.py, on values: A build's options, declared
once: `BuildOptions`."""

import dataclasses
import os
import pathlib

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError
from beam_tfrecords.building.options import BuildOptions
from beam_tfrecords.cli.args import parser

from tests.helpers.faults import SCHEMA as FAULTS_SCHEMA, write_rows
from tests.helpers.movies import SCHEMA
from tests.helpers.options import _csv


@pytest.mark.parametrize("flags,message", [
    ({"max_bad_rows": -1}, "--max-bad-rows must be a whole number >= 0"),
    ({"max_bad_fraction": 1.5}, "--max-bad-fraction must be between 0 and 1"),
    ({"num_shards": 0}, "--num-shards must be at least 1"),
], ids=["rows", "fraction", "shards"])
def test_bad_limits_are_refused_up_front(tmp_path, flags, message):
  src = write_rows(tmp_path / "in.csv", 3)
  with pytest.raises(InputError, match=message):
    btr.build(FAULTS_SCHEMA, src, str(tmp_path / "out"), **flags)
  assert not os.path.exists(tmp_path / "out")


DOCS = pathlib.Path(__file__).resolve().parents[3] / "docs"


def test_an_unknown_keyword_is_refused_as_python_does(tmp_path):
  with pytest.raises(TypeError, match="build\\(\\) got an unexpected "
                     "keyword argument 'num_shard'; did you mean "
                     "'num_shards'"):
    btr.build(SCHEMA, _csv(tmp_path), str(tmp_path / "o"), num_shard=2)
  with pytest.raises(TypeError, match="WriteDataset\\(\\) got an "
                     "unexpected keyword argument 'sharding'$"):
    btr.WriteDataset(SCHEMA, str(tmp_path / "o"), sharding=2)
  with pytest.raises(TypeError, match="build_options must be a "
                     "btr.BuildOptions, got dict"):
    btr.build(SCHEMA, _csv(tmp_path), str(tmp_path / "o"),
              build_options={"num_shards": 2})


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


_ARRAY_RECORD_DROP = ("--file-format array_record writes one ArrayRecord "
                      "file per shard with the deterministic sink, "
                      "compressed by array-record \\(--array-record-options"
                      "\\): drop ")


@pytest.mark.parametrize("flags,message", [
    ({"sink": "beam"}, _ARRAY_RECORD_DROP + "--sink beam$"),
    ({"gzip_level": 3}, _ARRAY_RECORD_DROP + "--gzip-level$"),
    ({"member_size": "64KiB"}, _ARRAY_RECORD_DROP + "--member-size$"),
    ({"max_shard_size": "1MiB"}, _ARRAY_RECORD_DROP + "--max-shard-size "
     "\\(--num-shards sets the number of files\\)$"),
    ({"array_record_options": "group_size:0"}, "--array-record-options "
     "'group_size:0': array-record says: Option group_size: invalid value"),
    ({"tfds": True, "shuffle_seed": 3}, "--tfds writes ArrayRecord shards "
     "in the deterministic sink's order, one file per shard: drop "
     "--shuffle-seed \\(TFDS shuffles when it reads: Grain's shuffle over "
     "as_data_source\\(\\)\\)$"),
], ids=["sink", "gzip-level", "member-size", "max-shard-size", "options",
        "tfds-shuffle"])
def test_array_record_refuses_what_makes_no_sense(tmp_path, flags, message):
  pytest.importorskip("array_record")
  with pytest.raises(InputError, match=message):
    btr.build(SCHEMA, _csv(tmp_path), str(tmp_path / "out"),
              file_format="array_record", **flags)
  assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("flags,message", [
    ({"array_record_options": "group_size:8"},
     "--array-record-options is for --file-format array_record: add that, "
     "or drop the options"),
    ({"file_format": "parquet"},
     "--file-format must be one of \\['tfrecord', 'array_record'\\], got "
     "'parquet'"),
], ids=["options-alone", "unknown-format"])
def test_file_format_flags_are_checked(tmp_path, flags, message):
  with pytest.raises(InputError, match=message):
    btr.build(SCHEMA, _csv(tmp_path), str(tmp_path / "out"), **flags)
  assert not os.path.exists(tmp_path / "out")


def test_the_file_format_flags_parse_and_enter_the_key_when_changed():
  assert _parsed(["--file-format", "array_record",
                  "--array-record-options", "group_size:2"]) == \
      BuildOptions(file_format="array_record",
                   array_record_options="group_size:2")
  with pytest.raises(SystemExit):
    _parsed(["--file-format", "parquet"])
  assert "file_format" not in BuildOptions().key()
  assert BuildOptions(file_format="array_record").key() == {
      **BuildOptions().key(), "file_format": "array_record"}
  assert BuildOptions(file_format="array_record",
                      array_record_options="group_size:4").key()[
                          "array_record_options"] == "group_size:4"

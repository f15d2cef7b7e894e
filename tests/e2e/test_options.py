"""btr.BuildOptions, declared once (issue 30): build(), WriteDataset and
the command line take the same options, to the same dataset; the flags,
the build key and docs/cli.md come from the one declaration."""

import pathlib

import apache_beam as beam
import pytest

import beam_tfrecords as btr

from tests.helpers.datasets import without_run_id
from tests.helpers.movies import ROWS, SCHEMA
from tests.helpers.options import _csv


def _files(out):
  """relative path -> bytes; a _SUCCESS without the run id of the build
  that published (its first line's last word)."""
  root = pathlib.Path(out)
  return {str(p.relative_to(root)): (
      without_run_id(p.read_bytes()) if p.name == "_SUCCESS"
      else p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()}


def test_options_and_keywords_build_the_same_dataset(tmp_path):
  src = _csv(tmp_path)
  a, b = str(tmp_path / "a"), str(tmp_path / "b")
  btr.build(SCHEMA, src, a, build_options=btr.BuildOptions(
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
  btr.build(SCHEMA, src, out, build_options=base, num_shards=1)
  info = btr.dataset_info(out)
  assert [s.num_shards for s in info.splits.values()] == [1]
  assert info.statistics is None  # statistics=False kept from `base`
  with pytest.raises(btr.InputError, match="already holds a finished"):
    btr.build(SCHEMA, src, out, build_options=base)
  result = btr.build(SCHEMA, src, out, build_options=base, overwrite=True)
  assert [s.num_shards for s in result.splits.values()] == [2]


def test_force_is_an_option(tmp_path):
  src = _csv(tmp_path)
  out = str(tmp_path / "out")
  btr.build(SCHEMA, src, out)
  assert btr.build(SCHEMA, src, out).up_to_date
  again = btr.build(SCHEMA, src, out, build_options=btr.BuildOptions(
      force=True, overwrite=True))
  assert not again.up_to_date


def test_write_dataset_takes_the_options(tf, tmp_path):
  out = str(tmp_path / "out")
  with beam.Pipeline() as p:
    _ = p | beam.Create(ROWS) | btr.WriteDataset(
        SCHEMA, out,
        build_options=btr.BuildOptions(num_shards=2, gzip_level=9))
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

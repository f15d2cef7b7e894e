"""Builds on Prism, Beam's own local runner (a Go program: `make
cluster-tools` builds it from the Go module proxy at the installed Beam's
version), with its default LOOPBACK environment: Prism runs the job, the
launching process runs the Python workers. Every published file equals
the DirectRunner's byte for byte: the bundled movie ratings on the CLI,
grouped SequenceExamples through btr.build, TensorFlow Transform with a
user's preprocessing_fn, and a million real flights. Beam's own sink is
refused there (a Prism defect, below)."""

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError
from beam_tfrecords.testing.tools import prism_binary

from tests.cluster.engine_builds import (FLIGHT_ROWS, assert_same_dataset,
                           cases, cli_build_pair, flights, grouped_build,
                           movie_ratings, movie_ratings_build, prepared,
                           tool, transform_build)

__all__ = ["cases"]  # (the fixture, from engine_builds)


@pytest.fixture(scope="module")
def prism():
  """The runner's arguments: --runner PrismRunner --prism_location PATH;
  skipped where Go is missing, unless BTR_REQUIRE_CLUSTERS=1 (CI)."""
  return ["--runner", "PrismRunner", "--prism_location",
          tool(prism_binary)]


class _InProcess:
  """LOOPBACK's workers are the launching process: the user's module in
  its folder is already theirs."""

  def install(self, *paths):
    pass


def test_movie_ratings_with_a_hash_split_on_the_cli(prism, cases, tmp_path):
  movie_ratings_build(cases, tmp_path, prism, None)


def test_grouped_sequences_with_rejected_groups_through_btr_build(
    prism, cases, tmp_path):
  grouped_build(cases, tmp_path, prism)


def test_tensorflow_transform_with_the_users_preprocessing_fn(
    prism, cases, tmp_path):
  transform_build(cases, tmp_path, prism, None, _InProcess())


def test_beams_own_sink_is_refused_before_anything_runs(prism, cases,
                                                        tmp_path):
  """Beam 2.77's Prism fires a GroupByKey that WriteToTFRecord's file
  names are flattened into before they arrive (plain Beam shows it: the
  group holds the other inputs only, then the job fails with "nothing in
  progress and no refreshes with non zero pending elements"): the build's
  count check would fail it after the whole job; it is refused first."""
  folder, (schema, src) = prepared(cases, "movies", movie_ratings)
  out = tmp_path / "engine"
  with pytest.raises(InputError, match=(
      "--sink beam cannot run on the PrismRunner: Beam 2.77's Prism")):
    btr.build(schema, src, str(out), sink="beam", beam_args=prism)
  assert not out.exists()


def test_a_million_flights(prism, cases, tmp_path):
  folder, (schema, src) = prepared(cases, "flights", flights)
  direct, engine, direct_dir = cli_build_pair(
      folder, schema, [src], [], prism, None, tmp_path / "engine")
  assert direct.counts.rows_read == FLIGHT_ROWS
  assert_same_dataset(direct, engine, direct_dir, tmp_path / "engine")


def test_each_build_starts_its_own_prism(prism, cases, tmp_path):
  """Beam 2.77 keeps one Prism job server a process, made with the first
  pipeline's options: a build after a pipeline that named another Prism
  (here one that is not there) used that one. Each build starts its
  own."""
  import apache_beam as beam
  from apache_beam.options.pipeline_options import PipelineOptions
  elsewhere = ["--runner", "PrismRunner",
               "--prism_location", str(tmp_path / "no-prism-here")]
  with pytest.raises(Exception):
    with beam.Pipeline(options=PipelineOptions(elsewhere)) as p:
      _ = p | beam.Create([1])
  movie_ratings_api = btr.build(
      "schemas/movie_ratings.yaml", "pipelines/data/movie_ratings.csv",
      str(tmp_path / "out"), beam_args=prism)
  assert movie_ratings_api.info.counts.records_written == 200

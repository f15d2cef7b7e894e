"""beam_tfrecords/runners/pipeline_options.py, on values: Beam pipeline
options: refusing what nothing understands, and the runner."""

import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError

from tests.helpers.cli_builds import _write_inputs
from tests.helpers.faults import SCHEMA, write_rows


def test_multi_threading_direct_runner_is_refused(tmp_path):
  """Beam 2.77's FnApiRunner loses elements at GroupByKey with worker
  threads (benchmarks/beam_multithreading_gbk.py); the build says so
  instead of failing its count check at random."""
  src = write_rows(tmp_path / "in.csv", 5)
  with pytest.raises(InputError, match="multi_threading is refused: Beam "
                     "2.77's DirectRunner .* loses elements at GroupByKey"):
    btr.build(SCHEMA, src, str(tmp_path / "out"),
              beam_args=["--direct_num_workers=2",
                         "--direct_running_mode=multi_threading"])
  assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("flags, master", [
    (["--runner", "FlinkRunner", "--flink_master", "jobmanager:8081"],
     "--flink_master jobmanager:8081"),
    (["--runner=SparkRunner", "--spark_master_url=spark://m:7077"],
     "--spark_master_url spark://m:7077")])
def test_a_cluster_without_an_environment_type_is_refused(tmp_path, flags,
                                                          master):
  """Beam would pick DOCKER with its stock image for a remote master; the
  build refuses before anything runs, and says what to give instead."""
  src = write_rows(tmp_path / "in.csv", 5)
  with pytest.raises(InputError, match=f"^{master} names a cluster, but no "
                     "--environment_type says how its workers start "
                     "Python: Beam would pick DOCKER .* "
                     "--environment_type=PROCESS"):
    btr.build(SCHEMA, src, str(tmp_path / "out"), beam_args=flags)
  assert not os.path.exists(tmp_path / "out")


def test_local_flink_and_spark_masters_need_no_environment_type():
  from apache_beam.options.pipeline_options import PipelineOptions
  from beam_tfrecords.runners.pipeline_options import check_environment
  for flags in (["--runner", "FlinkRunner"],
                ["--runner", "FlinkRunner", "--flink_master", "[local]"],
                ["--runner", "SparkRunner"],
                ["--runner", "SparkRunner", "--spark_master_url", "local[2]"],
                ["--runner", "FlinkRunner", "--flink_master", "h:8081",
                 "--environment_type", "EXTERNAL",
                 "--environment_config", "localhost:50000"]):
    check_environment(PipelineOptions(flags))  # no error


@pytest.mark.parametrize("flags,waits", [
    (["--runner=PortableRunner", "--job_endpoint=localhost:1"], 7 * 86400),
    (["--runner=FlinkRunner", "--flink_master=[local]"], 7 * 86400),
    (["--runner=SparkRunner"], 7 * 86400),
    # Given, it is kept (even Beam's default value).
    (["--runner=PortableRunner", "--job_server_timeout=30"], 30),
    (["--runner=PortableRunner", "--job-server-timeout", "300"], 300),
    ([], 300),  # the DirectRunner does not use it
])
def test_portable_jobs_may_run_longer_than_the_job_server_timeout(flags,
                                                                   waits):
  """Beam 2.77's PortableRunner gives the job's state stream
  --job_server_timeout (300 s) as its deadline: a 40M-row build on the
  portable runner failed with DEADLINE_EXCEEDED after 304 s, still
  running. Not given, it becomes a week for portable runners."""
  from apache_beam.options.pipeline_options import PortableOptions
  from beam_tfrecords.runners.pipeline_options import pipeline_options
  options, _ = pipeline_options(flags)
  assert options.view_as(PortableOptions).job_server_timeout == waits


def test_build_api_refuses_unparsed_beam_args(tmp_path):
  schema, data = _write_inputs(tmp_path, [(1, 0.5)])
  with pytest.raises(InputError, match="unknown argument --numshards"):
    btr.build(schema, data, str(tmp_path / "out"), beam_args=["--numshards",
                                                              "2"])




def test_dataflow_refuses_local_paths_before_anything_runs(tmp_path):
  (tmp_path / "in.csv").write_text("id\n1\n")
  schema = {"name": "d", "features": {"id": "int64"}}
  with pytest.raises(btr.InputError, match=(
      r"DataflowRunner workers cannot see this machine's files, but "
      r".*in\.csv, .*out are local; put the inputs and the output on "
      r"gs://")):
    btr.build(schema, str(tmp_path / "in.csv"), str(tmp_path / "out"),
              beam_args=["--runner=DataflowRunner", "--project=p",
                         "--region=r", "--temp_location=gs://b/tmp"])
  with pytest.raises(btr.InputError, match=r"file:///b/in\.csv is local"):
    btr.build(schema, "file:///b/in.csv", "gs://b/out",
              beam_args=["--runner=DataflowRunner"])
  # Beam's other spellings of the runner.
  for runner in ("Dataflow", "dataflow",
                 "apache_beam.runners.dataflow.dataflow_runner."
                 "DataflowRunner"):
    with pytest.raises(btr.InputError, match=r"out is local"):
      btr.build(schema, "gs://b/in.csv", str(tmp_path / "out"),
                beam_args=[f"--runner={runner}"])
  assert not (tmp_path / "out").exists()


def test_prism_is_known_by_its_names_and_its_class():
  from beam_tfrecords.runners.pipeline_options import is_prism
  assert is_prism("PrismRunner") and is_prism("prism")
  assert is_prism("apache_beam.runners.portability.prism_runner.PrismRunner")
  assert not is_prism("DirectRunner") and not is_prism("FlinkRunner")
  from apache_beam.runners.portability.prism_runner import PrismRunner
  assert is_prism(PrismRunner())

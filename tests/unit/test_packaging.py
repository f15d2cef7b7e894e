"""The worker image and the launcher must run the same Beam and Python:
the Dockerfile, the documented images and the cluster commands."""

import os
import re
import shlex
import sys

import apache_beam

import beam_tfrecords as btr

from tests.helpers.packaging import HERE


def _setup_beam_version():
  with open(os.path.join(HERE, "setup.py")) as f:
    return re.search(r'BEAM_VERSION = "([^"]+)"', f.read()).group(1)


def test_dockerfile_base_matches_pinned_beam_and_python():
  """The worker image's default base is Beam's SDK image of setup.py's
  Beam (this one) and Python 3.11, the runtime lock's; it installs that
  lock hash-checked, and labels what a build checks
  (runners.image_check)."""
  with open(os.path.join(HERE, "Dockerfile")) as f:
    dockerfile = f.read()
  default = re.search(r"^ARG PYTHON_VERSION=(\S+)$", dockerfile,
                      re.M).group(1)
  base = re.search(r"^ARG BASE=(\S+)$", dockerfile, re.M).group(1)
  m = re.fullmatch(r"apache/beam_python3\.11_sdk:(\S+)", base)
  assert m, f"unexpected base image {base}"
  assert re.findall(r"^FROM\s+(\S+)", dockerfile, re.M) == ["${BASE}"]
  assert m.group(1) == _setup_beam_version() == apache_beam.__version__
  assert default == "3.11"
  assert "COPY requirements/runtime-py311.txt" in dockerfile
  assert "--require-hashes --no-deps" in dockerfile
  from beam_tfrecords.runners.image_check import _LABELS
  for label in _LABELS.values():
    assert f"{label}=" in dockerfile
  with open(os.path.join(HERE, "setup.py")) as f:
    requires = re.search(r'python_requires="([^"]+)"', f.read()).group(1)
  from packaging.specifiers import SpecifierSet
  this = "%d.%d" % sys.version_info[:2]
  assert SpecifierSet(requires).contains(this + ".0")
  assert SpecifierSet(requires).contains(default + ".0")


def _docs_section(title):
  with open(os.path.join(HERE, "docs", "operations.md")) as f:
    text = f.read()
  start = text.index(f"\n## {title}\n")
  end = text.find("\n## ", start + 1)
  return text[start:end if end > 0 else None]


def _commands(section):
  """`beam-tfrecords build` commands of the sh blocks, as argv lists."""
  out = []
  for block in re.findall(r"```sh\n(.*?)```", section, re.S):
    for command in block.replace("\\\n", " ").splitlines():
      if command.startswith("beam-tfrecords build"):
        out.append(shlex.split(command)[1:])
  return out


def test_the_cluster_commands_parse_into_the_beam_options_they_mean(caplog):
  from apache_beam.options.pipeline_options import (
      FlinkRunnerOptions, GoogleCloudOptions, PipelineOptions, PortableOptions,
      S3Options, SparkRunnerOptions, StandardOptions, WorkerOptions)

  from apache_beam.runners.dask.dask_runner import DaskOptions

  from beam_tfrecords.cli import parser
  image = f"us-docker.pkg.dev/PROJECT/beam/beam-tfrecords:{btr.__version__}"
  by_runner = {}
  for argv in _commands(_docs_section("Running on a cluster")):
    args, rest = parser().parse_known_args(argv)
    assert args.command == "build" and args.schema and args.output
    caplog.clear()
    options = PipelineOptions(rest)
    options.get_all_options()
    assert "Discarding unparseable args" not in caplog.text, (argv,
                                                              caplog.text)
    by_runner[options.view_as(StandardOptions).runner] = (args, options)
  assert set(by_runner) == {"DataflowRunner", "FlinkRunner", "SparkRunner",
                            "DaskRunner", "PrismRunner", None}
  args, prism = by_runner["PrismRunner"]
  from apache_beam.options.pipeline_options import PrismRunnerOptions
  assert prism.view_as(PrismRunnerOptions).prism_location.endswith(
      "/prism-2.77.0/prism")
  args, dask = by_runner["DaskRunner"]
  assert dask.view_as(DaskOptions).address == "tcp://10.0.0.1:8786"
  args, dataflow = by_runner["DataflowRunner"]
  assert args.output.startswith("gs://")
  cloud = dataflow.view_as(GoogleCloudOptions)
  assert cloud.project and cloud.region and \
      cloud.temp_location.startswith("gs://")
  assert dataflow.view_as(WorkerOptions).sdk_container_image == image
  args, flink = by_runner["FlinkRunner"]
  assert flink.view_as(FlinkRunnerOptions).flink_master
  assert flink.view_as(FlinkRunnerOptions).parallelism == 2
  assert flink.view_as(FlinkRunnerOptions).flink_job_server_jar == (
      f"beam-runners-flink-1.20-job-server-{apache_beam.__version__}.jar")
  args, spark = by_runner["SparkRunner"]
  assert spark.view_as(SparkRunnerOptions).spark_master_url.startswith(
      "spark://")
  assert spark.view_as(SparkRunnerOptions).spark_job_server_jar == (
      f"beam-runners-spark-3-job-server-{apache_beam.__version__}.jar")
  from apache_beam.options.pipeline_options import JobServerOptions
  assert "-Dspark.executor.memory=2g" in spark.view_as(
      JobServerOptions).job_server_jvm_properties
  for options in (flink, spark):
    portable = options.view_as(PortableOptions)
    assert (portable.environment_type, portable.environment_config) == (
        "PROCESS", '{"command": "/opt/beam-tfrecords/boot"}')
    assert str(portable.environment_cache_millis) == "600000"
  args, s3 = by_runner[None]
  assert args.output.startswith("s3://")
  assert s3.view_as(S3Options).s3_region_name == "eu-west-1"


def test_the_documented_images_carry_the_pinned_versions():
  section = _docs_section("Running on a cluster")
  for tag in re.findall(r"beam-tfrecords:(\S+?)[\s`]", section):
    assert tag == btr.__version__
  flink = re.findall(r"apache/beam_flink(\S+?)_job_server:(\S+?)[\s`]",
                     section)
  assert flink
  from apache_beam.options.pipeline_options import FlinkRunnerOptions
  for flink_version, beam_version in flink:
    assert beam_version == apache_beam.__version__
    assert flink_version in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS
  with open(os.path.join(HERE, "Dockerfile")) as f:
    assert "make worker-image" in f.read()

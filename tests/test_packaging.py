"""The worker image and the launcher must run the same Beam and Python."""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile

import apache_beam

import beam_tfrecords as btr

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _setup_beam_version():
  with open(os.path.join(HERE, "setup.py")) as f:
    return re.search(r'BEAM_VERSION = "([^"]+)"', f.read()).group(1)


def test_dockerfile_base_matches_pinned_beam_and_python():
  """The worker image's Beam is setup.py's and this one; its Python is a
  build argument (3.11 by default) that names this interpreter's version
  when built for it, and every supported version has Beam's image."""
  with open(os.path.join(HERE, "Dockerfile")) as f:
    dockerfile = f.read()
  default = re.search(r"^ARG PYTHON_VERSION=(\S+)$", dockerfile,
                      re.M).group(1)
  base = re.search(r"^FROM\s+(\S+)", dockerfile, re.M).group(1)
  m = re.fullmatch(r"apache/beam_python\$\{PYTHON_VERSION\}_sdk:(\S+)",
                   base)
  assert m, f"unexpected base image {base}"
  assert m.group(1) == _setup_beam_version() == apache_beam.__version__
  assert default == "3.11"
  with open(os.path.join(HERE, "setup.py")) as f:
    requires = re.search(r'python_requires="([^"]+)"', f.read()).group(1)
  from packaging.specifiers import SpecifierSet
  this = "%d.%d" % sys.version_info[:2]
  assert SpecifierSet(requires).contains(this + ".0")
  assert SpecifierSet(requires).contains(default + ".0")


def _source_files(*roots):
  """Files of the checkout under `roots` (no caches), relative paths."""
  out = set()
  for root in roots:
    for folder, dirs, files in os.walk(os.path.join(HERE, root)):
      dirs[:] = [d for d in dirs if d != "__pycache__"]
      out.update(os.path.relpath(os.path.join(folder, f), HERE)
                 for f in files if not f.endswith(".pyc"))
  return out


# What a worker or a launcher in the container needs: every module, the
# bundled pipelines with their sample data, and the schemas they name.
SHIPPED = ("beam_tfrecords", "pipelines", "schemas")


def test_the_sdist_setup_file_builds_holds_everything(tmp_path):
  """--setup_file ./setup.py: Beam's stager builds this sdist and every
  worker pip-installs it."""
  from apache_beam.runners.portability.stager import Stager
  sdist = Stager._build_setup_package(os.path.join(HERE, "setup.py"),
                                      str(tmp_path))
  with tarfile.open(sdist) as tar:
    names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
  expected = _source_files(*SHIPPED) | {"setup.py", "README.md"}
  assert expected <= names, sorted(expected - names)


def _wheel(source, out):
  """Builds from a copy: an in-place build leaves build/lib behind, and a
  stale build/lib (files since renamed) would end up in the next wheel."""
  clean = out / "src"
  # Every virtualenv (.venv, .venv-py313, ...: gigabytes) left out.
  shutil.copytree(source, clean, ignore=shutil.ignore_patterns(
      "build", ".venv*", ".git", ".mypy_cache", ".pytest_cache",
      "*.egg-info", "__pycache__", "out", "site"))
  subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                  "-w", str(out), str(clean)], check=True, timeout=600)
  return next(out.glob("*.whl"))


def _installed_name(name: str) -> str:
  """Where a source file lands in site-packages: pipelines/ as
  beam_tfrecords/pipelines/, schemas/ as beam_tfrecords/pipelines/schemas/
  (no top-level `pipelines` or `schemas` package to collide with another
  distribution's)."""
  if name.startswith(("pipelines/", "schemas/")):
    return ("beam_tfrecords/pipelines/schemas/" + name[len("schemas/"):]
            if name.startswith("schemas/")
            else "beam_tfrecords/" + name)
  return name


def test_the_wheel_holds_everything(tmp_path):
  with zipfile.ZipFile(_wheel(HERE, tmp_path)) as whl:
    names = {n for n in whl.namelist() if ".dist-info/" not in n}
  expected = {_installed_name(n) for n in _source_files(*SHIPPED)}
  assert expected <= names, sorted(expected - names)
  assert {n.split("/")[0] for n in names} == {"beam_tfrecords"}


def test_the_dockerfile_build_context_is_enough_for_the_package(tmp_path):
  """What the Dockerfile COPYs builds the same package as the checkout
  (the image itself needs a Docker engine, which CI has not)."""
  with open(os.path.join(HERE, "Dockerfile")) as f:
    text = f.read()
  context = tmp_path / "context"
  context.mkdir()
  for line in re.findall(r"^COPY\s+(.+)$", text, re.M):
    *sources, dest = line.split()
    for src in sources:
      target = context / (src if dest.endswith("/") else dest)
      if os.path.isdir(os.path.join(HERE, src)):
        shutil.copytree(os.path.join(HERE, src), target,
                        ignore=shutil.ignore_patterns("__pycache__"))
      else:
        shutil.copy(os.path.join(HERE, src), target)
  assert "RUN pip install --no-cache-dir ." in text
  with zipfile.ZipFile(_wheel(context, tmp_path / "a")) as a, \
      zipfile.ZipFile(_wheel(HERE, tmp_path / "b")) as b:
    assert sorted(a.namelist()) == sorted(b.namelist())


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
                            "DaskRunner", None}
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
    dockerfile = f.read()
  assert f"beam-tfrecords:{btr.__version__}" in dockerfile

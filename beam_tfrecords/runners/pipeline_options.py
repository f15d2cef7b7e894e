"""Beam pipeline options: refusing what nothing understands, and the runner.

Beam's `PipelineOptions` drops every flag it cannot parse with a WARNING
(`Discarding unparseable args`), so a misspelled `--max_bad_rows 0` or the
second file of an unquoted glob would be lost without a word. Here every
flag passed through to Beam is parsed by the parsers of all of Beam's
registered option classes (and the named runner's, which registers its
own when its module is imported) before anything runs, and whatever none
of them takes is refused with a "did you mean".
"""

import difflib
import logging
import os
import re
import shutil
import socket
import sys
from typing import Dict, Iterable, List, Optional, Sequence, Union

from apache_beam.options.pipeline_options import (DebugOptions,
                                                  DirectOptions,
                                                  FlinkRunnerOptions,
                                                  JobServerOptions,
                                                  PipelineOptions,
                                                  PortableOptions,
                                                  SparkRunnerOptions,
                                                  StandardOptions,
                                                  _BeamArgumentParser)
from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner
from apache_beam.runners.runner import create_runner

from beam_tfrecords.core.errors import InputError

__all__ = ["check_beam_args", "pipeline_options", "is_direct",
           "is_local_direct", "is_dask", "is_prism", "spread_on_dask",
           "DASK_RUNNER",
           "runner_name", "check_paths_reach_workers", "beam_flags",
           "check_environment", "wait_for_long_jobs", "LONG_JOB_SECONDS"]

_LOG = logging.getLogger(__name__)


class _LocalDirectRunner(SwitchingDirectRunner):
  """The DirectRunner, straight to its FnApiRunner.

  Beam 2.77's DirectRunner first downloads a Prism binary from the internet
  and falls back to the in-process FnApiRunner when that fails: a delay and
  a page of warnings on machines without internet. Then it walks the
  pipeline twice to see whether the FnApiRunner supports it (no streaming
  sources, TestStream or real-time timers: a build has none). This runner
  goes to the FnApiRunner as Beam's does once those walks say yes
  (direct_runner.py, SwitchingDirectRunner.run_pipeline), with the same
  provision info; it honours --direct_num_workers / --direct_running_mode.
  """
  _is_interactive = True

  def run_pipeline(self, pipeline, pipeline_options):
    # pylint: disable=import-outside-toplevel
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import \
        JobServiceHandle
    encoded = JobServiceHandle.encode_pipeline_options(
        pipeline_options.get_all_options())
    return fn_runner.FnApiRunner(
        provision_info=fn_runner.ExtendedProvisionInfo(
            beam_provision_api_pb2.ProvisionInfo(
                pipeline_options=encoded))).run_pipeline(
                    pipeline, pipeline_options)


def is_local_direct(runner) -> bool:
  """Whether `runner` is the local DirectRunner this package makes."""
  return isinstance(runner, _LocalDirectRunner)


# Beam registers no short name for its DaskRunner (2.77 refuses
# --runner DaskRunner); ours are these.
DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"
_DASK_NAMES = ("dask", "daskrunner")


def is_dask(runner) -> bool:
  """Whether `runner` (an instance, or a --runner name) is Beam's
  DaskRunner, which runs a pipeline as dask.bag operations (see
  runners.gaps for what it lacks)."""
  if isinstance(runner, str):
    return runner.rsplit(".", 1)[-1].lower() in _DASK_NAMES
  return type(runner).__name__ == "DaskRunner"


def is_prism(runner) -> bool:
  """Whether `runner` (an instance, or a --runner name) is Beam's Prism
  runner."""
  if isinstance(runner, str):
    return runner.rsplit(".", 1)[-1].lower() in ("prism", "prismrunner")
  return type(runner).__name__ == "PrismRunner"


def spread_on_dask(pipeline_options: PipelineOptions, units: int) -> None:
  """On the DaskRunner, one dask.bag partition per read unit unless
  --dask_npartitions / --dask_partition_size say otherwise.

  Its Create puts 128 elements in a partition by default and its
  Reshuffle does nothing, so every read unit of a build would be read in
  one task, on one worker."""
  # pylint: disable=import-outside-toplevel
  from apache_beam.runners.dask.dask_runner import DaskOptions
  dask = pipeline_options.view_as(DaskOptions)
  if dask.npartitions is None and dask.partition_size is None:
    dask.npartitions = max(1, units)


def _flag_value(args: Sequence[str], name: str) -> Optional[str]:
  """The last value of `--name VALUE` / `--name=VALUE` in args."""
  value = None
  for i, arg in enumerate(args):
    if arg == f"--{name}" and i + 1 < len(args):
      value = args[i + 1]
    elif arg.startswith(f"--{name}="):
      value = arg.split("=", 1)[1]
  return value


def _load_runner(name: str):
  """The runner a --runner name means (its module imported, which
  registers the runner's own option classes).

  Raises:
    InputError: Beam knows no runner of that name, or it is not installed.
  """
  if is_direct_name(name):
    return _LocalDirectRunner()
  if name.lower() in _DASK_NAMES:
    name = DASK_RUNNER
  try:
    return create_runner(name)
  except ValueError:
    known = list(StandardOptions.KNOWN_RUNNER_NAMES)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise InputError(
        f"--runner {name}: Beam has no runner of that name{hint}. Known "
        f"runners: {', '.join(known)}, or the dotted path of a "
        "PipelineRunner class (module.Class)") from None
  except (ImportError, AttributeError) as e:
    raise InputError(
        f"--runner {name} cannot be loaded ({type(e).__name__}: {e}); "
        "install the runner's extra (e.g. pip install 'apache-beam[dask]') "
        "or check the dotted path") from None


def beam_flags() -> List[str]:
  """Every --flag of Beam's registered option classes."""
  parser = _beam_parser()
  return sorted({s for a in parser._actions for s in a.option_strings
                 if s.startswith("--")})


def _beam_parser() -> _BeamArgumentParser:
  parser = _BeamArgumentParser(allow_abbrev=False)
  # As PipelineOptions.get_all_options does: the last class of each name.
  classes = {}
  for cls in PipelineOptions.__subclasses__():
    classes[str(cls)] = cls
  for cls in classes.values():
    cls._add_argparse_args(parser)  # pylint: disable=protected-access
  return parser


def _normalized(flag: str) -> str:
  return flag.lstrip("-").replace("_", "-").lower()


def _suggestion(flag: str, ours: Iterable[str], beams: Iterable[str]) -> str:
  """' (did you mean --x?)' among our flags and Beam's, or ''."""
  candidates: Dict[str, str] = {}
  for f in list(ours) + list(beams):
    candidates.setdefault(_normalized(f), f)
  name = _normalized(flag.split("=", 1)[0])
  if name in candidates:  # --num_shards for --num-shards
    return f"; did you mean {candidates[name]}?"
  close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
  return f"; did you mean {candidates[close[0]]}?" if close else ""


def check_beam_args(args: Sequence[str], ours: Iterable[str] = (),
                    input_flag: Optional[str] = "--input"):
  """Refuses any argument that no Beam option class parses.

  Args:
    args: the arguments left over for Beam's PipelineOptions.
    ours: the program's own flags, for "did you mean".
    input_flag: the repeatable input flag, named in the hint for stray
      positional arguments (None: no such flag).

  Returns:
    The runner the arguments name (an instance), for beam.Pipeline.

  Raises:
    InputError: an argument is understood by nothing, or the runner is
      unknown.
  """
  args = list(args)
  runner = _load_runner(_flag_value(args, "runner") or "DirectRunner")
  parser = _beam_parser()
  _, unknown = parser.parse_known_args(args)
  if not unknown:
    return runner
  ours = list(ours)
  flags = [a for a in unknown if a.startswith("-")]
  if flags:
    flag = flags[0]
    more = f" (and {', '.join(flags[1:])})" if len(flags) > 1 else ""
    raise InputError(
        f"unknown argument {flag}{more}"
        f"{_suggestion(flag, ours, beam_flags())} Neither beam-tfrecords "
        "nor Beam's pipeline options take it, and nothing is silently "
        "ignored: fix or drop it (see --help for ours)")
  shown = " ".join(unknown[:3]) + (" ..." if len(unknown) > 3 else "")
  hint = (f"{input_flag} takes one file or glob: quote a glob so that the "
          f"shell does not expand it ({input_flag} 'data/*.csv'), or repeat "
          f"{input_flag} for each file" if input_flag else
          "every value belongs to a --flag")
  raise InputError(f"unexpected argument(s) {shown}: {hint}")


def is_direct_name(name: Optional[str]) -> bool:
  return name is None or (isinstance(name, str) and name.rsplit(".", 1)[
      -1].lower() in ("directrunner", "direct", "switchingdirectrunner"))


def is_direct(pipeline_options: PipelineOptions) -> bool:
  return is_direct_name(pipeline_options.view_as(StandardOptions).runner)


def runner_name(pipeline_options: PipelineOptions) -> str:
  runner = pipeline_options.view_as(StandardOptions).runner
  return runner if isinstance(runner, str) else (
      type(runner).__name__ if runner is not None else "DirectRunner")


def pipeline_options(beam_args: Union[None, Sequence[str], PipelineOptions]):
  """(PipelineOptions, runner instance) for a build's Beam arguments.

  A list of flags is checked first (check_beam_args): nothing in it may be
  left unparsed.
  """
  if isinstance(beam_args, PipelineOptions):
    options = beam_args
    runner = _load_runner(runner_name(options))
  else:
    args = list(beam_args or [])
    runner = check_beam_args(args, input_flag=None)
    options = PipelineOptions(args)
  if is_direct(options) and options.view_as(
      DirectOptions).direct_running_mode == "multi_threading" and \
      options.view_as(DirectOptions).direct_num_workers != 1:
    raise InputError(
        "--direct_running_mode=multi_threading is refused: Beam 2.77's "
        "DirectRunner (FnApiRunner) loses elements at GroupByKey with "
        "several worker threads (reproduced: 1,000,000 elements in, "
        "980,000-995,000 out; benchmarks/beam_multithreading_gbk.py). Use "
        "--direct_running_mode=multi_processing, or the default (one worker, "
        "which encodes with a thread per core itself).")
  check_environment(options)
  check_job_server(options)
  if is_prism(runner):
    # Beam 2.77 keeps one Prism job server a process, made with the
    # options of the first pipeline that asked (a DirectRunner's too,
    # which tries Prism first): a later build's --prism_location was
    # ignored, and Prism downloaded from GitHub (reproduced: a plain
    # PrismRunner pipeline, then a build with --prism_location). Each
    # build starts its own (about 0.2 s).
    options.view_as(DebugOptions).add_experiment(
        "disable_prism_server_singleton")
  wait_for_long_jobs(options, runner, given=None if isinstance(
      beam_args, PipelineOptions) else any(
          _normalized(a.split("=", 1)[0]) == "job-server-timeout"
          for a in beam_args or ()))
  return options, runner


# What --job_server_timeout becomes for a portable runner when it is not
# given (see wait_for_long_jobs).
LONG_JOB_SECONDS = 7 * 24 * 3600


def wait_for_long_jobs(pipeline_options: PipelineOptions, runner,
                       given: Optional[bool] = None) -> None:
  """Portable runners (PortableRunner, Flink, Spark, Prism): without
  --job_server_timeout, waits up to LONG_JOB_SECONDS for the job.

  Beam 2.77's PortableRunner opens the job's state and message streams
  with --job_server_timeout (300 s by default) as their deadline, so
  every job that runs longer fails with DEADLINE_EXCEEDED while it is
  still running (measured: a 40M-row build on the portable runner,
  after 304 s). The flag also bounds the job service's short calls, which
  fail at once on a server that is not there. `given`: whether the flag
  was given (None: whether its value differs from Beam's default)."""
  # pylint: disable=import-outside-toplevel
  from apache_beam.runners.portability.portable_runner import PortableRunner
  if not isinstance(runner, PortableRunner):
    return
  if given is None:
    given = "job_server_timeout" in pipeline_options.get_all_options(
        drop_default=True)
  if given:
    return
  pipeline_options.view_as(
      PortableOptions).job_server_timeout = LONG_JOB_SECONDS


def _cluster_master(pipeline_options: PipelineOptions) -> Optional[str]:
  """`--flink_master H:P` / `--spark_master_url spark://...` when they name
  a cluster (not Beam's local ones: [auto], [local], local[N])."""
  name = runner_name(pipeline_options).rsplit(".", 1)[-1].lower()
  if name in ("flinkrunner", "flink"):
    master = pipeline_options.view_as(FlinkRunnerOptions).flink_master
    if master and master not in ("[auto]", "[local]"):
      return f"--flink_master {master}"
  elif name in ("sparkrunner", "spark"):
    master = pipeline_options.view_as(SparkRunnerOptions).spark_master_url
    if master and not re.match(r"^local(\[.*\])?$", master):
      return f"--spark_master_url {master}"
  return None


def check_environment(pipeline_options: PipelineOptions) -> None:
  """Refuses a Flink or Spark cluster without --environment_type.

  Beam then picks DOCKER without a word: every TaskManager or executor
  pulls Beam's stock SDK image (which lacks this package and TensorFlow)
  and the job fails on the workers, or hangs where there is no Docker.
  """
  master = _cluster_master(pipeline_options)
  if master is None or pipeline_options.view_as(
      PortableOptions).environment_type:
    return
  raise InputError(
      f"{master} names a cluster, but no --environment_type says how its "
      "workers start Python: Beam would pick DOCKER with its stock SDK "
      "image, which has neither beam-tfrecords nor TensorFlow. Give "
      "--environment_type=DOCKER --environment_config=IMAGE (an image "
      "built from our Dockerfile), --environment_type=PROCESS "
      "--environment_config='{\"command\": \"/path/to/boot\"}', or "
      "--environment_type=EXTERNAL --environment_config=HOST:PORT (a Beam "
      "worker pool); see docs/operations.md, \"Flink\" and \"Spark\"")


def _port_in_use(port: int) -> bool:
  with socket.socket() as s:
    try:
      s.bind(("localhost", port))
    except OSError:
      return True
  return False


def check_job_server(pipeline_options: PipelineOptions) -> None:
  """Refuses, before anything runs, what keeps the job server that
  FlinkRunner / SparkRunner start from a jar from starting: a jar that is
  not there, no Java, a --job_port (or artifact, expansion port) in use.
  Beam would fail with a traceback, or a Java stack and "Service failed
  to start up"."""
  name = runner_name(pipeline_options).rsplit(".", 1)[-1].lower()
  engine = {"flinkrunner": "flink", "flink": "flink", "sparkrunner": "spark",
            "spark": "spark"}.get(name)
  if engine is None:
    return
  runner = {"flink": FlinkRunnerOptions, "spark": SparkRunnerOptions}[engine]
  if pipeline_options.view_as(PortableOptions).job_endpoint or getattr(
      pipeline_options.view_as(runner), f"{engine}_submit_uber_jar", False):
    return  # a job server of its own, or none: no java -jar here
  flag = f"{engine}_job_server_jar"
  jar = getattr(pipeline_options.view_as(runner), flag, None)
  if not jar:
    return  # Beam downloads its own jar (and says so if it cannot)
  title = engine.capitalize()
  if "://" not in jar and not os.path.isfile(jar):
    raise InputError(
        f"--{flag} {jar}: no such file. Give the path of Beam's {title} "
        "job-server jar (Maven Central's beam-runners-"
        f"{'flink-VERSION' if engine == 'flink' else 'spark-3'}-job-server "
        "at your Beam version); see docs/operations.md, "
        f"\"{title}\"")
  server = pipeline_options.view_as(JobServerOptions)
  launcher = server.job_server_java_launcher or "java"
  if shutil.which(launcher) is None:
    raise InputError(
        f"the {title} job server runs on Java, but {launcher!r} is not on "
        "PATH; install a JDK 17 (Debian: openjdk-17-jre-headless) or give "
        "--job_server_java_launcher")
  # (SparkRunner reuses a job server this process started: its port is
  # in use by it.)
  reused = getattr(sys.modules.get(
      "apache_beam.runners.portability.spark_runner"), "JOB_SERVER_CACHE",
                   None)
  for port_flag in ("job_port", "artifact_port", "expansion_port"):
    port = getattr(server, port_flag, 0) or 0
    if port and not (engine == "spark" and reused) and _port_in_use(port):
      raise InputError(
          f"--{port_flag} {port}: that port is in use on this machine, so "
          f"the {title} job server cannot listen on it; give a free port, "
          f"or leave --{port_flag} out (a free one is picked)")


# Runners whose workers never share the launcher's disk.
# (Beam takes "Dataflow", "DataflowRunner", a dotted path, any case.)
_REMOTE_RUNNERS = ("dataflow", "testdataflow")


def check_paths_reach_workers(pipeline_options: PipelineOptions,
                              paths: Sequence[str]) -> None:
  """Refuses local paths for runners whose workers run elsewhere."""
  runner = pipeline_options.view_as(StandardOptions).runner or ""
  if not isinstance(runner, str):
    return
  name = runner.rsplit(".", 1)[-1].lower()
  if name.endswith("runner"):
    name = name[:-len("runner")]
  if name not in _REMOTE_RUNNERS:
    return
  local = [p for p in paths if "://" not in p or p.startswith("file://")]
  if local:
    raise InputError(
        f"{runner} workers cannot see this machine's files, but "
        f"{', '.join(local)} {'is' if len(local) == 1 else 'are'} local; "
        "put the inputs and the output on gs:// (or another file system "
        "the workers reach)")

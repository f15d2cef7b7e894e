"""The beam-tfrecords command line.

    beam-tfrecords build --schema S.yaml --input 'data/*.csv' --output out/ds \
        [--format csv] [--num-shards N | --max-shard-size 256MB] [any Beam pipeline option]
    beam-tfrecords inspect out/ds [--split train] [--records 3]
    beam-tfrecords inspect "other/*.tfrecord"     # any TFRecord files
    beam-tfrecords validate --schema S.yaml out/ds
    beam-tfrecords infer-schema --input data.csv > S.yaml

Flags this program does not know pass through to Beam's PipelineOptions, so
every runner option (--runner, --project, --region, --temp_location,
--flink_master, --direct_num_workers, ...) works unchanged. A flag that
neither this program nor Beam's options take is refused (exit 2), never
dropped.

Exit codes: 0 built or up to date; 1 the pipeline failed; 2 a schema,
input or argument error; 3 too many rejected rows (nothing published);
4 no input for the requested date / span; 5 the data broke the schema's
expectations; 6 a publish was interrupted (the same command again
finishes it); 130 interrupted (Ctrl-C); 143 terminated (SIGTERM).

An error of ours is one `error: ...` line on stderr. Beam's own log
records (a failed step's traceback) and the error's full traceback go to a
debug log file instead (in $BTR_LOG_DIR, else the system's temporary
folder), named in a `details: ...` line when a build's pipeline failed;
--verbose shows them all on stderr, as they come. Any other exception is a
bug: it is raised with its traceback (exit 1).
"""

import atexit
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from typing import List, Optional

from beam_tfrecords.cli import show
from beam_tfrecords.core.errors import (AnomalyError, BadRowsError,
                                        BeamTFRecordsError, InputError,
                                        JobFailedError, NoInputError,
                                        OutputBusyError,
                                        PublishInterruptedError)
from beam_tfrecords.runners import allocator
from beam_tfrecords.runners.progress import human_bytes

__all__ = ["main", "parser", "EXIT_OK", "EXIT_FAILED", "EXIT_INPUT",
           "EXIT_BAD_ROWS", "EXIT_NO_INPUT", "EXIT_ANOMALY",
           "EXIT_PUBLISH_INTERRUPTED", "EXIT_INTERRUPTED", "EXIT_TERMINATED",
           "LOG_DIR_ENV"]


# Exit codes (for schedulers): 0 built or up to date; 1 the pipeline failed;
# 2 a schema, input or argument error; 3 more bad rows than allowed (nothing
# published); 4 no input for the requested date / span (nothing to do);
# 5 the data broke the schema's expectations (nothing published);
# 6 a publish began and could not end (nothing lost: the same command again
# finishes it); 130 interrupted (128 + SIGINT, as shells report it);
# 143 terminated (128 + SIGTERM: a scheduler stopped the build).
EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_BAD_ROWS, EXIT_NO_INPUT = 0, 1, 2, 3, 4
EXIT_ANOMALY = 5
EXIT_PUBLISH_INTERRUPTED = 6
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

# The folder of the debug log files (default: the system's temporary one).
LOG_DIR_ENV = "BTR_LOG_DIR"

# Errors the user can act on: (kind, --summary-json status, exit code), the
# first kind that matches.
USER_ERRORS = ((NoInputError, "no_input", EXIT_NO_INPUT),
               (BadRowsError, "too_many_bad_rows", EXIT_BAD_ROWS),
               (AnomalyError, "anomalies", EXIT_ANOMALY),
               (OutputBusyError, "busy", EXIT_INPUT),
               (PublishInterruptedError, "publish_interrupted",
                EXIT_PUBLISH_INTERRUPTED),
               # The engine failed the job (a lost machine): a retry may
               # well pass.
               (JobFailedError, "job_failed", EXIT_FAILED),
               (BeamTFRecordsError, "error", EXIT_INPUT))


class _DebugLog:
  """A file for what stderr does not show: Beam's own log records (a
  failed step logs its traceback at ERROR through the `apache_beam`
  loggers), a copy of our warnings, and the traceback of the error that
  ended the command. Kept, and named on stderr, only when a build's
  pipeline failed (or Beam logged something); removed otherwise."""

  FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

  def __init__(self, path: str, stream):
    self.path = path
    self.handler = logging.StreamHandler(stream)
    self.handler.setFormatter(logging.Formatter(self.FORMAT))
    self.handler.addFilter(self._count)
    self.beam_records = 0
    self.kept = False  # named in a details: line: not removed
    self._beam = logging.getLogger("apache_beam")
    self._propagate = self._beam.propagate
    self._runs = _runs_started()

  @classmethod
  def start(cls, command: str) -> Optional["_DebugLog"]:
    """Beam's records diverted into a new file; None (nothing diverted)
    when no file can be made."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for folder in (os.environ.get(LOG_DIR_ENV), tempfile.gettempdir()):
      if not folder:
        continue
      try:
        os.makedirs(folder, exist_ok=True)
        fd, path = tempfile.mkstemp(
            prefix=f"beam_tfrecords-{command}-{stamp}-", suffix=".log",
            dir=folder)
      except OSError:
        continue
      log = cls(path, os.fdopen(fd, "w", encoding="utf-8"))
      log._beam.addHandler(log.handler)
      log._beam.propagate = False
      logging.getLogger().addHandler(log.handler)
      return log
    return None

  def _count(self, record: logging.LogRecord) -> bool:
    if record.name == "apache_beam" or record.name.startswith(
        "apache_beam."):
      self.beam_records += 1
    return True

  def failed(self, error: BaseException) -> bool:
    """Writes the error's traceback; says the file's path on stderr (and
    returns True) when there is more to see there than the error line:
    the build's pipeline ran, or Beam logged something."""
    self.handler.handle(logging.LogRecord(
        __name__, logging.ERROR, __file__, 0, "the command failed", (),
        (type(error), error, error.__traceback__)))
    self.handler.flush()
    if not self.beam_records and _runs_started() == self._runs:
      return False
    print(f"details: {self.path}", file=sys.stderr)
    return True

  def stop(self, keep: bool) -> None:
    self._beam.removeHandler(self.handler)
    self._beam.propagate = self._propagate
    logging.getLogger().removeHandler(self.handler)
    self.handler.close()
    self.handler.stream.close()
    if not keep:
      try:
        os.remove(self.path)
      except OSError:
        pass


def _runs_started() -> int:
  """Pipelines run so far (0 when none could have: the runner module,
  which imports Beam, is not loaded)."""
  run = sys.modules.get("beam_tfrecords.runners.run")
  return run.runs_started() if run is not None else 0


def parser():
  """The command line's argument parser (cli.args; imported when first
  used: main installs its SIGTERM handler before)."""
  from beam_tfrecords.cli.args import parser as make
  return make()


class _TerminatedEarly(KeyboardInterrupt):
  """The program got SIGTERM before a build's own handling of it began
  (runners.run.sigterm_interrupts), while Beam and TensorFlow import:
  nothing was started."""


class _EarlySigterm:
  """The program's SIGTERM handler from main's first line, until a build's
  own takes over (runners.run imports Beam, ~2 s after the start): without
  it, a scheduler's SIGTERM then ended the process at once, exit 143 with
  no word and no --summary-json line.

  While the arguments are parsed it only notes the signal (`start()`
  raises it, once they are known); then it raises _TerminatedEarly; once a
  build's own handling began (`done()`), the SIGTERMs after it change
  nothing (the build ended: nothing is left to undo)."""

  def __init__(self):
    self.state = "parsing"  # then "started", then "done"
    self.pending = False
    signal.signal(signal.SIGTERM, self)

  def __call__(self, signum, frame):
    if self.state == "parsing":
      self.pending = True
    elif self.state == "started":
      # Noted too: raised where Python ignores exceptions (a weakref
      # callback of the import machinery while Beam imports), it is lost,
      # and `take_over` raises it again.
      self.pending = True
      raise _TerminatedEarly()

  def start(self) -> None:
    self.state = "started"
    if self.pending:
      raise _TerminatedEarly()

  def take_over(self) -> None:
    """A build's own handling begins: a SIGTERM that came before and was
    lost is raised now (nothing has started)."""
    pending, self.pending, self.state = self.pending, False, "done"
    if pending:
      raise _TerminatedEarly()

  def done(self) -> None:
    self.state = "done"


# The program's early handler (None: main called by other code, whose
# SIGTERM handler stays its own).
_EARLY: List[Optional[_EarlySigterm]] = [None]


def _terminated(error: BaseException) -> bool:
  """Whether a KeyboardInterrupt is a SIGTERM's (runners.run.Terminated,
  or _TerminatedEarly)."""
  run = sys.modules.get("beam_tfrecords.runners.run")
  return isinstance(error, _TerminatedEarly) or (
      run is not None and isinstance(error, run.Terminated))


def _summary(args, status: str, code: int, result=None, error=None,
             chosen=None) -> None:
  if not getattr(args, "summary_json", False):
    return
  out = {"status": status, "exit_code": code,
         "output": result.output if result else getattr(args, "output", None)}
  if chosen:
    out["schedule"] = chosen
  if result is not None:
    c = result.info.counts
    out.update(seconds=round(result.seconds, 3),
               records=c.records_written, rows_read=c.rows_read,
               rows_rejected=c.rows_rejected, rows_dropped=c.rows_dropped,
               splits={k: v.num_records for k, v in result.splits.items()})
    if result.info.anomalies is not None:
      out["anomalies"] = [a.to_json() for a in result.info.anomalies.found]
  if isinstance(error, AnomalyError):
    out["anomalies"] = error.anomalies
  if error is not None:
    out["error"] = str(error).splitlines()[0][:500]
  print(json.dumps(out, sort_keys=True))


def _shows_progress(args) -> bool:
  if args.quiet or args.summary_json:
    return False
  return bool(args.progress) or sys.stderr.isatty()


def _previous_baseline(args, output: str, schema) -> Optional[str]:
  """--baseline previous (or the schema's baseline: previous): the newest
  earlier date or span of the output's placeholders that holds a finished
  dataset; "" (no baseline) when there is none yet. None: not asked."""
  from beam_tfrecords.building.schedule import has_placeholders, previous_output
  asked = args.baseline if args.baseline is not None else schema.baseline
  if asked != "previous":
    return None
  if not schema.expects:
    raise InputError(
        "--baseline previous compares with the schema's expectations, but "
        f"{args.schema} has no expect: section; add some (docs/schema.md: "
        "Expectations) or drop the flag")
  if not has_placeholders(args.output_template):
    raise InputError(
        "--baseline previous takes the newest earlier date or span of the "
        f"output, but {args.output_template!r} has no {{YYYY}} {{MM}} "
        "{DD} / {SPAN} placeholder; give the baseline's folder instead")
  found = previous_output(args.output_template, output)
  if found is None:
    print(f"note: no earlier dataset of {args.output_template} to compare "
          "with (--baseline previous); only the absolute checks run",
          file=sys.stderr)
    return ""
  return found


def _build(args, beam_args: List[str]) -> int:
  # (Beam imports here: a SIGTERM meanwhile is main's _TerminatedEarly.)
  from beam_tfrecords.runners.run import sigterm_interrupts
  # SIGTERM (a scheduler stopping the build) is a Ctrl-C from here on: the
  # staging folder is removed, and it is said in one line.
  with sigterm_interrupts():
    if _EARLY[0] is not None:
      # Back when the block ends, the build over by then: a SIGTERM then
      # changes nothing (nothing is left to undo).
      _EARLY[0].take_over()
    code = _build_command(args, beam_args)
  if getattr(args, "as_program", False):
    # Built (or up to date): nothing is left to undo, so a SIGTERM in the
    # program's last moments (the report, the interpreter's exit) changes
    # nothing. (Only as the program: a caller of main() keeps its own.)
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
  return code


def _build_command(args, beam_args: List[str]) -> int:
  from beam_tfrecords.cli.args import build_flags, format_options
  from beam_tfrecords.runners.pipeline_options import check_beam_args
  from beam_tfrecords.building.builder import build
  from beam_tfrecords.building.schedule import (Schedule, has_placeholders,
                                                resolve_patterns)
  check_beam_args(beam_args, build_flags("build"))
  # Checked here with our flags for the suggestions; build() takes the
  # options as they are (no second check).
  from apache_beam.options.pipeline_options import PipelineOptions
  options = PipelineOptions(beam_args)
  schedule = Schedule(args.date, args.span, args.version)
  chosen = None
  inputs, output = args.input, args.output
  if any(v is not None for v in (args.date, args.span, args.version)) or \
      any(has_placeholders(p) for p in list(inputs) + [output]):
    inputs, output, chosen = resolve_patterns(inputs, output, schedule)
  args.output_template, args.output = args.output, output
  from beam_tfrecords.building.options import BuildOptions
  opts = BuildOptions.from_args(args)
  if chosen:  # one build of a series
    opts = dataclasses.replace(opts, live_dataset=True)
  # Loaded once, here (for --baseline previous) and for build(); the
  # schema and the outputs may be on gs:// or s3://: the file systems need
  # the Beam options (endpoint, credentials) first.
  from beam_tfrecords.core.beam_files import FileSystems
  from beam_tfrecords.schema import load_schema
  FileSystems.set_options(options)
  schema = load_schema(args.schema)
  baseline = _previous_baseline(args, output, schema)
  if baseline is not None:
    opts = dataclasses.replace(opts, baseline=baseline)
  # (The collector is the process's: the command line's own only.)
  with allocator.imports_frozen() if getattr(args, "as_program", False) \
      else contextlib.nullcontext():
    result = build(schema, inputs, output, build_options=opts,
                   input_format=args.format,
                   format_options=format_options(args), beam_args=options,
                   preprocess=args.preprocess,
                   progress=_shows_progress(args))
  info = result.info
  counts = info.counts
  if result.up_to_date:
    _summary(args, "up_to_date", EXIT_OK, result, chosen=chosen)
    if not args.summary_json:
      print(f"{result.output} is up to date (same inputs, schema and "
            "options as its last build); nothing to do (--force rebuilds)")
    return EXIT_OK
  if args.summary_json:
    _summary(args, "built", EXIT_OK, result, chosen=chosen)
    return EXIT_OK
  print(f"Built {info.name} in {result.seconds:.1f} s -> {result.output}")
  transformed = info.transform.splits if info.transform else {}
  for label, splits in (("", info.splits), (" (transformed)", transformed)):
    for name, split in sorted(splits.items()):
      print(f"  {name}{label}: {split.num_records:,} records in "
            f"{split.num_shards} shard(s), {human_bytes(split.num_bytes)}")
  sequences = counts.steps_written is not None
  steps = f" as {counts.steps_written:,} steps" if sequences else ""
  dropped = (f"; dropped by max_length: {counts.rows_dropped:,}"
             if sequences else "")
  print(f"  rows read: {counts.rows_read:,}; in records: "
        f"{counts.rows_written:,}{steps}; rejected: "
        f"{counts.rows_rejected:,}{dropped}"
        + (f" (see {result.output}/errors/)"
           if counts.rows_rejected or counts.rows_dropped else ""))
  units = info.inputs.extra.get("units") if info.inputs else None
  if units and units.get("reused"):
    print(f"  read units: {units['read']:,}, of which {units['reused']:,} "
          "reused from earlier work (not read or encoded again)")
  if units and units.get("buckets_reused"):
    print(f"  buckets of steps: {units['buckets']:,}, of which "
          f"{units['buckets_reused']:,} reused (not grouped again)")
  if counts.rows_rejected:
    from beam_tfrecords.publish.thresholds import rejection_lines
    print("  top reasons for rejected rows:")
    for line in rejection_lines(info):
      print("  " + line.replace("\n", "\n  "))
  return 0


def run() -> None:
  """The program (the beam-tfrecords command, python -m beam_tfrecords):
  main(), then an exit that skips tearing down every module, which costs
  a build about 0.3 CPU-seconds (Beam's module graph) and does nothing a
  finished command needs; exit handlers (logging's flush) still run."""
  code = main()
  # What the interpreter's own exit does first: join non-daemon threads
  # (and the executors' exit hooks), then run the exit handlers.
  threading._shutdown()  # type: ignore[attr-defined]  # pylint: disable=protected-access
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr):
    try:
      if stream is not None:
        stream.flush()
    except (OSError, ValueError):  # a closed pipe: nothing to flush
      pass
  os._exit(code)


def main(argv: Optional[List[str]] = None) -> int:
  # First: a SIGTERM from here on is said (see _EarlySigterm), in the
  # command line's own process (main called by other code keeps its own
  # handler, as it is).
  as_program = argv is None and (
      threading.current_thread() is threading.main_thread())
  _EARLY[0] = _EarlySigterm() if as_program else None
  if as_program:  # (the allocator is the whole process's)
    allocator.tune()
  args, rest = parser().parse_known_args(argv)
  # the command line's own process (its main thread)
  args.as_program = as_program
  verbose = getattr(args, "verbose", False)
  logging.basicConfig(
      level=logging.INFO if verbose else logging.WARNING,
      format="%(levelname)s %(name)s: %(message)s")
  if args.command not in ("build", "verify", "cache", "view") and rest:
    parser().error(f"unrecognized arguments: {' '.join(rest)}")
  # Beam's own records go to a file unless --verbose (see _DebugLog).
  debug = None if verbose else _DebugLog.start(args.command)
  keep = False
  try:
    return _command(args, rest, debug)
  except Exception as e:  # a bug (not ours to say in a line): raised
    keep = debug is not None and debug.failed(e)
    raise
  finally:
    if _EARLY[0] is not None:
      _EARLY[0].done()  # the command ended: a SIGTERM now changes nothing
    if debug is not None:
      debug.stop(keep or debug.kept)


def _command(args, rest: List[str], debug: Optional[_DebugLog]) -> int:
  """Runs the command; our errors and interruptions become a message and
  an exit code."""
  try:
    if _EARLY[0] is not None:
      _EARLY[0].start()  # (raises a SIGTERM that came while parsing)
    if args.command == "build":
      return _build(args, rest)
    if args.command == "validate":
      return show.validate_command(args)
    if args.command == "infer-schema":
      return show.infer_schema_command(args)
    if args.command == "report":
      return show.report_command(args)
    if args.command == "view":
      return show.view_command(args, rest)
    if args.command == "verify":
      return show.verify_command(args, rest)
    if args.command == "cache":
      return show.cache_command(args, rest)
    return show.inspect_command(args)
  except BeamTFRecordsError as e:
    status, code = next((status, code) for kind, status, code in USER_ERRORS
                        if isinstance(e, kind))
    if debug is not None:
      # Before the error line, which stays the last one.
      debug.kept = debug.failed(e)
    print(f"error: {e}", file=sys.stderr)
    _summary(args, status, code, error=e)
    return code
  except KeyboardInterrupt as e:
    # Beam's runner threads die of the interruption on their way out;
    # what they would print says nothing more than this line.
    threading.excepthook = lambda hook_args: None
    terminated = _terminated(e)
    early = isinstance(e, _TerminatedEarly) and args.command == "build"
    print(("terminated (SIGTERM)" if terminated else "interrupted")
          + (" before the build started" if early else "")
          + ": nothing was published"
          + (" (this build's staging folder was removed)"
             if args.command == "build" and not early else ""),
          file=sys.stderr)
    if terminated:
      _summary(args, "terminated", EXIT_TERMINATED)
      return EXIT_TERMINATED
    _summary(args, "interrupted", EXIT_INTERRUPTED)
    return EXIT_INTERRUPTED
  except Exception as e:  # pylint: disable=broad-except
    if not getattr(args, "summary_json", False):
      raise  # a bug: its traceback, as it is (main names the debug log)
    if debug is not None:
      debug.kept = debug.failed(e)
    print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
    _summary(args, "failed", EXIT_FAILED, error=e)
    return EXIT_FAILED

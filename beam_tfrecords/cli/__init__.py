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
4 no input for the requested date / span; 130 interrupted (Ctrl-C).
"""

import dataclasses
import json
import logging
import sys
import threading
from typing import List, Optional

from beam_tfrecords.errors import (AnomalyError, BadRowsError,
                                   BeamTFRecordsError, InputError,
                                   NoInputError, OutputBusyError)
from beam_tfrecords.cli import show
from beam_tfrecords.cli.args import build_flags, format_options, parser
from beam_tfrecords.progress import human_bytes

__all__ = ["main", "parser", "EXIT_OK", "EXIT_FAILED", "EXIT_INPUT",
           "EXIT_BAD_ROWS", "EXIT_NO_INPUT", "EXIT_ANOMALY",
           "EXIT_INTERRUPTED"]


# Exit codes (for schedulers): 0 built or up to date; 1 the pipeline failed;
# 2 a schema, input or argument error; 3 more bad rows than allowed (nothing
# published); 4 no input for the requested date / span (nothing to do);
# 5 the data broke the schema's expectations (nothing published);
# 130 interrupted (128 + SIGINT, as shells report it).
EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_BAD_ROWS, EXIT_NO_INPUT = 0, 1, 2, 3, 4
EXIT_ANOMALY = 5
EXIT_INTERRUPTED = 130

# Errors the user can act on: (kind, --summary-json status, exit code), the
# first kind that matches.
USER_ERRORS = ((NoInputError, "no_input", EXIT_NO_INPUT),
               (BadRowsError, "too_many_bad_rows", EXIT_BAD_ROWS),
               (AnomalyError, "anomalies", EXIT_ANOMALY),
               (OutputBusyError, "busy", EXIT_INPUT),
               (BeamTFRecordsError, "error", EXIT_INPUT))


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
      out["anomalies"] = result.info.anomalies["found"]
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
  from beam_tfrecords.schedule import has_placeholders, previous_output
  asked = args.baseline if args.baseline is not None else schema.baseline
  if asked != "previous":
    return None
  if not schema.expects:
    raise InputError(
        "--baseline previous compares with the schema's expectations, but "
        f"{args.schema} has no expect: block; add some (docs/schema.md: "
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
  from beam_tfrecords.runners.pipeline_options import check_beam_args
  from beam_tfrecords.building import build
  from beam_tfrecords.schedule import (Schedule, has_placeholders,
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
  from beam_tfrecords.options import BuildOptions
  opts = BuildOptions.from_args(args)
  # Loaded once, here (for --baseline previous) and for build(); the
  # schema and the outputs may be on gs:// or s3://: the file systems need
  # the Beam options (endpoint, credentials) first.
  from apache_beam.io.filesystems import FileSystems
  from beam_tfrecords.schema import load_schema
  FileSystems.set_options(options)
  schema = load_schema(args.schema)
  baseline = _previous_baseline(args, output, schema)
  if baseline is not None:
    opts = dataclasses.replace(opts, baseline=baseline)
  result = build(schema, inputs, output, options=opts,
                 input_format=args.format,
                 format_options=format_options(args), beam_args=options,
                 preprocess=args.preprocess, progress=_shows_progress(args))
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
  if counts.rows_rejected:
    from beam_tfrecords.sinks import rejection_lines
    print("  top reasons for rejected rows:")
    for line in rejection_lines(info):
      print("  " + line.replace("\n", "\n  "))
  return 0


def main(argv: Optional[List[str]] = None) -> int:
  args, rest = parser().parse_known_args(argv)
  logging.basicConfig(
      level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
      format="%(levelname)s %(name)s: %(message)s")
  if args.command != "build" and rest:
    parser().error(f"unrecognized arguments: {' '.join(rest)}")
  try:
    if args.command == "build":
      return _build(args, rest)
    if args.command == "validate":
      return show.validate_command(args)
    if args.command == "infer-schema":
      return show.infer_schema_command(args)
    if args.command == "report":
      return show.report_command(args)
    return show.inspect_command(args)
  except BeamTFRecordsError as e:
    status, code = next((status, code) for kind, status, code in USER_ERRORS
                        if isinstance(e, kind))
    print(f"error: {e}", file=sys.stderr)
    _summary(args, status, code, error=e)
    return code
  except KeyboardInterrupt:
    # Beam's runner threads die of the interruption on their way out;
    # what they would print says nothing more than this line.
    threading.excepthook = lambda hook_args: None
    print("interrupted: nothing was published"
          + (" (this build's staging folder was removed)"
             if args.command == "build" else ""), file=sys.stderr)
    _summary(args, "interrupted", EXIT_INTERRUPTED)
    return EXIT_INTERRUPTED
  except Exception as e:  # pylint: disable=broad-except
    if not getattr(args, "summary_json", False):
      raise
    print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
    _summary(args, "failed", EXIT_FAILED, error=e)
    return EXIT_FAILED

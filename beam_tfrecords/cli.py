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

import argparse
import json
import logging
import sys
import threading
from typing import List, Optional

from beam_tfrecords.errors import (BadRowsError, BeamTFRecordsError,
                                   NoInputError, OutputBusyError)
from beam_tfrecords.progress import human_bytes
from beam_tfrecords.version import __version__

__all__ = ["main", "parser"]


def _csv_names(text: str) -> List[str]:
  return [n.strip() for n in text.split(",")]


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(
      prog="beam-tfrecords",
      description="Build TFRecord datasets from raw data with Apache Beam.")
  p.add_argument("--version", action="version", version=__version__)
  sub = p.add_subparsers(dest="command", required=True)

  # No abbreviations: an unknown flag goes to Beam, never to a flag of ours
  # that it happens to start.
  b = sub.add_parser(
      "build", help="build a dataset", allow_abbrev=False,
      description="Build a dataset. Other --flags go to Beam's "
      "PipelineOptions (--runner, --direct_num_workers, --project, ...); "
      "a flag that neither takes is refused.")
  b.add_argument("--schema", required=True, help="schema YAML file")
  b.add_argument("--input", required=True, action="append",
                 help="input file or glob (repeatable)")
  b.add_argument("--output", required=True, help="dataset directory")
  b.add_argument("--format", choices=["csv", "jsonl", "json", "parquet",
                                      "tfrecord", "images"],
                 help="input format (default: from the file extensions)")
  b.add_argument("--num-shards", type=_num_shards, default=None,
                 help="shard files per split: exactly N for every split, or "
                 "train=8,eval=1 (default: as many as --max-shard-size "
                 "needs)")
  b.add_argument("--max-shard-size", type=_size, default=None,
                 help="the largest shard file, e.g. 256MB or 1GiB, for the "
                 "splits --num-shards does not fix (default: 256MiB)")
  b.add_argument("--shuffle-seed", type=int, default=None,
                 help="shuffle the records (seeded: the same seed gives the "
                 "same files); default: input order")
  b.add_argument("--sink", choices=["deterministic", "beam"],
                 default="deterministic",
                 help="deterministic: byte-identical shard files on every "
                 "run (default); beam: Beam's WriteToTFRecord (same format, "
                 "the runner places the records)")
  b.add_argument("--gzip-level", type=int, default=None, choices=range(1, 10),
                 metavar="1-9",
                 help="compress with zlib at this level (smaller files, "
                 "slower); default: ISA-L's fast deflate")
  b.add_argument("--no-report", dest="report", action="store_false",
                 help="do not write report.html into the dataset")
  b.add_argument("--no-statistics", dest="statistics", action="store_false",
                 help="leave the per-feature statistics out of dataset.json "
                 "(they cost about 7%% of a build's time)")
  b.add_argument("--max-bad-rows", type=int, default=None,
                 help="fail (publish nothing) when more rows are rejected")
  b.add_argument("--max-bad-fraction", type=float, default=None,
                 help="fail when a larger fraction of the rows read is "
                 "rejected, e.g. 0.05 (1 publishes whatever is rejected). "
                 "Default, with neither flag nor schema key: fail above "
                 "0.01, or when rows were rejected and a split got no "
                 "records")
  b.add_argument("--overwrite", action="store_true",
                 help="replace an existing finished dataset")
  b.add_argument("--force", action="store_true",
                 help="build even if the output is up to date (same "
                 "inputs, schema and options as its last build)")
  b.add_argument("--date", default=None,
                 help="fill {YYYY} {MM} {DD} in --input/--output: "
                 "2026-11-21, a range 2026-11-01..2026-11-07, or latest")
  b.add_argument("--span", default=None,
                 help="fill {SPAN}: a number, a range 10..12, or latest")
  b.add_argument("--version", dest="version", default=None,
                 help="fill {VERSION}: a number or latest (of the span)")
  b.add_argument("--preprocess", metavar="MODULE:FUNCTION", default=None,
                 help="a function pyarrow.RecordBatch -> RecordBatch run on "
                 "the workers on every batch read, before encoding: it gets "
                 "every input column and returns those the schema reads "
                 "(README: Preprocessing in Python)")
  b.add_argument("--summary-json", action="store_true",
                 help="print one line of JSON (status, exit_code, output, "
                 "records, ...) for schedulers instead of the report")
  b.add_argument("--csv-delimiter", help="CSV delimiter (default ',')")
  b.add_argument("--csv-quote-char", help="CSV quote character (default '\"')")
  b.add_argument("--csv-no-header", action="store_true",
                 help="CSV files have no header line (give --csv-column-names)")
  b.add_argument("--csv-column-names", type=_csv_names,
                 help="comma-separated column names (replace the header)")
  b.add_argument("--csv-newlines-in-values", action="store_true",
                 help="quoted CSV values may hold line breaks (files are then "
                 "read whole, not split)")
  b.add_argument("--tfrecord-compression", choices=["gzip", "none"],
                 help="TFRecord input: gzip or not (default: gzip for "
                 "names ending in .gz)")
  b.add_argument("--encoding", help="text encoding of CSV input (default utf-8)")
  b.add_argument("-v", "--verbose", action="store_true",
                 help="log what the build does")
  shown = b.add_mutually_exclusive_group()
  shown.add_argument("--progress", action="store_true", default=None,
                     help="show progress on stderr even when it is not a "
                     "terminal (default: only on a terminal)")
  shown.add_argument("-q", "--quiet", action="store_true",
                     help="no progress line")

  i = sub.add_parser(
      "inspect", help="summarize a dataset (or any TFRecord files) and show "
      "records")
  i.add_argument("path", help="dataset directory, or TFRecord files / a "
                 "glob / a directory of them (gzip or not) made by anything")
  i.add_argument("--split", default=None, help="split to show (default: all)")
  i.add_argument("--records", type=int, default=3,
                 help="records to show per split")
  v = sub.add_parser(
      "validate", help="check that every record parses as a schema says")
  v.add_argument("--schema", required=True, help="schema YAML file")
  v.add_argument("path", help="dataset directory")
  v.add_argument("--show", type=int, default=10,
                 help="failures to list (the counts cover all)")
  n = sub.add_parser(
      "infer-schema", help="print a schema file guessed from a sample of "
      "the input, to edit")
  n.add_argument("--input", required=True, action="append",
                 help="input file or glob (repeatable)")
  n.add_argument("--format", choices=["csv", "jsonl", "json", "parquet",
                                      "tfrecord"],
                 help="input format (default: from the file extensions)")
  n.add_argument("--name", default=None,
                 help="dataset name (default: from the first file's name)")
  n.add_argument("--sample-rows", type=int, default=10_000,
                 help="rows to look at (from the start of the input)")
  r = sub.add_parser(
      "report", help="write a dataset's report: one HTML page with its "
      "splits, rejected rows and per-feature plots")
  r.add_argument("path", help="dataset directory")
  r.add_argument("-o", "--output", default="report.html",
                 help="the HTML file (default: report.html in the working "
                 "directory)")
  return p


def _format_options(args) -> dict:
  opts = {"delimiter": args.csv_delimiter, "quote_char": args.csv_quote_char,
          "column_names": args.csv_column_names, "encoding": args.encoding,
          "compression": getattr(args, "tfrecord_compression", None)}
  if args.csv_no_header:
    opts["header"] = False
  if args.csv_newlines_in_values:
    opts["newlines_in_values"] = True
  return {k: v for k, v in opts.items() if v is not None}


def _size(text: str) -> int:
  from beam_tfrecords.schema.loader import parse_size
  size = parse_size(text)
  if size is None:
    raise argparse.ArgumentTypeError(
        f"{text!r}: give a size such as 256MB, 1GiB or 1000000 (bytes)")
  return size


def _num_shards(text: str):
  """"8" -> 8; "train=8,eval=1" -> {"train": 8, "eval": 1}."""
  try:
    if "=" not in text:
      return int(text)
    out = {}
    for item in text.split(","):
      name, _, n = item.partition("=")
      out[name.strip()] = int(n)
    return out
  except ValueError:
    raise argparse.ArgumentTypeError(
        f"{text!r}: give a number (8) or split=number pairs "
        "(train=8,eval=1)") from None


# Exit codes (for schedulers): 0 built or up to date; 1 the pipeline failed;
# 2 a schema, input or argument error; 3 more bad rows than allowed (nothing
# published); 4 no input for the requested date / span (nothing to do);
# 130 interrupted (128 + SIGINT, as shells report it).
EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_BAD_ROWS, EXIT_NO_INPUT = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130


def _summary(args, status: str, code: int, result=None, error=None,
             chosen=None) -> None:
  if not getattr(args, "summary_json", False):
    return
  out = {"status": status, "exit_code": code,
         "output": result.output if result else getattr(args, "output", None)}
  if chosen:
    out["schedule"] = chosen
  if result is not None:
    c = result.metadata["counts"]
    out.update(seconds=round(result.seconds, 3),
               records=c["records_written"], rows_read=c["rows_read"],
               rows_rejected=c["rows_rejected"],
               rows_dropped=c.get("rows_dropped", 0),
               splits={k: v["records"] for k, v in result.splits.items()})
  if error is not None:
    out["error"] = str(error).splitlines()[0][:500]
  print(json.dumps(out, sort_keys=True))


def _our_flags(command: str) -> List[str]:
  sub = next(a for a in parser()._actions  # pylint: disable=protected-access
             if isinstance(a, argparse._SubParsersAction)).choices[command]
  return [s for a in sub._actions for s in a.option_strings  # pylint: disable=protected-access
          if s.startswith("--")]


def _shows_progress(args) -> bool:
  if args.quiet or args.summary_json:
    return False
  return bool(args.progress) or sys.stderr.isatty()


def _build(args, beam_args: List[str]) -> int:
  from beam_tfrecords.beam_options import check_beam_args
  from beam_tfrecords.pipeline import build
  from beam_tfrecords.schedule import (Schedule, has_placeholders,
                                      resolve_patterns)
  check_beam_args(beam_args, _our_flags("build"))
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
  args.output = output
  result = build(args.schema, inputs, output,
                 input_format=args.format, num_shards=args.num_shards,
                 max_shard_size=args.max_shard_size,
                 format_options=_format_options(args), beam_args=options,
                 overwrite=args.overwrite, max_bad_rows=args.max_bad_rows,
                 max_bad_fraction=args.max_bad_fraction, sink=args.sink,
                 gzip_level=args.gzip_level, shuffle_seed=args.shuffle_seed,
                 statistics=args.statistics, force=args.force,
                 report=args.report,
                 preprocess=args.preprocess, progress=_shows_progress(args))
  counts = result.metadata["counts"]
  if result.up_to_date:
    _summary(args, "up_to_date", EXIT_OK, result, chosen=chosen)
    if not args.summary_json:
      print(f"{result.output} is up to date (same inputs, schema and "
            "options as its last build); nothing to do (--force rebuilds)")
    return EXIT_OK
  if args.summary_json:
    _summary(args, "built", EXIT_OK, result, chosen=chosen)
    return EXIT_OK
  print(f"Built {result.metadata['name']} in {result.seconds:.1f} s -> "
        f"{result.output}")
  for name, split in sorted(result.splits.items()):
    print(f"  {name}: {split['records']:,} records in "
          f"{len(split['shards'])} shard(s), {human_bytes(split['bytes'])}")
  transformed = result.metadata.get("transform", {}).get("splits", {})
  for name, split in sorted(transformed.items()):
    print(f"  {name} (transformed): {split['records']:,} records in "
          f"{len(split['shards'])} shard(s), {human_bytes(split['bytes'])}")
  steps = (f" as {counts['steps_written']:,} steps"
           if "steps_written" in counts else "")
  dropped = (f"; dropped by max_length: {counts['rows_dropped']:,}"
             if "steps_written" in counts else "")
  print(f"  rows read: {counts['rows_read']:,}; in records: "
        f"{counts['rows_written']:,}{steps}; rejected: "
        f"{counts['rows_rejected']:,}{dropped}"
        + (f" (see {result.output}/errors/)"
           if counts["rows_rejected"] or counts["rows_dropped"] else ""))
  if counts["rows_rejected"]:
    from beam_tfrecords.sinks import rejection_lines
    print("  top reasons for rejected rows:")
    for line in rejection_lines(result.metadata):
      print("  " + line.replace("\n", "\n  "))
  return 0


def _print_spec(spec: dict, indent: str = "  ") -> None:
  for name, s in sorted(spec.items()):
    shape = f" shape {s['shape']}" if "shape" in s else ""
    print(f"{indent}{name}: {s['kind']} {s['dtype']}{shape}")


def _is_dataset(path: str) -> bool:
  from beam_tfrecords import fs
  return fs.exists(fs.join(path.rstrip("/"), "dataset.json"))


# Bytes values longer than this are shown cut, with their length.
SHOWN_BYTES = 64


def _bytes_text(value: bytes) -> str:
  if len(value) > SHOWN_BYTES:
    return (value[:SHOWN_BYTES].decode("utf-8", "backslashreplace")
            + f"... ({len(value):,} bytes)")
  return value.decode("utf-8", "backslashreplace")


def _float32_text(value):
  """Floats of a record as float32 prints them: 0.24, not the float64
  widening 0.23999999463558197 (every float in a TFRecord feature is a
  float32)."""
  if isinstance(value, float):
    import numpy as np  # pylint: disable=import-outside-toplevel
    return float(str(np.float32(value)))
  if isinstance(value, dict):
    return {k: _float32_text(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_float32_text(v) for v in value]
  return value


def _show(value) -> str:
  return json.dumps(_float32_text(value), default=_bytes_text,
                    ensure_ascii=False, sort_keys=True)


def _inspect_files(args) -> int:
  from beam_tfrecords.check import inspect_files
  files, kind, features, lists, first = inspect_files([args.path],
                                                      args.records)
  total = sum(f.records for f in files)
  print(f"{len(files)} TFRecord file(s), {total:,} records "
        f"({kind.replace('_', '')}s)" if kind != "empty" else
        f"{len(files)} TFRecord file(s), no records")
  failed = 0
  for f in files:
    status = f"  ERROR: {f.error}" if f.error else ""
    failed += bool(f.error)
    print(f"  {f.path}: {f.records:,} records, {human_bytes(f.bytes)}, "
          f"{'gzip' if f.compression == 'gzip' else 'uncompressed'}{status}")
  for title, table in (("context features" if lists else "features",
                        features), ("feature lists (steps per record)",
                                    lists)):
    if not table:
      continue
    print(f"{title}:")
    for name, s in sorted(table.items()):
      kinds = "/".join(s.kinds_seen) or "empty"
      counts = (f"{s.fewest}" if s.fewest == s.most
                else f"{s.fewest}-{s.most}")
      print(f"  {name}: {kinds}, in {s.records:,} of {total:,} records, "
            f"{counts} per record")
  for n, record in enumerate(first):
    print(f"  record {n}: {_show(record)}")
  return 1 if failed else 0


def _validate(args) -> int:
  from beam_tfrecords.check import validate
  from beam_tfrecords.schema import load_schema
  report = validate(args.path, load_schema(args.schema), args.show)
  if report.kind_mismatch:
    print(report.kind_mismatch)
    return 1
  print(f"{report.records:,} records in {report.files} file(s) checked "
        f"against {args.schema}: {report.bad_records:,} do not parse as it "
        "says")
  if report.records != report.listed_records:
    print(f"  dataset.json lists {report.listed_records:,} records, the "
          f"files hold {report.records:,}")
  for problem, n in sorted(report.counts.items(), key=lambda kv: -kv[1]):
    print(f"  {n:,} records: {problem}")
  if report.failures:
    print("first failures:")
    for line in report.failures:
      print(f"  {line}")
  ok = report.ok
  from beam_tfrecords.reader import dataset_info
  if _is_dataset(args.path) and dataset_info(args.path).get("transform"):
    ok = _validate_transformed(args.path) and ok
  return 0 if ok else 1


def _validate_transformed(path: str) -> bool:
  """Every transformed record parses with the transformed feature spec
  (TensorFlow's own parser)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from beam_tfrecords import fs
  from beam_tfrecords.reader import dataset_info
  from beam_tfrecords.schema.spec import tf_spec
  transform = dataset_info(path)["transform"]
  spec = {k: tf_spec(v) for k, v in transform["feature_spec"].items()}
  records = bad = listed = 0
  first = []
  for split, s in sorted(transform["splits"].items()):
    listed += s["records"]
    files = [fs.join(path.rstrip("/"), shard["file"])
             for shard in s["shards"]]
    for i, raw in enumerate(tf.data.TFRecordDataset(
        files, compression_type="GZIP").as_numpy_iterator()):
      records += 1
      try:
        tf.io.parse_single_example(raw, spec)
      except (tf.errors.InvalidArgumentError, ValueError) as e:
        bad += 1
        if len(first) < 5:
          first.append(f"{split} record {i}: {str(e).splitlines()[0]}")
  print(f"{records:,} transformed records checked against the transformed "
        f"feature spec: {bad:,} do not parse")
  if records != listed:
    print(f"  dataset.json lists {listed:,} transformed records, the files "
          f"hold {records:,}")
  for line in first:
    print(f"  {line}")
  return bad == 0 and records == listed


def _infer_schema(args) -> int:
  import os
  import re
  from beam_tfrecords.infer import infer_schema
  from beam_tfrecords.sources import match_inputs, resolve_format
  paths = [f.path for f in match_inputs(args.input)]
  fmt = resolve_format(paths, args.format)
  name = args.name or re.sub(r"[^A-Za-z0-9_]+", "_", os.path.basename(
      paths[0]).split(".")[0]).strip("_") or "dataset"
  print(infer_schema(paths, fmt, name, args.sample_rows), end="")
  return 0


def _inspect(args) -> int:
  from beam_tfrecords.reader import dataset_info, iter_records
  if not _is_dataset(args.path):
    return _inspect_files(args)
  info = dataset_info(args.path)
  print(f"dataset {info['name']} ({info['record']}), built by beam-tfrecords "
        f"{info['tool']['version']}")
  c = info["counts"]
  steps = (f" ({c['steps_written']:,} steps)" if "steps_written" in c
           else "")
  print(f"rows read {c['rows_read']:,}, records {c['records_written']:,}"
        f"{steps}, rejected {c['rows_rejected']:,}, dropped "
        f"{c.get('rows_dropped', 0):,}")
  spec = info["feature_spec"]
  if info["record"] == "sequence_example":
    print("context features:")
    _print_spec(spec["context"])
    print("sequence features (per step):")
    _print_spec(spec["sequence"])
  else:
    print("features:")
    _print_spec(spec)
  for split, s in sorted(info["splits"].items()):
    if args.split and split != args.split:
      continue
    print(f"split {split}: {s['records']:,} records, {len(s['shards'])} "
          f"shard(s), {human_bytes(s['bytes'])}")
    for shard in s["shards"]:
      print(f"  {shard['file']}: {shard['records']:,} records, "
            f"{human_bytes(shard['bytes'])}")
    for n, row in enumerate(iter_records(args.path, split)):
      if n >= args.records:
        break
      print(f"  record {n}: {_show(row)}")
  transform = info.get("transform")
  if transform:
    print("transformed features (TensorFlow Transform; transform_fn/):")
    _print_spec(transform["feature_spec"])
    from beam_tfrecords.records import decode_example, iter_tfrecords
    for split, s in sorted(transform["splits"].items()):
      if args.split and split != args.split:
        continue
      print(f"transformed split {split}: {s['records']:,} records, "
            f"{len(s['shards'])} shard(s), {human_bytes(s['bytes'])}")
      shown = 0
      for shard in s["shards"]:
        print(f"  {shard['file']}: {shard['records']:,} records, "
              f"{human_bytes(shard['bytes'])}")
        from beam_tfrecords import fs
        for record in iter_tfrecords(fs.join(args.path.rstrip("/"),
                                             shard["file"])):
          if shown >= args.records:
            break
          row = {k: list(v) for k, (_, v) in
                 sorted(decode_example(record).items())}
          print(f"  record {shown}: {_show(row)}")
          shown += 1
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
      return _validate(args)
    if args.command == "infer-schema":
      return _infer_schema(args)
    if args.command == "report":
      from beam_tfrecords.report import write_report
      print(write_report(args.path, args.output))
      return 0
    return _inspect(args)
  except NoInputError as e:
    print(f"error: {e}", file=sys.stderr)
    _summary(args, "no_input", EXIT_NO_INPUT, error=e)
    return EXIT_NO_INPUT
  except BadRowsError as e:
    print(f"error: {e}", file=sys.stderr)
    _summary(args, "too_many_bad_rows", EXIT_BAD_ROWS, error=e)
    return EXIT_BAD_ROWS
  except OutputBusyError as e:
    print(f"error: {e}", file=sys.stderr)
    _summary(args, "busy", EXIT_INPUT, error=e)
    return EXIT_INPUT
  except BeamTFRecordsError as e:
    print(f"error: {e}", file=sys.stderr)
    _summary(args, "error", EXIT_INPUT, error=e)
    return EXIT_INPUT
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

"""The command line's arguments: `parser()` and the build's own flags."""

import argparse
from typing import List

from beam_tfrecords.building.options import add_arguments
from beam_tfrecords.core.version import __version__
from beam_tfrecords.schema.sizes import parse_size

__all__ = ["build_flags", "format_options", "parser"]


def _csv_names(text: str) -> List[str]:
  return [n.strip() for n in text.split(",")]


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(
      prog="beam-tfrecords",
      description="Build TFRecord datasets from raw data with Apache Beam.")
  p.add_argument("--version", action="version", version=__version__)
  sub = p.add_subparsers(dest="command", required=True)
  _build(sub)
  _inspect(sub)
  _validate(sub)
  _infer_schema(sub)
  _report(sub)
  _view(sub)
  _verify(sub)
  _cache(sub)
  return p


def _build(sub) -> None:
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
  b.add_argument("--preprocess", metavar="MODULE:FUNCTION", default=None,
                 help="a function pyarrow.RecordBatch -> RecordBatch run on "
                 "the workers on every batch read, before encoding: it gets "
                 "every input column and returns those the schema reads "
                 "(docs/schema.md: Preprocessing in Python)")
  b.add_argument("--summary-json", action="store_true",
                 help="print one line of JSON (status, exit_code, output, "
                 "records, ...) for schedulers instead of the report")
  b.add_argument("-v", "--verbose", action="store_true",
                 help="log what the build does")
  shown = b.add_mutually_exclusive_group()
  shown.add_argument("--progress", action="store_true", default=None,
                     help="show progress on stderr even when it is not a "
                     "terminal (default: only on a terminal)")
  shown.add_argument("-q", "--quiet", action="store_true",
                     help="no progress line")
  dates = b.add_argument_group("scheduled builds")
  dates.add_argument("--date", default=None,
                     help="fill {YYYY} {MM} {DD} in --input/--output: "
                     "2026-11-21, a range 2026-11-01..2026-11-07, or latest")
  dates.add_argument("--span", default=None,
                     help="fill {SPAN}: a number, a range 10..12, or latest")
  dates.add_argument("--version", dest="version", default=None,
                     help="fill {VERSION}: a number or latest (of the span)")
  _input_formats(b.add_argument_group("input formats"))
  add_arguments(b)  # BuildOptions' flags, in their groups


def _input_formats(g) -> None:
  """The flags that become the sources' format options (format_options)."""
  g.add_argument("--csv-delimiter", help="CSV delimiter (default ',')")
  g.add_argument("--csv-quote-char", help="CSV quote character (default '\"')")
  g.add_argument("--csv-no-header", action="store_true",
                 help="CSV files have no header line (give --csv-column-names)")
  g.add_argument("--csv-column-names", type=_csv_names,
                 help="comma-separated column names (replace the header)")
  g.add_argument("--csv-newlines-in-values", action="store_true",
                 help="quoted CSV values may hold line breaks (files are then "
                 "read whole, not split)")
  g.add_argument("--tfrecord-compression", choices=["gzip", "none"],
                 help="TFRecord input: gzip or not (default: gzip for "
                 "names ending in .gz and for files that start with "
                 "gzip's magic bytes)")
  g.add_argument("--encoding", help="text encoding of CSV input (default utf-8)")


def _inspect(sub) -> None:
  i = sub.add_parser(
      "inspect", help="summarize a dataset (or any TFRecord files) and show "
      "records")
  i.add_argument("path", nargs="+", help="dataset directory; several, a "
                 "glob of them or a pin file: a window read as one; or "
                 "TFRecord files / a glob / a directory of them (gzip or "
                 "not) made by anything")
  i.add_argument("--split", default=None, help="split to show (default: all)")
  i.add_argument("--records", type=int, default=3,
                 help="records to show per split")


def _validate(sub) -> None:
  v = sub.add_parser(
      "validate", help="check that every record parses as a schema says")
  v.add_argument("--schema", required=True, help="schema YAML file")
  v.add_argument("path", help="dataset directory")
  v.add_argument("--show", type=int, default=10,
                 help="failures to list (the counts cover all)")


def _infer_schema(sub) -> None:
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
  n.add_argument("--expect", action="store_true",
                 help="propose an expect: section for each feature from the "
                 "sample (presence, observed ranges, the values of small "
                 "categories, list lengths); an --input that is a finished "
                 "dataset folder always gets them, from its statistics")


def _report(sub) -> None:
  r = sub.add_parser(
      "report", help="write a dataset's report: one HTML page with its "
      "splits, rejected rows and per-feature plots")
  r.add_argument("path", nargs="+", help="dataset directory; several, a "
                 "glob of them or a pin file: the window's trend (records, "
                 "presence and mean per feature, per dataset)")
  r.add_argument("-o", "--output", default="report.html",
                 help="the HTML file (default: report.html in the working "
                 "directory)")


def _view(sub) -> None:
  v = sub.add_parser(
      "view", help="browse a dataset record by record in a local page "
      "(images, sequences, filters, histograms, rejected rows)",
      description="Serve a page on 127.0.0.1 to browse a finished dataset: "
      "each record at http://127.0.0.1:PORT/<split>/<number>, images shown "
      "as images, a SequenceExample's steps as a table, filters over the "
      "values, the statistics' histograms linking to their records, and "
      "the rejected rows by reason. Read-only; Ctrl-C stops it. Needs the "
      "view extra (pip install 'beam-tfrecords[view]'). Other --flags go "
      "to Beam's file systems (--s3_endpoint_url, ...).")
  v.add_argument("path", help="dataset directory (local, gs://, s3://)")
  v.add_argument("--port", type=int, default=0,
                 help="the port on 127.0.0.1 (default: a free one)")
  v.add_argument("--against", default=None, metavar="DIR",
                 help="another build of the dataset, shown beside it "
                 "(the same record number in both)")


def _verify(sub) -> None:
  v = sub.add_parser(
      "verify", help="check every file of a dataset against the SHA-256 "
      "its build recorded (missing, truncated, resized, damaged, extra "
      "and unreadable files, and a croissant.json that disagrees)",
      description="Check every file of a finished dataset against the "
      "sizes and SHA-256s in its dataset.json; exit 0 when all are intact, "
      "1 naming each missing, truncated, resized, damaged, extra or "
      "unreadable file (only regular files are read, each to at most one "
      "byte past its listed size) and a croissant.json that disagrees "
      "with dataset.json or does not read, 2 when it cannot be verified (not a finished dataset, "
      "a dataset.json of another shape, or replaced by a newer build while "
      "verifying: run it again). Other --flags go to Beam's file systems "
      "(--s3_endpoint_url, ...).")
  v.add_argument("path", help="dataset directory (local, gs://, s3://, ...)")
  v.add_argument("--threads", type=int, default=4,
                 help="files read at once (default 4)")


def _cache(sub) -> None:
  c = sub.add_parser(
      "cache", help="list or clear a --cache folder of finished read units",
      description="Show what a build's --cache folder (or an output's "
      ".units/, a killed build's finished units) holds: units, batches, "
      "bytes and when they were last used; --clear removes them all, "
      "--max-size evicts the least recently used down to a bound.")
  c.add_argument("path", help="the --cache folder (local, gs://, s3://: "
                 "Beam's file system flags as for build)")
  c.add_argument("--clear", action="store_true",
                 help="remove every unit")
  c.add_argument("--max-size", type=parse_size, default=None,
                 metavar="SIZE", help="evict least recently used units "
                 "until the folder holds at most SIZE, e.g. 10GiB")


def format_options(args) -> dict:
  """The --csv-* / --encoding / --tfrecord-compression flags as the
  sources' format options."""
  opts = {"delimiter": args.csv_delimiter, "quote_char": args.csv_quote_char,
          "column_names": args.csv_column_names, "encoding": args.encoding,
          "compression": getattr(args, "tfrecord_compression", None)}
  if args.csv_no_header:
    opts["header"] = False
  if args.csv_newlines_in_values:
    opts["newlines_in_values"] = True
  return {k: v for k, v in opts.items() if v is not None}


def build_flags(command: str = "build") -> List[str]:
  """The --flags a subcommand takes (the rest of a build's go to Beam)."""
  sub = next(a for a in parser()._actions  # pylint: disable=protected-access
             if isinstance(a, argparse._SubParsersAction)).choices[command]
  return [s for a in sub._actions for s in a.option_strings  # pylint: disable=protected-access
          if s.startswith("--")]

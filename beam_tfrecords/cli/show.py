"""What the inspect, validate, infer-schema and report commands print.

The reading and checking is done by the library (reader, check, infer,
report); this module only formats it for a terminal.
"""

import json
import os
import sys

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.runners.progress import human_bytes

__all__ = ["infer_schema_command", "inspect_command", "report_command",
           "validate_command"]


def _print_spec(spec: dict, indent: str = "  ") -> None:
  for name, s in sorted(spec.items()):
    shape = f" shape {s['shape']}" if "shape" in s else ""
    print(f"{indent}{name}: {s['kind']} {s['dtype']}{shape}")


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


def _compression(kind: str) -> str:
  """A file's kind as inspect says it (check._kind's word)."""
  from beam_tfrecords.core.shard_formats import formats
  labels = {f.name: f.label for f in formats() if f.own}
  return {"gzip": "gzip", "none": "uncompressed", **labels}.get(kind, kind)


def _inspect_files(args) -> int:
  from beam_tfrecords.inspect.check import inspect_files
  files, kind, features, lists, first = inspect_files(args.path,
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
          f"{_compression(f.compression)}{status}")
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


def _window_of(paths):
  """The window `paths` name (datasets: several, a glob, a pin file), or
  None when they are one dataset or name TFRecord files."""
  from beam_tfrecords.read.reader import is_dataset
  from beam_tfrecords.read.window import datasets, is_pin, window
  if len(paths) == 1 and is_dataset(paths[0]):
    return None
  try:
    found = datasets(paths)
  except InputError:
    # A pin or several datasets say why they cannot be read; a pattern
    # that matches no dataset may name TFRecord files.
    if any(is_pin(p) for p in paths) or sum(map(is_dataset, paths)) > 1:
      raise
    return None
  if not all(is_dataset(p) for p in found) or (
      len(found) == 1 and not is_pin(paths[0])
      and not any(c in paths[0] for c in "*?[")):
    return None
  return window(found)  # refuses what does not read as one


def _inspect_window(args, found) -> int:
  from beam_tfrecords.read.reader import iter_records
  paths = [p for p, _ in found]
  print(f"window of {len(found)} datasets ({found[0][1].record}), read in "
        "this order:")
  for path, info in found:
    splits = ", ".join(f"{k} {s.num_records:,}"
                       for k, s in sorted(info.splits.items()))
    print(f"  {path}: {info.name}; records: {splits}")
  for split in sorted({k for _, i in found for k in i.splits}):
    if args.split and split != args.split:
      continue
    total = sum(i.splits[split].num_records for _, i in found
                if split in i.splits)
    print(f"split {split}: {total:,} records in all")
    if all(split in i.splits for _, i in found):
      for n, row in enumerate(iter_records(paths, split)):
        if n >= args.records:
          break
        print(f"  record {n}: {_show(row)}")
  return 0


def inspect_command(args) -> int:
  """beam-tfrecords inspect: a dataset, a window of them, or TFRecord
  files made by anything."""
  from beam_tfrecords.read.reader import (dataset_info, is_dataset,
                                          iter_records, iter_transformed)
  found = _window_of(args.path)
  if found is not None:
    return _inspect_window(args, found)
  if not (len(args.path) == 1 and is_dataset(args.path[0])):
    return _inspect_files(args)
  args.path = args.path[0]
  info = dataset_info(args.path)
  print(f"dataset {info.name} ({info.record}), built by beam-tfrecords "
        f"{info.tool.version}")
  c = info.counts
  steps = (f" ({c.steps_written:,} steps)" if c.steps_written is not None
           else "")
  print(f"rows read {c.rows_read:,}, records {c.records_written:,}"
        f"{steps}, rejected {c.rows_rejected:,}, dropped "
        f"{c.rows_dropped:,}")
  spec = info.feature_spec
  if info.record == "sequence_example":
    print("context features:")
    _print_spec(spec["context"])
    print("sequence features (per step):")
    _print_spec(spec["sequence"])
  else:
    print("features:")
    _print_spec(spec)
  for split, s in sorted(info.splits.items()):
    if args.split and split != args.split:
      continue
    print(f"split {split}: {s.num_records:,} records, {s.num_shards} "
          f"shard(s), {human_bytes(s.num_bytes)}")
    for shard in s.shards:
      print(f"  {shard.file}: {shard.num_records:,} records, "
            f"{human_bytes(shard.num_bytes)}")
    for n, row in enumerate(iter_records(args.path, split)):
      if n >= args.records:
        break
      print(f"  record {n}: {_show(row)}")
  transform = info.transform
  if transform is not None:
    print("transformed features (TensorFlow Transform; transform_fn/):")
    _print_spec(transform.feature_spec or {})
    for split, s in sorted(transform.splits.items()):
      if args.split and split != args.split:
        continue
      print(f"transformed split {split}: {s.num_records:,} records, "
            f"{s.num_shards} shard(s), {human_bytes(s.num_bytes)}")
      shown = 0
      for shard in s.shards:
        print(f"  {shard.file}: {shard.num_records:,} records, "
              f"{human_bytes(shard.num_bytes)}")
        for row in iter_transformed(args.path, shard):
          if shown >= args.records:
            break
          print(f"  record {shown}: {_show(row)}")
          shown += 1
  return 0


def verify_command(args, beam_args) -> int:
  """beam-tfrecords verify: 0 every file intact, 1 a problem named."""
  from beam_tfrecords.publish.verify import lines, verify
  result = verify(args.path, beam_args=beam_args, threads=args.threads)
  for line in lines(result):
    print(line)
  return 0 if result.ok else 1


def cache_command(args, beam_args=()) -> int:
  """beam-tfrecords cache: what a unit store holds; --clear, --max-size.
  A folder on a bucket takes Beam's file system flags, as build does."""
  from beam_tfrecords.core import fs
  from beam_tfrecords.core.unit_cache import UnitStore, describe_store
  if beam_args:
    from beam_tfrecords.core.beam_files import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions
    FileSystems.set_options(PipelineOptions(list(beam_args)))
  if fs.is_local(args.path) and not os.path.isdir(args.path):
    raise InputError(f"{args.path}: no such folder (a --cache folder)")
  store = UnitStore(args.path)
  if args.clear:
    freed = store.clear()
    print(f"{args.path}: cleared, {human_bytes(freed)} freed")
    return 0
  if args.max_size is not None:
    removed = store.evict(args.max_size)
    print(f"{args.path}: {len(removed)} unit(s) evicted")
  held = describe_store(args.path)
  print(f"{args.path}: {held['units']:,} unit(s), {held['batches']:,} "
        f"batch(es), {human_bytes(held['bytes'])}")
  if held["units"]:
    print(f"  last used: oldest {_age(held['now'] - held['oldest'])} ago, "
          f"newest {_age(held['now'] - held['newest'])} ago")
  return 0


def _age(seconds: float) -> str:
  if seconds < 120:
    return f"{seconds:.0f} s"
  if seconds < 7200:
    return f"{seconds / 60:.0f} min"
  if seconds < 172800:
    return f"{seconds / 3600:.0f} h"
  return f"{seconds / 86400:.0f} days"


def validate_command(args) -> int:
  """beam-tfrecords validate."""
  from beam_tfrecords.inspect.check import validate, validate_transformed
  from beam_tfrecords.read.reader import dataset_info, is_dataset
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
  if is_dataset(args.path) and dataset_info(args.path).transform is not None:
    ok = _transformed(validate_transformed(args.path)) and ok
  return 0 if ok else 1


def _transformed(report) -> bool:
  print(f"{report.records:,} transformed records checked against the "
        f"transformed feature spec: {report.bad_records:,} do not parse")
  if report.records != report.listed_records:
    print(f"  dataset.json lists {report.listed_records:,} transformed "
          f"records, the files hold {report.records:,}")
  for line in report.failures:
    print(f"  {line}")
  return report.ok


def infer_schema_command(args) -> int:
  """beam-tfrecords infer-schema: the schema text on stdout."""
  from beam_tfrecords.inspect.infer import infer_schema_for
  print(infer_schema_for(args.input, args.format, args.name,
                         args.sample_rows, args.expect), end="")
  return 0


def view_command(args, beam_args=()) -> int:
  """beam-tfrecords view: serves the page on 127.0.0.1 until interrupted
  (beam_tfrecords.read.view_server), and prints its address. A dataset
  on a bucket takes Beam's file system flags, as build does.

  Ctrl-C stops it even where it was started with SIGINT ignored (a
  script's `&`, as build's interruption does); a second one while it
  stops (or a wrapper's forwarded one, as timeout sends) is ignored:
  the handler makes the first one KeyboardInterrupt and ignores the
  rest from that moment."""
  import signal
  import threading
  import time
  from beam_tfrecords.read.view_server import serve
  if beam_args:
    from beam_tfrecords.core.beam_files import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions
    FileSystems.set_options(PipelineOptions(list(beam_args)))
  server = serve(args.path, args.port, args.against)
  try:
    if threading.current_thread() is threading.main_thread():
      signal.signal(signal.SIGINT, _interrupt_once)
    print(f"{server.url}  (Ctrl-C stops it)", flush=True)
    while True:
      time.sleep(3600)
  except KeyboardInterrupt:
    pass
  finally:
    server.stop()
  print("stopped", file=sys.stderr)
  return 0


def _interrupt_once(signum, frame):
  """SIGINT's handler while the page is served: KeyboardInterrupt, and
  SIGINT ignored from then on."""
  import signal
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  raise KeyboardInterrupt


def report_command(args) -> int:
  """beam-tfrecords report: writes the HTML page, prints its path (a
  window's: its trend, beam_tfrecords.inspect.trend)."""
  from beam_tfrecords.inspect.report import write_report
  found = _window_of(args.path)
  if found is not None:
    from beam_tfrecords.inspect.trend import write_trend
    print(write_trend([p for p, _ in found], args.output))
    return 0
  print(write_report(args.path[0], args.output))
  return 0

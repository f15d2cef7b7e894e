"""Sources: input files -> read units -> Arrow column batches.

The format is chosen in one place, `resolve_format`: by `--format` or by the
files' extension (a trailing .gz/.bz2 is ignored).
"""

import dataclasses
import difflib
import os
import re
from typing import (Any, Callable, Dict, List, Mapping, Optional, Sequence,
                    Tuple, Union, overload)

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.schema.field_paths import Path, is_path, parse_path
from beam_tfrecords.sources import csv as _csv  # registers "csv"
from beam_tfrecords.sources import image_folders as _images  # registers "images"
from beam_tfrecords.sources import jsonl as _jsonl  # registers "jsonl", "json"
from beam_tfrecords.sources import parquet as _parquet  # registers "parquet"
from beam_tfrecords.sources import tfrecord as _tfrecord  # registers "tfrecord"
from beam_tfrecords.sources.base import (FORMATS, InputFile, ReadError,
                                         ReadUnit, SourceBatch)
from beam_tfrecords.sources.files import match_inputs
from beam_tfrecords.sources.nested_columns import PathError, check_type, resolve

__all__ = ["FORMATS", "InputFile", "InputPlan", "ReadError", "ReadUnit",
           "SourceBatch", "plan_inputs", "read_unit", "resolve_format",
           "source_paths", "read_columns", "with_paths", "NESTED_FORMATS"]

_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zst", ".deflate")
_TF_SHARD = re.compile(r"(?<=\.tfrecord|tfrecords)-\d+-of-\d+$")


def resolve_format(paths: Sequence[str], explicit: Optional[str] = None) -> str:
  """The format name: `explicit`, or the one all files' extensions agree on."""
  if explicit:
    if explicit not in FORMATS:
      raise InputError(f"unknown format {explicit!r}; supported: "
                       f"{', '.join(sorted(FORMATS))}")
    return explicit
  found = set()
  for path in paths:
    base = path
    for suffix in _COMPRESSION_SUFFIXES:
      if base.endswith(suffix):
        base = base[:-len(suffix)]
    ext = os.path.splitext(base)[1].lower()
    # TensorFlow's shard names: data.tfrecord-00003-of-00010
    ext = _TF_SHARD.sub("", ext)
    names = [name for name, fmt in FORMATS.items() if ext in fmt.extensions]
    if not names:
      raise InputError(f"cannot tell the format of {path} from its extension "
                       f"{ext!r}; pass --format ({', '.join(sorted(FORMATS))})")
    found.add(names[0])
  if len(found) > 1:
    raise InputError(f"the inputs mix formats {sorted(found)}; build them "
                     "separately or pass --format")
  return found.pop()


@dataclasses.dataclass(frozen=True)
class InputPlan:
  """What a build reads: the files, the format, and the units to read."""
  format: str
  files: List[InputFile]
  units: List[ReadUnit]
  format_options: Dict[str, Any]


def plan_inputs(patterns: Sequence[str], columns: Sequence[str],
                needed_columns: Union[Mapping[str, str], Sequence[str]] = (),
                fmt: Optional[str] = None,
                format_options: Optional[Mapping[str, Any]] = None,
                scalar_columns: Callable[[], Sequence[str]] = tuple,
                block_size: Optional[int] = None) -> InputPlan:
  """Matches, checks and splits the inputs, before the pipeline is built.

  Args:
    patterns: file paths or globs.
    columns: the columns the schema reads.
    needed_columns: columns that must exist in files with a fixed set of
      columns (CSV headers, Parquet schemas): the sources of features with
      no default, group_by, order_by, split keys. A mapping gives each
      with where the schema uses it and how to fix a misspelling (for the
      message), e.g. {"usr": "the split rule's key (fix splits.hash:)"};
      a plain list of names gets a message that does not say.
    fmt: the format, or None to tell it from the extensions.
    format_options: format options (CSV delimiter, ...).
    scalar_columns: gives the columns the schema reads one value from
      (features of shape []): TFRecord input holds every value in a list,
      and takes the single one of these. Called for TFRecord input only.
    block_size: CSV's block size (bytes per batch) when `options` give
      none; None: CSV_DEFAULTS'.

  Raises:
    InputError: nothing matches, headers differ, a needed column is absent.
  """
  if fmt == "images":
    files, where, classes = _images.list_image_folders(patterns)
    source = FORMATS["images"]
    assert isinstance(source, _images.ImageFolder)  # registered there
    opts = source.check(files, columns, dict(format_options or {}))
    return InputPlan(format="images", files=files,
                     units=source.plan_folders(where, opts),
                     format_options=dict(opts, classes=classes))
  files = match_inputs(patterns)
  name = resolve_format([f.path for f in files], fmt)
  source = FORMATS[name]
  format_options = dict(format_options or {})
  if name == "tfrecord":
    format_options["scalar_columns"] = tuple(scalar_columns())
  elif format_options.get("compression") is not None:
    raise InputError(f"--tfrecord-compression is for TFRecord input; these "
                     f"files are {name}")
  if name == "csv" and block_size and format_options.get(
      "block_size") is None:
    format_options["block_size"] = block_size
  paths = source_paths(columns, name)
  opts = source.check(files, read_columns(columns, paths), format_options)
  available = opts.get("column_names")
  present = set(available or ())
  schemas: List[Tuple[str, Any]] = []
  if name == "parquet" and files:
    # Every file's columns (its footer), as every CSV file's header is
    # read: a file without a column the others have would otherwise give
    # missing values in its rows only, without a word.
    schemas = _parquet.arrow_schemas([f.path for f in files])
    present = {n for _, arrow in schemas for n in arrow.names}
    for path, arrow in schemas:
      _check_parquet_paths(path, arrow, paths)
  if available:
    missing = list(dict.fromkeys(c for c in needed_columns
                                 if (paths[c].root if c in paths else c)
                                 not in present))
    if missing:
      raise InputError(
          f"column(s) {missing} named by the schema are not in the {name} "
          f"input ({files[0].path} has {list(available)}): "
          f"{_uses(missing, needed_columns, available)}")
  for path, arrow in schemas:
    _check_parquet_columns(path, arrow.names, needed_columns, paths, schemas)
  return InputPlan(format=name, files=files, units=source.plan(files, opts),
                   format_options=opts)


def _check_parquet_columns(path: str, names: Sequence[str],
                           needed: Union[Mapping[str, str], Sequence[str]],
                           paths: Mapping[str, Path], schemas) -> None:
  """One Parquet file holds the needed columns that other files have
  (those no file has are reported for the input as a whole). A column
  with a default may be absent: the file's rows take the default, as
  they do from a CSV file without that column."""
  have = set(names)
  missing = [c for c in needed
             if (paths[c].root if c in paths else c) not in have]
  if not missing:
    return
  root = paths[missing[0]].root if missing[0] in paths else missing[0]
  other = next(p for p, s in schemas if root in s.names)
  raise InputError(
      f"{path} lacks column(s) {missing} that the schema needs and {other} "
      f"has: {_uses(missing, needed, names)}. Every Parquet file of one "
      "build must hold the columns the schema reads without a default: "
      "fix or replace that file, or leave it out of --input")


def _check_parquet_paths(path: str, arrow, paths: Mapping[str, Path]
                         ) -> None:
  """Each path against a file's Arrow schema (absent roots are left to
  the needed-columns check)."""
  for p in paths.values():
    index = arrow.get_field_index(p.root)
    if index < 0:
      continue
    try:
      check_type(p, arrow.field(index).type)
    except PathError as e:
      raise InputError(f"{path}: {e}") from None


def _uses(missing: Sequence[str],
          needed: Union[Mapping[str, str], Sequence[str]],
          available: Sequence[str]) -> str:
  """Where the schema uses each missing column, with the closest column
  the file has (a misspelling is the usual cause)."""
  out = []
  for c in missing:
    close = difflib.get_close_matches(c, list(available), n=1)
    shown = f"{c!r} (did you mean {close[0]!r}?)" if close else repr(c)
    use = needed.get(c) if isinstance(needed, Mapping) else None
    out.append(f"{shown} is {use or 'read by the schema'}")
  return "; ".join(out)


# Formats whose values nest (objects, structs, lists of them): there a
# source with an unquoted "." or "[]" is a path (schema.field_paths). In CSV,
# TFRecord and image input every source is a plain column name.
NESTED_FORMATS = ("json", "jsonl", "parquet")


def source_paths(columns: Optional[Sequence[str]], fmt: str
                 ) -> Dict[str, Path]:
  """{source: Path} of the columns that are paths in this format.

  Raises:
    InputError: a path is not valid.
  """
  if fmt not in NESTED_FORMATS or not columns:
    return {}
  paths = {}
  for c in columns:
    if is_path(c):
      try:
        paths[c] = parse_path(c)
      except ValueError as e:
        raise InputError(f"source {c!r}: {e}") from None
  return paths


@overload
def read_columns(columns: None, paths: Mapping[str, Path]) -> None: ...


@overload
def read_columns(columns: Sequence[str], paths: Mapping[str, Path]
                 ) -> List[str]: ...


def read_columns(columns: Optional[Sequence[str]], paths: Mapping[str, Path]
                 ) -> Optional[List[str]]:
  """The input columns to read: paths read their root column."""
  if columns is None:
    return None
  return list(dict.fromkeys(paths[c].root if c in paths else c
                            for c in columns))


def read_unit(unit: ReadUnit, columns: Optional[Sequence[str]]):
  """Yields the SourceBatches of one read unit; a path's values are the
  column named by the path's text (sources.nested_columns)."""
  paths = source_paths(columns, unit.format)
  if not paths:
    yield from FORMATS[unit.format].read(unit, columns)
    return
  assert columns is not None  # the paths are among them
  for batch in FORMATS[unit.format].read(unit, read_columns(columns, paths)):
    try:
      batch.columns = with_paths(batch.columns, columns, paths)
    except PathError as e:
      raise InputError(f"{unit.path}: {_at_row(e, batch)}") from None
    yield batch


def with_paths(found: Mapping[str, Any], columns: Sequence[str],
               paths: Mapping[str, Path]) -> Dict[str, Any]:
  """`columns` of a batch read with read_columns(): each path's values
  (sources.nested_columns.resolve) under the path's text.

  Raises:
    PathError: a path meets a value of the wrong kind.
  """
  out = dict(found)
  for text, path in paths.items():
    root = found.get(path.root)
    if root is not None:  # else an absent column: every value missing
      out[text] = resolve(root, path)
  return {c: out[c] for c in columns if c in out}


def _at_row(error: PathError, batch: SourceBatch) -> str:
  """A path error with its row as the file's row number."""
  if error.row is None:
    return str(error)
  return f"row {batch.known_row_numbers()[error.row]}: {error}"

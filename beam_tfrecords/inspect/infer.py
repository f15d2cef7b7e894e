"""infer-schema: a schema file a person can edit, from a sample of input.

Reads the first rows of the inputs with pyarrow (CSV, JSON lines, Parquet;
TFRecord files of tf.train.Example, each feature a column),
and writes one feature per column: the type (int64, float, string, bytes),
lists (Arrow lists, or text cells most of which hold a "|" separator),
fixed shapes where every sampled list has the same length, and
`required: true` where the sample has no missing value (a comment says
how many were missing otherwise). Columns it cannot map are listed as
comments with the reason. Every choice is a suggestion: check it.
"""

import math
import os
import re
from typing import Any, Dict, List, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.info import FeatureStats
from beam_tfrecords.core.layout import DATASET_JSON, SUCCESS
from beam_tfrecords.encoding.stats import TOP_SHOWN
from beam_tfrecords.schema.field_paths import parse_path, quote_name
from beam_tfrecords.sources import NESTED_FORMATS, match_inputs, resolve_format
from beam_tfrecords.sources.nested_columns import resolve

__all__ = ["CARD_PROPOSAL", "infer_schema", "infer_schema_for", "SAMPLE_ROWS"]

SAMPLE_ROWS = 10_000
_SEPARATORS = ("|", ";")
_NAME_RE = re.compile(r"[^A-Za-z0-9_]+")


def _json_rows(f, fmt: str, rows: int) -> List[dict]:
  import json
  if fmt == "json":  # one JSON array of objects
    data = json.loads(f.read().decode("utf-8"))
    return [r for r in data if isinstance(r, dict)][:rows] \
        if isinstance(data, list) else []
  out = []
  for line in f:
    if line.strip():
      value = json.loads(line)
      if isinstance(value, dict):
        out.append(value)
    if len(out) >= rows:
      break
  return out


def _column(values: list) -> pa.Array:
  """Python values -> an Arrow array; mixed types become their text."""
  try:
    return pa.array(values)
  except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
    return pa.array([None if v is None else str(v) for v in values],
                    pa.string())


def _tfrecord_sample(paths: Sequence[str], rows: int) -> Optional[pa.Table]:
  """The first Examples as a table: a feature whose sampled lists all hold
  at most one value is a scalar column, others stay lists."""
  from beam_tfrecords.core.shard_reader import iter_tfrecords
  from beam_tfrecords.sources.tfrecord import decode_examples, scalars
  import zlib
  records = []
  for path in paths:
    try:
      for record in iter_tfrecords(path):
        records.append(record)
        if len(records) >= rows:
          break
    except (ValueError, OSError, EOFError, zlib.error) as e:
      raise InputError(f"{path}: cannot read it as TFRecords ({e})") from e
    if len(records) >= rows:
      break
  columns, kept, _ = decode_examples(records)
  if not kept:
    return None
  out = {}
  for name, column in columns.items():
    if not name:
      continue  # a feature named "": no schema can read it
    if isinstance(column, list):  # kinds differ between records
      values = [v for row in column if row for v in row]
      if all(isinstance(v, (int, float)) for v in values):
        column = pa.array(column, pa.large_list(pa.float64()))
      else:
        out[name] = _column([None if v is None else str(v)
                             for v in scalars(column)])
        continue
    is_list = pa.types.is_large_list(column.type) or \
        pa.types.is_list(column.type)
    lengths = pc.list_value_length(column) if is_list and \
        not pa.types.is_null(column.type.value_type) else None
    longest = pc.max(lengths).as_py() if lengths is not None else None
    if not longest:  # no value of any kind in the sample: listed as left out
      out[name] = pa.nulls(len(kept))
      continue
    column = scalars(column) if longest <= 1 else column
    # Example bytes that are all UTF-8 are probably text.
    text = {pa.large_binary(): pa.large_string(),
            pa.large_list(pa.large_binary()): pa.large_list(
                pa.large_string())}.get(column.type)
    if text is not None:
      try:
        column = column.cast(text)
      except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    out[name] = column
  return pa.table(out) if out else pa.table({"__empty__": pa.nulls(
      len(kept))}).drop_columns(["__empty__"])


def _sample(paths: Sequence[str], fmt: str, rows: int) -> pa.Table:
  from beam_tfrecords.core import fs
  if fmt == "tfrecord":
    table = _tfrecord_sample(paths, rows)
    if table is None or not table.num_rows:
      raise InputError(f"{list(paths)[:3]}: no Examples to look at; "
                       "infer-schema needs some data")
    return table
  tables = []
  for path in paths:
    with fs.open_read(path, fs.AUTO) as f:
      if fmt == "parquet":
        import pyarrow.parquet as pq
        pf = pq.ParquetFile(pa.PythonFile(f, mode="r"))
        first = next(iter(pf.iter_batches(batch_size=rows)), None)
        table = pa.Table.from_batches([first] if first else [],
                                      pf.schema_arrow)
      elif fmt == "csv":
        import io
        import pyarrow.csv as pacsv
        lines = []
        for line in f:
          lines.append(line)
          if len(lines) > rows:
            break
        if len(lines) < 2:
          continue
        # Missing = an empty unquoted cell, as the build reads CSV.
        table = pacsv.read_csv(io.BytesIO(b"".join(lines)),
                               convert_options=pacsv.ConvertOptions(
                                   null_values=[""],
                                   strings_can_be_null=True,
                                   quoted_strings_can_be_null=False))
      else:
        records = _json_rows(f, fmt, rows)
        names = list(dict.fromkeys(k for r in records for k in r))
        table = pa.table({n: _column([r.get(n) for r in records])
                          for n in names}) if records else None
        if table is None:
          continue
    tables.append(table.slice(0, rows))
    rows -= tables[-1].num_rows
    if rows <= 0:
      break
  if not tables or not any(t.num_rows for t in tables):
    raise InputError(f"{list(paths)[:3]}: no rows to look at; infer-schema "
                     "needs some data")
  return pa.concat_tables(tables, promote_options="permissive")


def _feature_name(column: str, taken: set) -> str:
  name = _NAME_RE.sub("_", column.strip()).strip("_").lower() or "column"
  if name[0].isdigit():
    name = "f_" + name
  base, i = name, 2
  while name in taken:
    name, i = f"{base}_{i}", i + 1
  taken.add(name)
  return name


def _scalar_type(t: pa.DataType) -> Optional[str]:
  if pa.types.is_boolean(t) or pa.types.is_integer(t):
    return "int64"
  if pa.types.is_floating(t) or pa.types.is_decimal(t):
    return "float"
  if pa.types.is_string(t) or pa.types.is_large_string(t) or \
      pa.types.is_date(t):
    return "string"
  if pa.types.is_binary(t) or pa.types.is_large_binary(t) or \
      pa.types.is_fixed_size_binary(t):
    return "bytes"
  return None


def _text_type(values: pa.Array) -> str:
  """int64 / float / string for text values (all must parse)."""
  from beam_tfrecords.schema import values as rules
  text = pc.utf8_trim_whitespace(values.drop_null())
  if len(text) == 0:
    return "string"
  for name, pattern in (("int64", rules.DIGITS_TEXT),
                        ("float", rules.FLOAT_TEXT)):
    if pc.all(pc.match_substring_regex(text, pattern)).as_py():
      return name
  return "string"


def _describe(column: str, array: pa.ChunkedArray) -> Dict[str, Any]:
  """{type, shape, separator, missing, note} for one column."""
  if isinstance(array, pa.ChunkedArray):
    array = array.combine_chunks()
  if pa.types.is_dictionary(array.type):
    array = array.dictionary_decode()
  t = array.type
  out: Dict[str, Any] = {"missing": array.null_count, "rows": len(array)}
  if pa.types.is_list(t) or pa.types.is_large_list(t) or \
      pa.types.is_fixed_size_list(t):
    inner = _scalar_type(t.value_type)
    if inner is None:
      out["note"] = f"lists of {t.value_type}: not supported"
      return out
    lengths = pc.list_value_length(array).drop_null()
    out["type"] = inner
    fixed = len(lengths) and pc.min(lengths).as_py() == pc.max(lengths).as_py()
    out["shape"] = [pc.min(lengths).as_py()] if fixed and \
        pc.min(lengths).as_py() > 0 else [-1]
    return out
  if pa.types.is_null(t):
    out.update(type="string", note="every sampled value is missing: check "
               "the type")
    return out
  scalar = _scalar_type(t)
  if scalar is None:
    out["note"] = f"{t}: not supported (cast it to a number or text)"
    return out
  if scalar == "string" and not pa.types.is_date(t):
    text = array.drop_null()
    for sep in _SEPARATORS:
      if len(text) and pc.mean(pc.cast(pc.match_substring(text, sep),
                                       pa.int8())).as_py() > 0.5:
        words = pc.list_flatten(pc.split_pattern(text, sep))
        out.update(type=_text_type(words), shape=[-1], separator=sep)
        return out
    out["type"] = _text_type(array)
    return out
  out["type"] = scalar
  return out


def _yaml_value(value: Any) -> str:
  import json
  if isinstance(value, str):
    return json.dumps(value, ensure_ascii=False)
  return json.dumps(value)


# A text column with at most this many distinct values in the sample (and
# at least ten rows per value) gets its values proposed as the allowed ones.
MAX_PROPOSED_VALUES = 20


def _floor2(x: float) -> float:
  return math.floor(x * 100) / 100


def _numbers(array: pa.Array, kind: str) -> Optional[pa.Array]:
  """The sampled values as numbers (text columns of numbers cast)."""
  values = array.drop_null()
  if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
    try:
      values = pc.cast(pc.utf8_trim_whitespace(values),
                       pa.int64() if kind == "int64" else pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
      return None
  return values if len(values) else None


def _proposed(array: Any, d: Dict[str, Any]) -> Dict[str, Any]:
  """An expect: section from the sample: presence, the observed range,
  the value set of a small category, values per record of a list."""
  if isinstance(array, pa.ChunkedArray):
    array = array.combine_chunks()
  if pa.types.is_dictionary(array.type):
    array = array.dictionary_decode()
  out: Dict[str, Any] = {}
  if d["rows"]:
    out["presence"] = _floor2((d["rows"] - d["missing"]) / d["rows"])
  if d.get("shape"):
    if d.get("separator"):
      lengths = pc.list_value_length(pc.split_pattern(array.drop_null(),
                                                      d["separator"]))
    elif _is_list(array.type):
      lengths = pc.list_value_length(array).drop_null()
    else:
      return out
    if len(lengths) and d["shape"] == [-1]:
      out["length"] = {"min": pc.min(lengths).as_py(),
                       "max": pc.max(lengths).as_py()}
    return out
  if d["type"] in ("int64", "float"):
    numbers = _numbers(array, d["type"])
    if numbers is not None:
      mm = pc.min_max(numbers)
      out.update(min=mm["min"].as_py(), max=mm["max"].as_py())
  elif d["type"] == "string":
    distinct = pc.unique(array.drop_null())
    # (Dates and times are not categories: tomorrow brings new values.)
    if 0 < len(distinct) <= MAX_PROPOSED_VALUES and \
        len(array) >= 10 * len(distinct) and not pc.all(
            pc.match_substring_regex(pc.cast(distinct, pa.string()),
                                     r"^\d{4}-\d{2}-\d{2}")).as_py():
      out["values"] = sorted(str(v) for v in distinct.to_pylist())
  return out


def _flow(value: Any) -> str:
  """A value as YAML flow text."""
  if isinstance(value, dict):
    return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
  if isinstance(value, list):
    return "[" + ", ".join(_flow(v) for v in value) + "]"
  return _yaml_value(value)


# The card, to fill in (an empty value is not given): what README.md and
# croissant.json say of the dataset (schema.card_section).
CARD_PROPOSAL = [
    'description: ""  # what the data is, in a sentence or two',
    "card:  # who may use it, how to cite it (README.md, croissant.json); "
    "every key optional",
    '  title: ""',
    '  license: ""  # an SPDX id (CC-BY-4.0, MIT) or its URL; '
    "--croissant required needs it and the description",
    "  creators: []  # names, or {name: ..., email: ..., url: ...}",
    '  citation: ""  # e.g. a BibTeX entry',
    '  url: ""  # the dataset\'s home page',
    "  keywords: []",
    '  version: ""  # MAJOR.MINOR.PATCH',
    "  rai:  # Croissant's Responsible-AI fields (the NeurIPS datasets "
    "track asks for them)",
    '    dataCollection: ""  # how, when and from whom the data was '
    "collected",
    '    dataLimitations: ""  # what it does not cover',
    '    dataBiases: ""  # who or what is over- or under-represented',
    '    personalSensitiveInformation: ""  # and how it is protected',
    '    dataUseCases: ""  # what it is for, and not for',
]


def infer_schema(paths: Sequence[str], fmt: str, name: str = "dataset",
                 rows: int = SAMPLE_ROWS, expect: bool = False) -> str:
  """Schema YAML text for the inputs, from their first `rows` rows; with
  `expect`, each feature gets an expect: section proposed from the sample
  (presence, observed ranges, value sets of small categories, list
  lengths)."""
  if not paths:
    raise InputError("infer-schema needs at least one input file")
  table = _sample(paths, fmt, rows)
  lines = [f"# Inferred by beam-tfrecords infer-schema from {table.num_rows:,}"
           f" sampled row(s) of {len(paths)} {fmt} file(s).",
           "# Check every line: types, lists, required and defaults are "
           "guesses from the sample.",
           f"name: {_yaml_value(name)}", "record: example"]
  lines += CARD_PROPOSAL + ["features:"]
  taken: set = set()
  skipped: List[str] = []
  objects: List[str] = []
  for column, values in _columns(table, fmt, objects):
    d = _describe(column, values)
    if "type" not in d:
      skipped.append(f"#   {column}: {d['note']}")
      continue
    feature = _feature_name(column, taken)
    entries = [f"type: {d['type']}"]
    note = f"  # {d['note']}" if d.get("note") else ""
    if feature != column:
      entries.append(f"source: {_yaml_value(column)}")
    if d.get("shape"):
      entries.append(f"shape: {d['shape']}")
    if d.get("separator"):
      entries.append(f"separator: {_yaml_value(d['separator'])}")
    if expect:
      proposed = _proposed(values, d)
      if proposed:
        entries.append(f"expect: {_flow(proposed)}")
    comment = ""
    if d["missing"] == 0 and d["rows"]:
      entries.append("required: true")
      comment = "  # no missing value in the sample"
    elif d["missing"]:
      comment = (f"  # {d['missing']:,} of {d['rows']:,} sampled values "
                 "missing: add `default:` or `required: true`")
    # Quoted: YAML reads on / yes / null / 2024 as other things than text.
    lines.append(f"  {_yaml_value(feature)}: {{{', '.join(entries)}}}"
                 f"{comment}{note}")
  if skipped:
    lines.append("# Columns left out:")
    lines += skipped
  for column in objects:
    lines.append(
        f"# {column} holds lists of objects: the features read from it "
        "are aligned lists (one value per object). For one step per "
        "object, make this `record: sequence_example` and move them under "
        "`sequence:` (the other features under `context:`).")
  return "\n".join(lines) + "\n"


def infer_schema_for(patterns: Sequence[str], fmt: Optional[str] = None,
                     name: Optional[str] = None, rows: int = SAMPLE_ROWS,
                     expect: bool = False) -> str:
  """`infer_schema` for input files or globs, the format from their
  extensions unless given, the name from the first file's unless given;
  for one finished dataset folder, its schema with expectations proposed
  from its (exact) statistics."""
  if len(patterns) == 1 and _is_dataset(patterns[0]):
    return expectations_from_dataset(patterns[0])
  paths = [f.path for f in match_inputs(list(patterns))]
  fmt = resolve_format(paths, fmt)
  name = name or _NAME_RE.sub("_", os.path.basename(paths[0]).split(".")[0]
                              ).strip("_") or "dataset"
  return infer_schema(paths, fmt, name, rows, expect)


def _is_dataset(path: str) -> bool:
  from beam_tfrecords.core import fs
  path = path.rstrip("/")
  return fs.exists(fs.join(path, DATASET_JSON)) and \
      fs.exists(fs.join(path, SUCCESS))


def _dataset_proposal(s: List[FeatureStats], entry: Dict[str, Any]
                      ) -> Dict[str, Any]:
  """An expect: section from one feature's statistics in every split."""
  records = sum(x.records for x in s)
  out: Dict[str, Any] = {}
  if records:
    out["presence"] = _floor2(min(x.present / max(1, x.records) for x in s))
  lengths = [x.list_length for x in s if x.list_length is not None]
  if lengths and entry.get("shape") == [-1]:
    out["length"] = {"min": min(x.min for x in lengths),
                     "max": max(x.max for x in lengths)}
  low = [x.min for x in s if x.min is not None]
  high = [x.max for x in s if x.max is not None]
  if low and high:
    out.update(min=min(low), max=max(high))
  tops = [x.top for x in s if x.top is not None]
  if tops and entry.get("type") == "string" and all(
      x.top_exact and x.top is not None and len(x.top) < TOP_SHOWN
      for x in s if x.top is not None):
    values = sorted({v for top in tops for v, _ in top})
    if len(values) <= MAX_PROPOSED_VALUES:
      out["values"] = values
  return out


def expectations_from_dataset(path: str) -> str:
  """The schema of a finished dataset with an expect: section proposed for
  each feature from its statistics (all rows, every split)."""
  import yaml
  from beam_tfrecords.read.reader import dataset_info
  info = dataset_info(path)
  if not info.statistics:
    raise InputError(f"{path} was built with --no-statistics: nothing to "
                     "propose expectations from")
  schema = dict(info.schema)
  for section in ("features", "context", "sequence"):
    features = dict(schema.get(section) or {})
    for name, entry in features.items():
      entry = {"type": entry} if isinstance(entry, str) else dict(entry)
      s = [split[name] for split in info.statistics.values() if name in split]
      if not s or entry.get("type") in ("image", "tensor") or \
          "vocabulary" in entry:
        continue
      proposed = _dataset_proposal(s, entry)
      if proposed:  # (the expectations already there are kept)
        features[name] = dict(entry, expect={**proposed,
                                             **entry.get("expect", {})})
    if features:
      schema[section] = features
  schema.setdefault("expect", {"records_change": 0.5})
  head = (f"# The schema of {path} with expectations proposed from its "
          f"statistics ({info.counts.records_written:,} records). Check "
          "every bound: they are what this data shows, not what it must.\n")
  return head + yaml.safe_dump(schema, sort_keys=False, allow_unicode=True)


def _columns(table: pa.Table, fmt: str, objects: List[str]):
  """(source, values) per column; in JSON and Parquet, objects and lists
  of objects become one source path per leaf (`user.address.city`,
  `ratings[].movie_id`); columns holding lists of objects are added to
  `objects`."""
  for column in table.column_names:
    values = table.column(column).combine_chunks()
    if fmt not in NESTED_FORMATS or not _nests(values.type):
      yield column, values
      continue
    if _is_list(values.type) and pa.types.is_struct(values.type.value_type):
      objects.append(column)
    for path in _leaf_paths(quote_name(column), values.type):
      yield path, resolve(values, parse_path(path))


def _is_list(t: pa.DataType) -> bool:
  return pa.types.is_list(t) or pa.types.is_large_list(t)


def _nests(t: pa.DataType) -> bool:
  return pa.types.is_struct(t) or (_is_list(t) and _nests_inside(
      t.value_type))


def _nests_inside(t: pa.DataType) -> bool:
  return pa.types.is_struct(t) or (_is_list(t) and _nests_inside(
      t.value_type)) or _is_list(t)


def _leaf_paths(prefix: str, t: pa.DataType, inside: bool = False):
  """Source paths of the leaves under `prefix` (of type `t`); `inside`: a
  `[]` was crossed, so a list there is flattened into the row's list."""
  if pa.types.is_struct(t):
    for i in range(t.num_fields):
      yield from _leaf_paths(f"{prefix}.{quote_name(t.field(i).name)}",
                             t.field(i).type, inside)
  elif _is_list(t) and (inside or _nests_inside(t.value_type)):
    yield from _leaf_paths(prefix + "[]", t.value_type, True)
  else:
    yield prefix

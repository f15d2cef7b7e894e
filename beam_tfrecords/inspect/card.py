"""The dataset card: a short README.md in the dataset folder, rendered
from its dataset.json (the schema's `card:` section, the splits, the
features with their statistics, the rejected rows and anomalies) so that
whoever finds the folder knows what it holds, under what terms, and how
to read it with tf.data, PyTorch and TFDS.

    text = render_card(info)       # the build writes it as README.md

It says only what dataset.json says (no times, no paths), so it is the
same bytes on every run of the same build, and dataset.json records its
SHA-256 like any other file's.

Whatever comes from the data or the schema (values, feature names, the
card's fields) is escaped: Markdown viewers render README.md with any HTML
in it, so a value shows as its text and is never a tag, a link or a table
cell of its own; the loading snippets write names as Python string
literals, so that a copied snippet runs no code a name spells.
"""

import glob
import html
import json
import re
from typing import Any, Dict, List, Optional

from beam_tfrecords.core.info import DatasetInfo, FeatureStats
from beam_tfrecords.core.layout import CROISSANT_FILE, PREVIEW_DIR
from beam_tfrecords.core.shard_formats import of_dataset
from beam_tfrecords.core.shard_names import SHARDS
from beam_tfrecords.schema.card_section import RAI_FIELDS, Card
from beam_tfrecords.schema.split_rule import training_split

__all__ = ["render_card", "feature_rows"]

_RAI_TITLES = {
    "dataCollection": "Data collection",
    "dataLimitations": "Limitations",
    "dataBiases": "Biases",
    "personalSensitiveInformation": "Personal and sensitive information",
    "dataUseCases": "Intended uses"}


# What opens Markdown's inline syntax: code, emphasis, links and images
# (a "]" or "(" without its "[" is text), and the backslash itself.
_MARKDOWN_INLINE = re.compile(r"([\\`*_\[])")
# What begins a heading or a list at the start of a line ("#", "-", "+",
# "1." or "1)"): a backslash goes before its "#", "-", "+", "." or ")".
_LINE_MARK = re.compile(r"^([#+-])")
_NUMBERED = re.compile(r"^([0-9]+)([.)])")


def _text(value: Any) -> str:
  """`value` (from the data or the schema) as Markdown that shows exactly
  its text: HTML's < > & as entities (no tag or entity of its own),
  Markdown's \\ ` * _ [ backslash-escaped (no code, emphasis or link),
  line breaks as spaces (no heading or block of its own)."""
  text = " ".join(str(value).splitlines()).strip()
  return html.escape(_MARKDOWN_INLINE.sub(r"\\\1", text), quote=False)


def _cell(value: Any) -> str:
  """`value` as the text of a table cell (a `|` in it is not a column)."""
  return _text(value).replace("|", "\\|")


def _paragraphs(value: Any) -> str:
  """Text of several paragraphs (a description) as escaped Markdown
  paragraphs; a line that would begin a heading or list begins with an
  escape instead."""
  paragraphs = [_text(p) for p in re.split(r"\n\s*\n", str(value))]
  return "\n\n".join(_NUMBERED.sub(r"\1\\\2", _LINE_MARK.sub(r"\\\1", p))
                     for p in paragraphs if p)


def _code(name: str, cell: bool = False) -> str:
  """A name as inline code; as escaped text when it holds a character that
  inline code would not show as itself (` < > | or a line break)."""
  if name.isprintable() and not set(name) & set("`<>|"):
    return f"`{name}`"
  return _cell(name) if cell else _text(name)


def _fence(text: str) -> str:
  """A code fence longer than any run of backticks in `text` (which then
  cannot end the block)."""
  longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
  return "`" * max(3, longest + 1)


def _literal(text: str) -> str:
  """`text` as a Python string literal that is exactly it: quotes,
  backslashes and line breaks in a name stay in the string, never code.
  Double-quoted as the snippets' other strings; repr() when `text` holds
  a character that is not printable (a line break, U+2028), which JSON
  would write raw."""
  return (json.dumps(text, ensure_ascii=False) if text.isprintable()
          else repr(text))


def _bytes(n: int) -> str:
  for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
    if n < 1024 or unit == "TiB":
      return f"{n:,} {unit}" if unit == "B" else f"{n:.1f} {unit}"
    n /= 1024  # type: ignore[assignment]
  raise AssertionError("unreachable")


def _number(value: Optional[float]) -> str:
  return "" if value is None else f"{value:.6g}"


def _type(decl: Any) -> str:
  if not isinstance(decl, dict):
    return str(decl)
  kind = decl.get("type", "")
  shape = decl.get("shape")
  return f"{kind} {shape}" if shape not in (None, []) else str(kind)


def feature_rows(info: DatasetInfo) -> List[Dict[str, Any]]:
  """One row per schema feature: name, section (context / sequence for
  SequenceExamples), type, and in the training split its missing share
  and its mean or most frequent value (when statistics were computed)."""
  split = training_split(list(info.splits)) if info.splits else None
  stats: Dict[str, FeatureStats] = (info.statistics or {}).get(
      split or "", {})
  rows = []
  for name, decl in info.declarations().items():
    s = stats.get(name)
    row: Dict[str, Any] = {"name": name, "section": info.section_of(name),
                           "type": _type(decl), "missing": None,
                           "value": ""}
    if s is not None and s.records:
      row["missing"] = s.missing / s.records
      if s.mean is not None:
        row["value"] = f"mean {_number(s.mean)}"
      elif s.top:
        value, count = s.top[0]
        share = count / max(s.values, 1)
        row["value"] = f"top {str(value)[:40]!r} ({share:.0%})"
    rows.append(row)
  return rows


def _head(info: DatasetInfo, card: Card) -> List[str]:
  # (A "#" in the heading could be taken for its closing sequence.)
  title = _text(card.title or info.name).replace("#", "\\#")
  lines = [f"# {title}", ""]
  description = _paragraphs(info.schema.get("description", ""))
  lines += [description if description else
            "_No description: give one in the schema's `description:`._", ""]
  facts = [("License", _text(card.license) if card.license
            else "_not given (card: license)_")]
  if card.creators:
    facts.append(("Creators", ", ".join(
        _text(c.name + (f" <{c.email}>" if c.email else ""))
        for c in card.creators)))
  if card.version:
    facts.append(("Version", _text(card.version)))
  if card.url:
    facts.append(("URL", _text(card.url)))
  if card.keywords:
    facts.append(("Keywords", ", ".join(_text(k) for k in card.keywords)))
  kind = ("SequenceExample" if info.record == "sequence_example"
          else "Example")
  facts.append(("Records", f"`tf.train.{kind}`, "
                f"{_compression(info)}; dataset name {_code(info.name)}"))
  facts.append(("Built by", _text(
      f"{info.tool.name} {info.tool.version} from "
      f"{info.counts.rows_read:,} rows of {info.inputs.format} input")))
  lines += [f"- **{k}:** {v}" for k, v in facts]
  return lines + [""]


def _compression(info: DatasetInfo) -> str:
  return of_dataset(info).shards_text


def _splits(info: DatasetInfo) -> List[str]:
  lines = ["## Splits", "", "| split | records | shards | bytes |",
           "|---|---:|---:|---:|"]
  transformed = info.transform.splits if info.transform else {}
  for label, splits in (("", info.splits), (" (transformed)", transformed)):
    for name, split in sorted(splits.items()):
      lines.append(f"| {_cell(name)}{label} | {split.num_records:,} | "
                   f"{split.num_shards} | {_bytes(split.num_bytes)} |")
  return lines + [""]


def _features(info: DatasetInfo) -> List[str]:
  rows = feature_rows(info)
  split = training_split(list(info.splits)) if info.splits else ""
  sequence = info.record == "sequence_example"
  # (The card's column says "part" for the section.)
  head = "| feature | " + ("part | " if sequence else "") + \
      f"type | missing ({split}) | mean or top value |"
  lines = ["## Features", "", head,
           "|---|" + ("---|" if sequence else "") + "---|---:|---|"]
  for r in rows:
    missing = "" if r["missing"] is None else f"{r['missing']:.1%}"
    section = f"{r['section']} | " if sequence else ""
    lines.append(f"| {_code(r['name'], cell=True)} | {section}"
                 f"{_cell(r['type'])} | {missing} | {_cell(r['value'])} |")
  if info.label:
    lines += ["", f"Label: {', '.join(_code(n) for n in info.label)}."]
  return lines + [""]


def _quality(info: DatasetInfo) -> List[str]:
  lines = ["## Rejected rows and anomalies", ""]
  rejected = info.counts.rows_rejected
  if rejected:
    lines.append(f"{rejected:,} of {info.counts.rows_read:,} input rows "
                 "were rejected; `errors/` holds each with its reason. "
                 "The most frequent reasons:")
    lines.append("")
    lines += [f"- {r.rows:,} rows: {_text(r.reason)}"
              for r in info.errors.reasons[:5]]
  else:
    lines.append(f"No input row was rejected ({info.counts.rows_read:,} "
                 "read).")
  found = info.anomalies.found if info.anomalies else ()
  lines.append("")
  if info.anomalies is None:
    lines.append("The schema declares no expectations (`expect:`).")
  elif found:
    lines.append(f"{len(found)} anomal{'y' if len(found) == 1 else 'ies'} "
                 "(published with `--on-anomaly warn`):")
    lines += [f"- {_text(a.line())}" for a in found]
  else:
    lines.append("Every expectation of the schema holds.")
  return lines + [""]


def _rai(card: Card) -> List[str]:
  given = dict(card.rai)
  lines = ["## Responsible AI", ""]
  for key in RAI_FIELDS:
    if key in given:
      lines.append(f"- **{_RAI_TITLES[key]}:** {_text(given[key])}")
  absent = [k for k in RAI_FIELDS if k not in given]
  if absent:
    lines.append(f"- _Not given (card: rai: {', '.join(absent)})._")
  return lines + [""]


_DTYPES = {"int64": "tf.int64", "float32": "tf.float32",
           "string": "tf.string"}


def _spec(entry: Dict[str, Any]) -> str:
  """One feature's parsing spec as Python (schema.spec's JSON form)."""
  kind, dtype = entry["kind"], _DTYPES.get(entry["dtype"], entry["dtype"])
  if kind == "VarLenFeature":
    return f"tf.io.VarLenFeature({dtype})"
  if kind == "RaggedFeature":
    return f"tf.io.RaggedFeature({dtype})"
  shape = entry.get("shape", [])
  if kind == "FixedLenSequenceFeature":
    missing = ", allow_missing=True" if entry.get("allow_missing") else ""
    return f"tf.io.FixedLenSequenceFeature({shape}, {dtype}{missing})"
  default = entry.get("default_value")
  extra = f", default_value={default!r}" if default is not None else ""
  return f"tf.io.FixedLenFeature({shape}, {dtype}{extra})"


def _spec_lines(info: DatasetInfo) -> List[str]:
  spec = info.feature_spec
  variables = ((("context", spec.get("context", {})),
                ("sequence", spec.get("sequence", {})))
               if info.record == "sequence_example" else (("spec", spec),))
  lines = []
  for variable, entries in variables:
    lines.append(f"{variable} = {{")
    lines += [f"    {_literal(name)}: {_spec(entry)},"
              for name, entry in sorted(entries.items())]
    lines.append("}")
  return lines


def _loading(info: DatasetInfo) -> List[str]:
  raw = bool(info.splits)  # (a transform: may keep no raw records)
  splits = info.splits or (info.transform.splits if info.transform else {})
  split = training_split(list(splits)) or "train"
  fmt = of_dataset(info)
  gzip = fmt.gzip
  transformed = "" if raw else ", transformed=True"
  lines = ["## Loading it", "", "With tf.data (`pip install beam-tfrecords`, "
           "in this folder):", "", "```python", "import beam_tfrecords as btr",
           f'ds = btr.load(".", split={_literal(split)}{transformed})'
           "    # parsed feature dicts", "```", ""]
  if raw and fmt.tf_data and info.splits.get(
      split) and info.splits[split].shards:
    suffix = SHARDS.suffix_of(info.splits[split].shards[0].file)
    lines += ["Or with TensorFlow alone (dataset.json's `feature_spec`):",
              "", "```python", "import glob, tensorflow as tf"]
    lines += _spec_lines(info)
    parse = ("tf.io.parse_single_sequence_example(r, context, sequence)"
             if info.record == "sequence_example"
             else "tf.io.parse_single_example(r, spec)")
    pattern = _literal(SHARDS.glob(glob.escape(split), suffix))
    lines += [f"files = sorted(glob.glob({pattern}))",
              "ds = tf.data.TFRecordDataset(files" + (
                  ', compression_type="GZIP")' if gzip else ")")
              + f".map(lambda r: {parse})", "```", ""]
  if raw:
    lines += ["With PyTorch (the torch extra; no TensorFlow):", "",
              "```python", "from beam_tfrecords.read.torch import Dataset",
              f'ds = Dataset(".", {_literal(split)})', "```", ""]
  if info.options.tfds:
    lines += ["With TensorFlow Datasets:", "", "```python",
              "import tensorflow_datasets as tfds",
              'ds = tfds.builder_from_directory(".").as_dataset(split='
              f'{_literal(split)})', "```", ""]
  elif info.croissant and any(name.startswith(PREVIEW_DIR + "/")
                              for name in info.file_checksums()):
    lines += ["With TensorFlow Datasets, from `croissant.json` (its "
              "records are the Parquet preview of each split, its first "
              "records; every shard is described there with its "
              "checksum):", "",
              "```python", "import tensorflow_datasets as tfds",
              "from apache_beam.options.pipeline_options import "
              "PipelineOptions",
              "builder = tfds.dataset_builders.CroissantBuilder(",
              f'    jsonld="{CROISSANT_FILE}", record_set_ids=["records"],',
              '    file_format="tfrecord", data_dir="tfds")',
              "builder.download_and_prepare(download_config=tfds.download."
              "DownloadConfig(",
              "    beam_options=PipelineOptions(flags=[])))",
              f"ds = builder.as_dataset(split={_literal(split)})", "```",
              ""]
  lines += ["Every file's SHA-256 is in dataset.json; `beam-tfrecords "
            "verify .` checks them all.", ""]
  return lines


def render_card(info: DatasetInfo) -> str:
  """README.md's text."""
  card = Card.from_dict(info.schema.get("card"))
  lines = (_head(info, card) + _splits(info) + _features(info)
           + _quality(info) + _rai(card))
  if card.citation:
    # A code block shows its text as it is; its fence outlasts any run of
    # backticks in the citation.
    fence = _fence(card.citation)
    lines += ["## Citation", "", fence, card.citation, fence, ""]
  lines += _loading(info)
  return "\n".join(lines).rstrip("\n") + "\n"

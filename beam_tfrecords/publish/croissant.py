"""croissant.json: a finished dataset described in MLCommons Croissant 1.1,
so that others can find it (Google Dataset Search, Hugging Face, Kaggle
index Croissant), check it (every file with its SHA-256) and cite it.

    data = croissant_json(info, dataset_json, "2026-11-28T10:00:00Z")

Generated from the typed dataset.json (`DatasetInfo`):

* the dataset: the schema's name and description, the card (license,
  creators, citation, url, keywords, version, the rai: fields),
  `isLiveDataset` for a scheduled build, the build time (`dateCreated`,
  `datePublished`) and provenance (`prov:wasDerivedFrom`: every input
  file with its size and modification time; `prov:wasGeneratedBy`: the build, its
  tool and version, its input fingerprint and build key);
* `distribution`: a FileObject per published file (shards, indexes,
  errors/, the report, the card, dataset.json, ...) with `sha256`,
  `contentSize` and `encodingFormat` (`application/x-tfrecord` for the
  shards, as Google Dataplex writes it); a FileSet of each split's shards;
  the FileSet of the Parquet previews;
* `recordSet`: the splits as a `cr:Split` RecordSet, and `records`: a
  field per stored feature (`dataType`, `isArray` / `arrayShape`, its
  description) with the training split's statistics as annotations in
  DDI-CDI's SummaryStatisticType vocabulary, read from the previews.

`checksums_of(data, file)` reads one back (publish.verify checks it
against dataset.json), its shape checked: a croissant.json of another
shape is a MalformedFileError naming it.

Why the records come from a Parquet preview. Croissant's tools read CSV,
JSON and Parquet, not TFRecord: a RecordSet whose fields read the shards
passes `mlcroissant validate` (which only builds the graph) but fails
whatever iterates records (the NeurIPS checker, TFDS's CroissantBuilder,
`mlcroissant.Dataset.records`). Leaving the records out would pass too,
but say nothing of the features a consumer can check. So `records` reads
`preview/<split>.parquet` (sinks.preview: the first records of each split,
decoded), and both the RecordSet and the files say they are a preview;
the shards are described file by file for readers of TFRecords.
"""

import datetime
import json
import re
from typing import Any, Collection, Dict, List, Optional

from beam_tfrecords.core.info import DatasetInfo, FileSum
from beam_tfrecords.core.json_shapes import check, parse
from beam_tfrecords.core.layout import (ANOMALIES_FILE, CARD_FILE,
                                        DATASET_JSON, ERRORS_DIR, INDEX_DIR,
                                        PREVIEW_DIR, REPORT_FILE,
                                        STATISTICS_FILE, TFMD_FILE,
                                        preview_file)
from beam_tfrecords.core.shard_formats import of_file
from beam_tfrecords.core.shard_names import SHARDS
from beam_tfrecords.schema.card_section import Card
from beam_tfrecords.schema.split_rule import training_split
from beam_tfrecords.sinks.preview import (PREVIEW_RECORDS, Column,
                                          preview_columns)

__all__ = ["croissant_json", "checksums_of", "CONTEXT", "CONFORMS_TO",
           "RECORDS", "SPLITS",
           "STATISTIC_TYPES"]

CONFORMS_TO = "http://mlcommons.org/croissant/1.1"
RECORDS, SPLITS, PREVIEWS = "records", "splits", "preview-parquet"
# Croissant 1.1's context (as mlcroissant writes it), with the terms this
# file uses besides: without "isArray" and "arrayShape" in it, those
# properties would be read as schema.org's and silently lost.
CONTEXT: Dict[str, Any] = {
    "@language": "en", "@vocab": "https://schema.org/",
    "annotation": "cr:annotation", "arrayShape": "cr:arrayShape",
    "citeAs": "cr:citeAs", "column": "cr:column",
    "conformsTo": "dct:conformsTo", "containedIn": "cr:containedIn",
    "cr": "http://mlcommons.org/croissant/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "ddi-stats": ("http://rdf-vocabulary.ddialliance.org/cv/"
                  "SummaryStatisticType/2.1.2/"),
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract", "field": "cr:field",
    "fileObject": "cr:fileObject", "fileProperty": "cr:fileProperty",
    "fileSet": "cr:fileSet", "format": "cr:format",
    "includes": "cr:includes", "isArray": "cr:isArray",
    "isLiveDataset": "cr:isLiveDataset", "jsonPath": "cr:jsonPath",
    "key": "cr:key", "md5": "cr:md5", "parentField": "cr:parentField",
    "path": "cr:path", "prov": "http://www.w3.org/ns/prov#",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "recordSet": "cr:recordSet", "references": "cr:references",
    "regex": "cr:regex", "repeated": "cr:repeated", "replace": "cr:replace",
    "samplingRate": "cr:samplingRate", "sc": "https://schema.org/",
    "separator": "cr:separator", "source": "cr:source",
    "subField": "cr:subField", "transform": "cr:transform"}
# DDI-CDI SummaryStatisticType codes: the mean and maximum as Croissant
# 1.1's specification uses them; the minimum and valid cases as the
# Dataverse Croissant exporter writes them.
STATISTIC_TYPES = {"mean": "7975ed0", "max": "8321e79", "min": "a1d0ec6",
                   "valid": "c646dd8"}
# Split names Croissant has a term for.
_SPLIT_TERMS = {"train": "cr:TrainingSplit", "training": "cr:TrainingSplit",
                "eval": "cr:ValidationSplit", "validation": "cr:ValidationSplit",
                "valid": "cr:ValidationSplit", "dev": "cr:ValidationSplit",
                "test": "cr:TestSplit"}
# The other files of a dataset folder (a shard's is its format's).
_FORMATS = ((".parquet", "application/x-parquet"),
            (".jsonl", "application/jsonlines"),
            (".json", "application/json"), (".html", "text/html"),
            (".md", "text/markdown"), (".pbtxt", "text/plain"),
            (".idx", "text/plain"), (".pb", "application/x-protobuf"))


def _format(name: str, info: DatasetInfo) -> str:
  if _is_shard(name, info):
    return of_file(name).media_type
  return next((kind for suffix, kind in _FORMATS if name.endswith(suffix)),
              "application/octet-stream")


def _is_shard(name: str, info: DatasetInfo) -> bool:
  """Whether a listed file is one of the records' shards (raw or
  transformed)."""
  return name in {s.file for s in info.shards()}


def _what(name: str, info: DatasetInfo) -> str:
  """A FileObject's description."""
  kind = ("SequenceExample" if info.record == "sequence_example"
          else "Example")
  if name == DATASET_JSON:
    return ("beam-tfrecords' description: schema, feature spec, counts, "
            "every file's SHA-256")
  if name.startswith(PREVIEW_DIR + "/"):
    split = name[len(PREVIEW_DIR) + 1:].rsplit(".", 1)[0]
    return (f"a preview: the first records (at most {PREVIEW_RECORDS}) of "
            f"the {split} split, decoded to columns")
  if name.startswith(INDEX_DIR + "/"):
    return "the index of a shard's gzip members (random access)"
  if name.startswith(ERRORS_DIR + "/"):
    return "rejected input rows (JSON lines), each with its reason"
  if _is_shard(name, info):
    return (f"a shard of serialized tf.train.{kind} records"
            + of_file(name).shard_note)
  return {CARD_FILE: "the dataset card", REPORT_FILE: "the report",
          STATISTICS_FILE: "TensorFlow Data Validation's statistics",
          TFMD_FILE: "TensorFlow Metadata's schema",
          ANOMALIES_FILE: "the expectations checked"}.get(
              name, "a file of the dataset")


def _file_object(name: str, size: Optional[int], sha: Optional[str],
                 info: DatasetInfo) -> Dict[str, Any]:
  out: Dict[str, Any] = {"@type": "cr:FileObject", "@id": name,
                         "name": name, "description": _what(name, info),
                         "contentUrl": name,
                         "encodingFormat": _format(name, info)}
  if size is not None:
    out["contentSize"] = f"{size} B"
  if sha is not None:
    out["sha256"] = sha
  return out


def _shard_sets(info: DatasetInfo) -> List[Dict[str, Any]]:
  out = []
  for prefix, splits in (("", info.splits), ("transformed/", (
      info.transform.splits if info.transform else {}))):
    for split, s in sorted(splits.items()):
      if not s.shards:
        continue
      suffix = SHARDS.suffix_of(s.shards[0].file)
      what = "transformed " if prefix else ""
      out.append({
          "@type": "cr:FileSet", "@id": f"shards-{prefix}{split}",
          "name": f"shards-{prefix}{split}",
          "description": (
              f"every shard of the {what}{split} split "
              f"({s.num_records} records), each a FileObject with its "
              "SHA-256 above; read them with tf.data.TFRecordDataset"
              + ("(files, compression_type='GZIP')" if of_file(
                  s.shards[0].file).gzip else "(files)")
              + " or beam_tfrecords"),
          "encodingFormat": _format(s.shards[0].file, info),
          "includes": prefix + SHARDS.glob(split, suffix)})
  return out


def _distribution(info: DatasetInfo, dataset_json: FileSum
                  ) -> List[Dict[str, Any]]:
  files = [_file_object(DATASET_JSON, dataset_json.num_bytes,
                        dataset_json.sha256, info)]
  files += [_file_object(name, size, sha, info)
            for name, (size, sha) in sorted(info.file_checksums().items())]
  out = files + _shard_sets(info)
  if _previews(info):
    out.append({"@type": "cr:FileSet", "@id": PREVIEWS, "name": PREVIEWS,
                "description": "the previews of the splits (the records "
                "of the RecordSet 'records')",
                "encodingFormat": "application/x-parquet",
                "includes": f"{PREVIEW_DIR}/*.parquet"})
  return out


def _previews(info: DatasetInfo) -> List[str]:
  """The splits with a preview file."""
  return [split for split in sorted(info.splits)
          if preview_file(split) in (info.checksums or {})]


def _data_type(column: Column, decl: Dict[str, Any]) -> str:
  if column.kind == "int64":
    return "cr:Int64"
  if column.kind == "float32":
    return "cr:Float32"
  if decl.get("type") == "image" and decl.get("encode") != "raw":
    return "sc:ImageObject"  # (a stored image file: mlcroissant decodes it)
  return "sc:Text"  # text; bytes (raw pixels, tensors) come as they are


def _statistics(info: DatasetInfo, name: str) -> List[Dict[str, Any]]:
  split = training_split(list(info.splits)) if info.splits else None
  s = (info.statistics or {}).get(split or "", {}).get(name)
  if s is None:
    return []
  values = {"valid": s.present, "min": s.min, "max": s.max, "mean": s.mean}
  out = []
  for key, value in values.items():
    if value is None:
      continue
    entry: Dict[str, Any] = {
        # ("#" is in no feature name: no field has this id)
        "@type": "cr:Field", "@id": f"{RECORDS}/{name}#{key}",
        "name": f"{key} ({split} split)", "value": value,
        "dataType": f"ddi-stats:{STATISTIC_TYPES[key]}"}
    if key in ("min", "max"):
      entry["equivalentProperty"] = f"sc:{key}Value"
    out.append(entry)
  return out


def _field(column: Column, info: DatasetInfo,
           declared: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
  decl = declared.get(column.name, {})
  what = decl.get("description") or (
      f"{decl.get('type', column.kind)} feature"
      if decl else f"{column.kind} (derived)")
  if column.steps:
    what += "; a feature list: one list of values per step"
  out: Dict[str, Any] = {
      "@type": "cr:Field", "@id": f"{RECORDS}/{column.name}",
      "name": column.name, "description": what,
      "dataType": _data_type(column, decl),
      "source": {"fileSet": {"@id": PREVIEWS},
                 "extract": {"column": column.name}}}
  if column.array_shape:
    out.update(isArray=True, arrayShape=column.array_shape)
  annotations = _statistics(info, column.name)
  if annotations:
    out["annotation"] = annotations
  return out


def _unused(wanted: str, taken: Collection[str]) -> str:
  """`wanted`, or it with _ appended until no feature's field has it (a
  feature may be named split)."""
  while wanted in taken:
    wanted += "_"
  return wanted


def _split_names(info: DatasetInfo) -> List[str]:
  """The splits: the records', else the transformed ones' (a transform:
  that keeps no raw records)."""
  return sorted(info.splits or (info.transform.splits if info.transform
                                else {}))


def _record_sets(info: DatasetInfo) -> List[Dict[str, Any]]:
  splits = _split_names(info)
  if not splits:  # (a RecordSet's data may not be empty)
    return []
  out: List[Dict[str, Any]] = [{
      "@type": "cr:RecordSet", "@id": SPLITS, "name": SPLITS,
      "description": "the dataset's splits", "dataType": "cr:Split",
      "key": {"@id": f"{SPLITS}/name"},
      "field": [
          {"@type": "cr:Field", "@id": f"{SPLITS}/name", "name": "name",
           "description": "the split's name", "dataType": "sc:Text"},
          {"@type": "cr:Field", "@id": f"{SPLITS}/url", "name": "url",
           "description": "Croissant's term for the split",
           "dataType": "sc:URL"}],
      "data": [{f"{SPLITS}/name": name,
                f"{SPLITS}/url": _SPLIT_TERMS.get(name.lower())}
               for name in splits]}]
  previewed = _previews(info)
  if not previewed:
    return out
  names = "|".join(re.escape(s) for s in previewed)
  declared = info.declarations()
  columns = preview_columns(info)
  split_field = _unused(f"{RECORDS}/split", {f"{RECORDS}/{c.name}"
                                            for c in columns})
  fields = [{
      "@type": "cr:Field", "@id": split_field,
      "name": split_field[len(RECORDS) + 1:],
      "description": "the split the record belongs to",
      "dataType": "sc:Text", "references": {"field": {"@id":
                                                       f"{SPLITS}/name"}},
      "source": {"fileSet": {"@id": PREVIEWS},
                 "extract": {"fileProperty": "fullpath"},
                 # (mlcroissant applies it to the path and to the bare
                 # split name: both match)
                 "transform": {"regex": f"^(?:{PREVIEW_DIR}/)?({names})"
                                        r"(?:\.parquet)?$"}}}]
  fields += [_field(c, info, declared) for c in columns]
  kind = ("SequenceExample" if info.record == "sequence_example"
          else "Example")
  out.append({
      "@type": "cr:RecordSet", "@id": RECORDS, "name": RECORDS,
      "description": (
          f"the records as tf.train.{kind} features, read from the preview "
          f"of each split (its first records, at most {PREVIEW_RECORDS}); "
          "every record is in the shards"),
      "field": fields})
  return out


def _provenance(info: DatasetInfo, built: str) -> Dict[str, Any]:
  inputs = info.inputs
  derived = [{"@type": "prov:Entity", "name": f.path,
              "contentSize": f"{f.num_bytes} B",
              **({"dateModified": _utc(f.modified)}
                 if f.modified is not None else {})}
             for f in inputs.files]
  activity: Dict[str, Any] = {
      "@type": "prov:Activity", "name": f"{info.tool.name} build",
      "prov:endedAtTime": built,
      "prov:wasAssociatedWith": {
          "@type": "prov:SoftwareAgent",
          "name": f"{info.tool.name} {info.tool.version}"},
      "description": (f"read {info.counts.rows_read} rows "
                      f"({inputs.format}); wrote "
                      f"{info.counts.records_written} records, rejected "
                      f"{info.counts.rows_rejected} rows")}
  identifiers = []
  if inputs.fingerprint:
    identifiers.append(f"input fingerprint {inputs.fingerprint}")
  if info.build_key:
    identifiers.append(f"build key {info.build_key}")
  if identifiers:
    activity["identifier"] = identifiers
  out: Dict[str, Any] = {"prov:wasGeneratedBy": activity}
  if derived:
    out["prov:wasDerivedFrom"] = derived
  elif inputs.source:
    out["prov:wasDerivedFrom"] = [{"@type": "prov:Entity",
                                   "name": inputs.source}]
  return out


def _utc(seconds: float) -> str:
  return datetime.datetime.fromtimestamp(
      int(seconds), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _card(card: Card) -> Dict[str, Any]:
  out: Dict[str, Any] = {}
  if card.title:
    out["alternateName"] = card.title
  if card.license:
    out["license"] = card.license
  if card.creators:
    out["creator"] = [{"@type": "sc:Person", **c.to_dict()}
                      for c in card.creators]
  if card.citation:
    out["citeAs"] = card.citation
  if card.url:
    out["url"] = card.url
  if card.keywords:
    out["keywords"] = list(card.keywords)
  if card.version:
    out["version"] = card.version
  for key, text in card.rai:
    out[f"rai:{key}"] = text
  return out


def croissant_json(info: DatasetInfo, dataset_json: FileSum, built: str, *,
                   live: bool = False) -> bytes:
  """croissant.json's bytes.

  Args:
    info: the dataset.json written (with every file's checksum).
    dataset_json: dataset.json's own bytes and SHA-256.
    built: the build time (ISO 8601, UTC).
    live: a scheduled build's (isLiveDataset).
  """
  card = Card.from_dict(info.schema.get("card"))
  description = info.schema.get("description") or (
      f"{info.name}: {info.counts.records_written} "
      f"tf.train.{'SequenceExample' if info.record == 'sequence_example' else 'Example'} "
      f"records built by {info.tool.name} (the schema gives no "
      "description)")
  out: Dict[str, Any] = {
      "@context": CONTEXT, "@type": "sc:Dataset", "name": info.name,
      "description": description, "conformsTo": CONFORMS_TO,
      **_card(card),
      "dateCreated": built, "datePublished": built[:10],
      "isLiveDataset": live,
      **_provenance(info, built),
      "distribution": _distribution(info, dataset_json),
      "recordSet": _record_sets(info)}
  return (json.dumps(out, indent=2, ensure_ascii=False) + "\n").encode(
      "utf-8")


# What verify reads back of croissant.json: the distribution's entries,
# and of each FileObject its path and SHA-256 (core.json_shapes).
_READ_SHAPE = {"distribution": [{"@type?": str}]}
_FILE_OBJECT = {"contentUrl": str, "sha256?": str}
_FIX = (" (not a croissant.json a build writes: build the dataset again "
        "to write it anew)")


def checksums_of(data: bytes, file: str) -> Dict[str, Optional[str]]:
  """{path: SHA-256 (None: none given)} of the files croissant.json's
  bytes describe (its distribution's FileObjects).

  Raises:
    MalformedFileError: not UTF-8 JSON of croissant.json's shape; the
      message names `file` and the key.
  """
  described = parse(data, file, _FIX)
  check(described, _READ_SHAPE, file, hint=_FIX)
  out = {}
  for i, entry in enumerate(described["distribution"]):
    if entry.get("@type") == "cr:FileObject":
      check(entry, _FILE_OBJECT, file, f"distribution[{i}]", _FIX)
      out[entry["contentUrl"]] = entry.get("sha256")
  return out

"""beam_tfrecords/inspect/report.py, on values: the overview table at the
top of the report, from a dataset.json alone (no statistics.pb, no
shards)."""

import re

from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.inspect.report import render_report


def _info(schema, spec, statistics=None, record="example"):
  """A DatasetInfo of one split, "train", of 4 records and no shards."""
  return DatasetInfo.from_json({
      "name": "u", "record": record,
      "schema": dict(schema, name="u", record=record), "feature_spec": spec,
      "splits": {"train": {"records": 4, "bytes": 0, "shards": []}},
      "counts": {"rows_read": 4, "rows_written": 4, "rows_rejected": 0,
                 "rows_dropped": 0, "records_written": 4},
      "errors": {"rows": 0, "files": [], "reasons": []},
      "inputs": {"format": "csv", "patterns": [], "files": [],
                 "fingerprint": None},
      "options": {"num_shards": {"train": 1},
                  "max_shard_bytes": {"train": None},
                  "sink": "deterministic",
                  "statistics": statistics is not None},
      "split_rule": {"kind": "none", "splits": ["train"]},
      "tool": {"name": "beam-tfrecords", "version": "0"},
      **({"statistics": {"train": statistics}} if statistics else {})})


def _rows(page):
  """{feature: its overview row's HTML}, in the table's order."""
  table = re.search(r"<table id='overview'>(.*?)</table>", page, re.S)
  return dict(re.findall(r'<tr data-feature="([^"]+)">(.*?)</tr>',
                         table.group(1), re.S))


SCHEMA = {"features": {
    "picture": {"type": "image", "source": "path"},
    "grid": {"type": "tensor", "dtype": "float32", "shape": [2, 3],
             "storage": "list"},
    "kind": {"type": "string", "vocabulary": "auto"},
    "tags": {"type": "string", "shape": [-1]},
    "blob": {"type": "bytes"}}}
SPEC = {"picture": {"kind": "FixedLenFeature", "dtype": "string",
                    "shape": []},
        "picture_height": {"kind": "FixedLenFeature", "dtype": "int64",
                           "shape": []},
        "grid": {"kind": "FixedLenFeature", "dtype": "float32",
                 "shape": [2, 3]},
        "kind": {"kind": "FixedLenFeature", "dtype": "string", "shape": []},
        "kind_index": {"kind": "FixedLenFeature", "dtype": "int64",
                       "shape": []},
        "tags": {"kind": "VarLenFeature", "dtype": "string"},
        "blob": {"kind": "VarLenFeature", "dtype": "string"}}


def test_the_overview_gives_each_feature_its_declared_type():
  rows = _rows(render_report("/nowhere", _info(SCHEMA, SPEC)))
  assert list(rows) == sorted(SPEC)
  types = {n: re.search(r'<td class="type" data-type="([^"]+)" '
                        r'data-shape="([^"]*)"', r).groups()
           for n, r in rows.items()}
  assert types == {"picture": ("image", "[]"),
                   "picture_height": ("int64", "[]"),
                   "grid": ("tensor", "[2, 3]"), "kind": ("string", "[]"),
                   "kind_index": ("int64", "[]"), "tags": ("string", "[-1]"),
                   "blob": ("bytes", "[]")}
  assert ">int64 <span class=\"muted\">of picture</span>" in \
      rows["picture_height"]
  assert ">int64 <span class=\"muted\">of kind</span>" in rows["kind_index"]
  for name, row in rows.items():  # statistics off: name and type only
    assert f'<a href="#feature-{name}">{name}</a>' in row
    assert "data-missing" not in row and "<svg" not in row
    assert row.endswith('<td class="muted" colspan="3">no statistics</td>')


def test_a_sequence_overview_says_context_or_sequence():
  schema = {"context": {"length": {"derive": "length", "type": "int64"}},
            "sequence": {"tokens": {"type": "int64", "required": True}}}
  spec = {"context": {"length": {"kind": "FixedLenFeature",
                                 "dtype": "int64", "shape": []}},
          "sequence": {"tokens": {"kind": "FixedLenSequenceFeature",
                                  "dtype": "int64", "shape": []}}}
  rows = _rows(render_report("/nowhere", _info(schema, spec,
                                               record="sequence_example")))
  assert list(rows) == ["length", "tokens"]
  assert 'data-part="context">int64 <span class="muted">context</span>' \
      in rows["length"]
  assert 'data-part="sequence">int64 <span class="muted">sequence</span>' \
      in rows["tokens"]


def test_the_overview_numbers_are_dataset_jsons_statistics():
  statistics = {
      "grid": {"present": 3, "missing": 1, "values": 18, "mean": 0.1},
      "tags": {"present": 2, "missing": 2, "values": 5,
               "top": [["b\"<&", 3], ["a", 2]], "top_exact": True},
      "picture": {"present": 4, "missing": 0, "values": 4,
                  "top": [["\\x89PNG", 1]], "long_values": 3}}
  rows = _rows(render_report("/nowhere", _info(SCHEMA, SPEC, statistics)))
  assert '<td class="missing num" data-missing="1" data-records="4" ' \
         'title="1 of 4 records">25.0%</td>' in rows["grid"]
  assert '<td class="value" data-mean="0.1">mean 0.1</td>' in rows["grid"]
  # Escaped; its share of the values (3 of 5).
  assert '<td class="value" data-top="b&quot;&lt;&amp;" ' \
         'data-top-count="3" data-values="5">b&quot;&lt;&amp; ' \
         '<span class="muted">60.0%</span></td>' in rows["tags"]
  assert 'data-missing="2" data-records="4" title="2 of 4 records">50.0%' \
      in rows["tags"]
  # An image's bytes have no top value to show; no statistics.pb, no
  # charts.
  assert rows["picture"].endswith('<td class="value">—</td>'
                                  '<td class="chart">—</td>')
  assert rows["tags"].endswith('<td class="chart">—</td>')
  assert rows["blob"].endswith("no statistics</td>")  # not in statistics

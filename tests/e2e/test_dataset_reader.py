"""btr.open: one handle reads a finished dataset (or a window) every way,
each way giving the same records, as the datasets were when opened."""

import csv
import json
import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords import DatasetReplacedError
from beam_tfrecords.read.dataset_reader import DatasetReader

from tests.helpers.penguins import PENGUINS


SCHEMA = {
    "name": "penguins",
    "features": {
        "row": {"type": "int64", "required": True},
        "species": {"type": "string", "required": True},
        "body_mass_g": {"type": "int64", "required": True},
    },
    "label": "species",
    "splits": {"hash": "row", "weights": {"train": 3, "eval": 1}},
}


def _build(folder, year, rows=None):
  """The penguins of one year, a row with a bad mass going to errors/."""
  with open(PENGUINS) as f:
    found = [dict(r, row=i) for i, r in enumerate(csv.DictReader(f))
             if r["year"] == year]
  folder.mkdir(parents=True, exist_ok=True)
  src = folder / f"{year}.csv"
  with open(src, "w", newline="") as f:
    w = csv.DictWriter(f, ["row", "species", "body_mass_g"],
                       extrasaction="ignore")
    w.writeheader()
    w.writerows(found[:rows])
    w.writerow({"row": 9999, "species": "Adelie", "body_mass_g": "heavy"})
  out = str(folder / f"{year}")
  btr.build(SCHEMA, str(src), out, num_shards=2, overwrite=True,
            max_bad_fraction=1.0)
  return out


@pytest.fixture(scope="module")
def years(tmp_path_factory):
  folder = tmp_path_factory.mktemp("open")
  return folder, [_build(folder, y) for y in ("2007", "2008")]


def test_one_handle_reads_every_way_and_agrees_with_itself(years, tf):
  _, (path, _) = years
  ds = btr.open(path)
  assert isinstance(ds, DatasetReader) and ds.paths == [path]
  assert ds.info == btr.dataset_info(path)
  assert ds.splits == ["eval", "train"] and ds.schema.label == ("species",)
  rows = {split: [r["row"] for r in ds.records(split)]
          for split in ds.splits}
  assert {s: len(r) for s, r in rows.items()} == {
      s: ds.num_records(s) for s in ds.splits}
  assert rows["train"] == [r["row"] for r in btr.iter_records(path)]
  parsed = [int(x["row"]) for x in ds.tf_dataset("train")]
  assert parsed == rows["train"]
  # as_supervised: the label the schema names, split off.
  features, label = next(iter(ds.tf_dataset("train", as_supervised=True)))
  assert "species" not in features and label.dtype == tf.string
  # Exact shares of two ranks: disjoint, the whole split together.
  shares = [list(ds.stream("train", rank=(r, 2))) for r in range(2)]
  assert sum(map(len, shares)) == len(rows["train"])
  assert abs(len(shares[0]) - len(shares[1])) <= 1
  whole = list(ds.stream("train"))
  assert shares[0] + shares[1] == whole
  errors = list(ds.errors())
  assert errors == _error_lines(path)
  assert len(errors) == ds.info.errors.rows
  [bad] = [e for e in errors if e["raw"]["row"] == "9999"]
  assert "could not parse 'heavy' as int64" in bad["reason"]
  assert "DatasetReader" in repr(ds) and "train: " in repr(ds)


def test_a_window_reads_as_one(years):
  folder, paths = years
  ds = btr.open(str(folder / "20*"))
  assert ds.paths == paths and len(ds.infos) == 2
  assert [r["row"] for r in ds.records("eval")] == [
      r["row"] for p in paths for r in btr.iter_records(p, "eval")]
  assert ds.num_records("eval") == sum(
      btr.dataset_info(p).splits["eval"].num_records for p in paths)
  assert list(ds.errors()) == [e for p in paths for e in _error_lines(p)]
  assert len([e for e in ds.errors() if e["raw"]["row"] == "9999"]) == 2


def test_the_handle_reads_the_datasets_as_they_were_when_opened(years):
  """A dataset replaced after open() is refused while read, never mixed
  with the new one: the handle holds the generation it opened."""
  folder, _ = years
  path = _build(folder / "replaced", "2009")
  ds = btr.open(path)
  _build(folder / "replaced", "2009", rows=20)  # another build, published
  with pytest.raises(DatasetReplacedError):
    list(ds.records("train"))
  assert len(list(btr.open(path).records("train"))) + len(
      list(btr.open(path).records("eval"))) == 20


def _error_lines(path):
  """The dead-letter entries as the files hold them, in the order
  dataset.json lists the files."""
  out = []
  for f in btr.dataset_info(path).errors.files:
    with open(os.path.join(path, f.file)) as lines:
      out += [json.loads(line) for line in lines]
  return out

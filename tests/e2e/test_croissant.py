"""croissant.json (issue 49): MLCommons' own validator accepts what a
build writes, the records it declares read back (the first records of
each split, from the Parquet preview) value for value, every FileObject's
SHA-256 is its file's, and TFDS's CroissantBuilder loads it."""

import datetime
import fnmatch
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.errors import InputError

from tests.helpers.cards import CARD, FLIGHTS
from tests.helpers.expectations import CARRIERS, DAY1, DAY2

mlc = pytest.importorskip("mlcroissant")

def _rows(path) -> int:
  import gzip
  with gzip.open(path, "rt") as f:
    return sum(1 for line in f if line.strip())


def _sha256(path) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _validate(path):
  """`mlcroissant validate`: (exit code, what it printed)."""
  run = subprocess.run(
      [os.path.join(os.path.dirname(sys.executable), "mlcroissant"),
       "validate", "--jsonld", os.path.join(path, "croissant.json")],
      capture_output=True, text=True, timeout=120, check=False)
  return run.returncode, run.stdout + run.stderr


@pytest.fixture(scope="module")
def flights(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("flights") / "out")
  btr.build(FLIGHTS, [DAY1, DAY2], out, num_shards={"train": 3, "eval": 1},
            croissant="required")
  with open(os.path.join(out, "croissant.json")) as f:
    return out, json.load(f)


def test_the_flights_croissant_passes_mlcroissant_without_a_warning(flights):
  out, _ = flights
  code, said = _validate(out)
  assert code == 0, said
  assert "warning" not in said.lower() and "error" not in said.lower(), said


def test_the_dataset_says_the_card_provenance_and_time(flights):
  out, described = flights
  info = btr.dataset_info(out)
  assert described["conformsTo"] == "http://mlcommons.org/croissant/1.1"
  assert (described["name"], described["alternateName"]) == (
      "flights", CARD["title"])
  assert described["description"] == FLIGHTS["description"]
  assert (described["license"], described["citeAs"], described["url"],
          described["keywords"], described["version"]) == (
              CARD["license"], CARD["citation"], CARD["url"],
              CARD["keywords"], CARD["version"])
  assert described["creator"] == [
      {"@type": "sc:Person", "name": "Hadley Wickham",
       "url": "https://github.com/hadley"},
      {"@type": "sc:Person", "name": "US Bureau of Transportation Statistics"}]
  for key, text in CARD["rai"].items():
    assert described[f"rai:{key}"] == text
  assert described["isLiveDataset"] is False
  # SOURCE_DATE_EPOCH (tests/conftest.py) is the build time.
  assert described["dateCreated"] == datetime.datetime.fromtimestamp(
      int(os.environ["SOURCE_DATE_EPOCH"]), datetime.timezone.utc
  ).strftime("%Y-%m-%dT%H:%M:%SZ")
  assert described["datePublished"] == described["dateCreated"][:10]
  assert [(e["name"], e["contentSize"], e["dateModified"])
          for e in described["prov:wasDerivedFrom"]] == [
              (path, f"{os.path.getsize(path)} B",
               datetime.datetime.fromtimestamp(
                   int(os.path.getmtime(path)), datetime.timezone.utc
               ).strftime("%Y-%m-%dT%H:%M:%SZ")) for path in (DAY1, DAY2)]
  activity = described["prov:wasGeneratedBy"]
  assert activity["prov:wasAssociatedWith"]["name"] == (
      f"beam-tfrecords {btr.__version__}")
  assert activity["identifier"] == [
      f"input fingerprint {info.inputs.fingerprint}",
      f"build key {info.build_key}"]
  assert activity["description"] == (
      f"read {_rows(DAY1) + _rows(DAY2)} rows (jsonl); wrote "
      f"{info.counts.records_written} "
      f"records, rejected {info.counts.rows_rejected} rows")


def test_every_file_object_is_its_file(flights):
  out, described = flights
  objects = {e["@id"]: e for e in described["distribution"]
             if e["@type"] == "cr:FileObject"}
  on_disk = sorted(
      os.path.relpath(os.path.join(root, f), out)
      for root, _, files in os.walk(out) for f in files)
  # Every published file but croissant.json itself and _SUCCESS.
  assert sorted(objects) == [n for n in on_disk
                             if n not in ("croissant.json", "_SUCCESS")]
  for name, entry in objects.items():
    path = os.path.join(out, name)
    assert entry["sha256"] == _sha256(path), name
    assert entry["contentSize"] == f"{os.path.getsize(path)} B", name
    assert entry["contentUrl"] == name
  assert objects["train-00000-of-00003.tfrecord.gz"]["encodingFormat"] == (
      "application/x-tfrecord")
  assert objects["preview/eval.parquet"]["encodingFormat"] == (
      "application/x-parquet")
  # A FileSet per split, whose glob names exactly its shards.
  sets = {e["@id"]: e for e in described["distribution"]
          if e["@type"] == "cr:FileSet"}
  assert sorted(sets) == ["preview-parquet", "shards-eval", "shards-train"]
  for split in ("train", "eval"):
    assert [n for n in on_disk if fnmatch.fnmatch(
        n, sets[f"shards-{split}"]["includes"])] == btr.dataset_info(
            out).splits[split].files


def test_the_fields_follow_the_schema_with_its_statistics(flights):
  out, described = flights
  info = btr.dataset_info(out)
  splits, records = described["recordSet"]
  assert splits["dataType"] == "cr:Split"
  assert splits["data"] == [
      {"splits/name": "eval", "splits/url": "cr:ValidationSplit"},
      {"splits/name": "train", "splits/url": "cr:TrainingSplit"}]
  fields = {f["name"]: f for f in records["field"]}
  assert [(n, f["dataType"], f.get("isArray")) for n, f in fields.items()] \
      == [("split", "sc:Text", None), ("arr_delay", "cr:Float32", None),
          ("carrier", "sc:Text", None), ("dep_delay", "cr:Float32", None),
          ("dest", "sc:Text", None), ("distance", "cr:Int64", None),
          ("flight", "cr:Int64", None), ("origin", "sc:Text", None),
          ("tailnum", "sc:Text", None)]
  stats = info.statistics["train"]["dep_delay"]
  assert {a["@id"].rsplit("#", 1)[1]: (a["dataType"], a["value"])
          for a in fields["dep_delay"]["annotation"]} == {
              "valid": ("ddi-stats:c646dd8", stats.present),
              "min": ("ddi-stats:a1d0ec6", stats.min),
              "max": ("ddi-stats:8321e79", stats.max),
              "mean": ("ddi-stats:7975ed0", stats.mean)}
  assert stats.missing > 0  # cancelled flights: the valid cases say it


def _plain(value):
  if isinstance(value, bytes):
    return value.decode("utf-8")
  if isinstance(value, (list, tuple)):
    return [_plain(v) for v in value]
  if isinstance(value, np.generic):
    return value.item()
  return value


def _declared_records(path, split):
  """croissant.json's records of a split, as {feature: value}."""
  dataset = mlc.Dataset(jsonld=os.path.join(path, "croissant.json"))
  out = []
  for record in dataset.records("records", filters={"records/split": split}):
    out.append({k.split("/", 1)[1]: v for k, v in record.items()
                if k != "records/split"})
  return out


def test_the_declared_records_are_the_first_records_of_each_split(flights):
  out, _ = flights
  for split in ("train", "eval"):
    declared = _declared_records(out, split)
    ours = list(btr.iter_records(out, split))[:100]
    assert len(declared) == min(100, btr.dataset_info(out).splits[
        split].num_records) == len(ours)
    for mine, theirs in zip(ours, declared):
      theirs = {k: _plain(v) for k, v in theirs.items()}
      for name in FLIGHTS["features"]:
        want = mine.get(name)
        got = theirs[name]
        if isinstance(want, float):
          assert np.float32(got) == np.float32(want), (name, mine, theirs)
        elif want is None:
          assert got is None or (isinstance(got, float) and np.isnan(got))
        else:
          assert got == want, (name, mine, theirs)
    assert {r["carrier"] for r in declared} <= {c.encode() for c in CARRIERS}


def _bundled(tmp_path, name):
  import importlib
  out = str(tmp_path / name)
  importlib.import_module(f"pipelines.{name}").run(["--output", out])
  return out


def test_sequences_and_images_read_back_as_croissant_records(tmp_path):
  """Each RecordSet's first record (what the NeurIPS checker reads), and
  every declared record against ours: feature lists as lists of steps,
  images decoded by mlcroissant to the pixels of the stored PNG."""
  from PIL import Image
  import io
  tokens, images = (_bundled(tmp_path, "tokens_labels"),
                    _bundled(tmp_path, "image_files"))
  for path in (tokens, images):
    code, said = _validate(path)
    assert code == 0 and "error" not in said.lower(), said
    dataset = mlc.Dataset(jsonld=os.path.join(path, "croissant.json"))
    for record_set in dataset.metadata.record_sets:
      assert next(iter(dataset.records(record_set.uuid)))
  declared = _declared_records(tokens, "train")
  ours = list(btr.iter_records(tokens, "train"))[:100]
  assert [(_plain(r["length"]), _plain(r["tokens"]), _plain(r["labels"]))
          for r in declared] == [
              (r["context"]["length"], r["feature_lists"]["tokens"],
               r["feature_lists"]["labels"]) for r in ours]
  with open(os.path.join(tokens, "croissant.json")) as f:
    fields = {f["name"]: f for f in json.load(f)["recordSet"][1]["field"]}
  assert (fields["tokens"]["isArray"], fields["tokens"]["arrayShape"]) == (
      True, "-1")
  declared = _declared_records(images, "train")
  ours = list(btr.iter_records(images, "train"))[:100]
  assert len(declared) == len(ours) > 0
  for mine, theirs in zip(ours, declared):
    assert theirs["image"].size == (mine["image_width"], mine["image_height"])
    assert np.array_equal(np.asarray(theirs["image"]), np.asarray(
        Image.open(io.BytesIO(mine["image"]))))
    assert _plain(theirs["label"]) == mine["label"]


def test_a_build_asked_for_croissant_says_what_its_schema_lacks(tmp_path):
  schema = {"name": "bare", "features": {"x": "int64"}}
  (tmp_path / "in.csv").write_text("x\n1\n")
  with pytest.raises(InputError) as e:
    btr.build(schema, str(tmp_path / "in.csv"), str(tmp_path / "out"),
              croissant="required")
  said = str(e.value)
  assert "--croissant required" in said and "nothing was read" in said
  assert "description: the schema's top-level `description:`" in said
  assert "license: `card: {license: ...}`" in said
  assert not (tmp_path / "out").exists()
  # The license alone is not enough either.
  with pytest.raises(InputError, match="description") as e:
    btr.build({**schema, "card": {"license": "MIT"}},
              str(tmp_path / "in.csv"), str(tmp_path / "out"),
              croissant="required")
  assert "license:" not in str(e.value)


def test_without_a_card_croissant_json_still_validates(tmp_path):
  out = _bundled(tmp_path, "movie_ratings")
  code, said = _validate(out)
  assert code == 0, said
  # What is missing is said as Croissant's recommendations, not errors.
  assert sorted(set(
      line.split('"')[1].rsplit("/", 1)[1] for line in said.splitlines()
      if "is recommended" in line)) == ["citeAs", "license", "version"]


def test_croissant_off_writes_neither_it_nor_the_preview(tmp_path):
  (tmp_path / "in.csv").write_text("x\n1\n2\n")
  out = str(tmp_path / "out")
  btr.build({"name": "bare", "features": {"x": "int64"}},
            str(tmp_path / "in.csv"), out, croissant="off")
  assert sorted(os.listdir(out)) == [
      "README.md", "_SUCCESS", "dataset.json", "errors", "index",
      "report.html", "schema.pbtxt", "statistics.pb",
      "statistics.state.json", "train-00000-of-00001.tfrecord.gz"]
  assert btr.dataset_info(out).croissant is None
  assert btr.verify(out).ok


def test_the_build_time_is_now_unless_source_date_epoch_says(tmp_path,
                                                            monkeypatch):
  monkeypatch.delenv("SOURCE_DATE_EPOCH")
  (tmp_path / "in.csv").write_text("x\n1\n")
  before = datetime.datetime.now(datetime.timezone.utc).replace(
      microsecond=0)
  btr.build({"name": "bare", "features": {"x": "int64"}},
            str(tmp_path / "in.csv"), str(tmp_path / "out"))
  after = datetime.datetime.now(datetime.timezone.utc)
  with open(tmp_path / "out" / "croissant.json") as f:
    described = json.load(f)
  built = datetime.datetime.strptime(described["dateCreated"],
                                     "%Y-%m-%dT%H:%M:%SZ").replace(
                                         tzinfo=datetime.timezone.utc)
  assert before <= built <= after
  assert described["prov:wasGeneratedBy"]["prov:endedAtTime"] == (
      described["dateCreated"])


def test_a_scheduled_build_is_a_live_dataset(tmp_path):
  from beam_tfrecords.cli import main
  day = tmp_path / "logs" / "20261121"
  day.mkdir(parents=True)
  (day / "in.csv").write_text("x\n1\n")
  schema = tmp_path / "s.yaml"
  schema.write_text("name: daily\nfeatures: {x: int64}\n")
  assert main(["build", "--schema", str(schema), "--input",
               str(tmp_path / "logs" / "{YYYY}{MM}{DD}" / "*.csv"),
               "--output", str(tmp_path / "out" / "{YYYY}{MM}{DD}"),
               "--date", "2026-11-21", "-q"]) == 0
  with open(tmp_path / "out" / "20261121" / "croissant.json") as f:
    assert json.load(f)["isLiveDataset"] is True


def test_tfds_croissant_builder_loads_the_declared_records(flights,
                                                           tmp_path):
  tfds = pytest.importorskip("tensorflow_datasets")
  from apache_beam.options.pipeline_options import PipelineOptions
  out, _ = flights
  builder = tfds.dataset_builders.CroissantBuilder(
      jsonld=os.path.join(out, "croissant.json"), record_set_ids=["records"],
      file_format="tfrecord", data_dir=str(tmp_path / "tfds"))
  builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
      beam_options=PipelineOptions(flags=[])))
  for split in ("train", "eval"):
    loaded = sorted(
        (r["carrier"].decode(), int(r["flight"]), r["origin"].decode())
        for r in builder.as_dataset(split=split).as_numpy_iterator())
    ours = sorted((r["carrier"], r["flight"], r["origin"])
                  for r in list(btr.iter_records(out, split))[:100])
    assert loaded == ours


def test_a_feature_named_split_keeps_its_column(tmp_path):
  """The records' split field takes another id when a feature is named
  split: both read back (JSON-LD would merge two nodes of one id)."""
  (tmp_path / "in.csv").write_text("split,x\n" + "".join(
      f"{i % 3},{i}\n" for i in range(10)))
  out = str(tmp_path / "out")
  btr.build({"name": "s", "features": {"split": "int64", "x": "int64"}},
            str(tmp_path / "in.csv"), out)
  with open(os.path.join(out, "croissant.json")) as f:
    described = json.load(f)
  ids = [f["@id"] for f in described["recordSet"][1]["field"]]
  assert ids == ["records/split_", "records/split", "records/x"]
  for record_set in described["recordSet"]:
    everything = [f["@id"] for f in record_set["field"]] + [
        a["@id"] for f in record_set["field"] for a in f.get("annotation", [])]
    assert len(everything) == len(set(everything))
  declared = mlc.Dataset(jsonld=os.path.join(out, "croissant.json"))
  rows = [(_plain(r["records/split"]), _plain(r["records/x"]),
           _plain(r["records/split_"])) for r in declared.records("records")]
  assert rows == [(i % 3, i, "train") for i in range(10)]

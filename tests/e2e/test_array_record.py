"""`--file-format array_record` (issue 47, part 1): ArrayRecord shards
built by the same pipeline from the same schema. Each shard holds the
records of the TFRecord build's shard of the same number, byte for byte
and in the same order (an Example and a SequenceExample schema); the files
are the same bytes on every run; Grain reads them with a global shuffle,
every record once; `--tfds` makes a dataset TFDS's `as_data_source()`
reads; counts, dead letters, statistics, the report, expectations and
publishing are those of a TFRecord build. Real array-record, Grain and
TFDS (the `array_record` and `tfds` extras; CI installs them)."""

import collections
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import beam_tfrecords as btr
from beam_tfrecords import AnomalyError, InputError
from beam_tfrecords.core.array_record_files import read_array_record
from beam_tfrecords.core.shard_reader import iter_tfrecords
from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.inspect.check import inspect_files, validate
from beam_tfrecords.core.info import listed_files
from beam_tfrecords.schema import load_schema

from tests.helpers.expectations import DAY1, SCHEMA as FLIGHTS
from tests.helpers.tfds import PENGUINS, ROOT, SCHEMA as PENGUINS_SCHEMA

if os.environ.get("BTR_REQUIRE_EXTRAS"):
  from array_record.python import array_record_module
  import grain
else:
  array_record_module = pytest.importorskip(
      "array_record.python.array_record_module")
  grain = pytest.importorskip("grain")

SCHEMAS, DATA = ROOT / "schemas", ROOT / "pipelines" / "data"
# (schema, input) of bundled pipelines: Examples, SequenceExamples from
# lists, and grouped SequenceExamples (their records travel as runs).
BUNDLED = {"movie_ratings": ("movie_ratings.yaml", "movie_ratings.csv"),
           "tokens_labels": ("tokens_labels.yaml", "tokens_labels.jsonl"),
           "user_events": ("user_events.yaml", "user_events.csv")}
SHARDS = 3


def _array_records(path):
  """Every record of one ArrayRecord file, by array-record's reader."""
  reader = array_record_module.ArrayRecordReader(str(path))
  try:
    n = reader.num_records()
    return list(reader.read(0, n)) if n else []
  finally:
    reader.close()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
  """The bundled inputs, movie_ratings with two rows it rejects."""
  folder = tmp_path_factory.mktemp("inputs")
  out = {}
  for name, (schema, data) in BUNDLED.items():
    path = folder / data
    shutil.copy(DATA / data, path)
    if name == "movie_ratings":
      with open(path, "a") as f:
        f.write("oops,Heat,7.0,Up,1.0,1.0\n,Heat,7.0,Up,1.0,1.0\n")
    out[name] = (str(SCHEMAS / schema), str(path))
  return out


@pytest.fixture(scope="module")
def builds(inputs, tmp_path_factory):
  """name -> (the TFRecord build, the ArrayRecord build, its rebuild)."""
  out = {}
  for name, (schema, data) in inputs.items():
    folder = tmp_path_factory.mktemp(name)
    paths = [str(folder / kind) for kind in ("tfrecord", "array_record",
                                             "again")]
    for path in paths:
      btr.build(schema, data, path, num_shards=SHARDS, max_bad_fraction=1.0,
                **({} if path == paths[0] else {
                    "file_format": "array_record"}))
    out[name] = paths
  return out


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_every_shard_holds_the_tfrecord_shards_records_in_order(builds,
                                                                name, tf):
  tfrecord, array_record, _ = builds[name]
  info = btr.dataset_info(array_record)
  want = btr.dataset_info(tfrecord)
  assert sorted(info.splits) == sorted(want.splits)
  total = 0
  for split, s in info.splits.items():
    assert s.files == [f.replace(".tfrecord.gz", ".array_record")
                       for f in want.splits[split].files]
    assert len(s.files) == SHARDS
    for shard, theirs in zip(s.shards, want.splits[split].shards):
      records = _array_records(os.path.join(array_record, shard.file))
      assert records == list(iter_tfrecords(
          os.path.join(tfrecord, theirs.file)))
      assert shard.num_records == len(records) == theirs.num_records
      assert shard.num_bytes == os.path.getsize(
          os.path.join(array_record, shard.file))
      assert shard.index is None  # ArrayRecord indexes itself
      # core's reader (for beam_tfrecords.read) gives the same records.
      assert list(read_array_record(
          os.path.join(array_record, shard.file))) == records
      total += len(records)
  assert total == info.counts.records_written > 0
  # The values, by TensorFlow's own parser.
  spec = btr.feature_spec(array_record)
  records = [r for split in sorted(info.splits)
             for f in info.splits[split].files
             for r in _array_records(os.path.join(array_record, f))]
  if name == "movie_ratings":
    ages = tf.io.parse_example(tf.constant(records), spec)["age"].numpy()
    with open(DATA / "movie_ratings.csv") as f:
      rows = f.read().splitlines()[1:]
    assert sorted(ages.tolist()) == sorted(int(r.split(",")[0])
                                           for r in rows)
  elif name == "user_events":
    context, lists = spec
    with open(DATA / "user_events.csv") as f:
      users = {int(line.split(",")[0]) for line in f.read().splitlines()[1:]}
    got = set()
    for record in records:
      c, steps = tf.io.parse_single_sequence_example(record, context, lists)
      assert int(c["length"]) == len(steps["timestamp"]) <= 100
      assert steps["timestamp"].numpy().tolist() == sorted(
          steps["timestamp"].numpy().tolist())
      got.add(int(c["user_id"]))
    assert got == users
  else:
    context, lists = spec
    with open(DATA / "tokens_labels.jsonl") as f:
      rows = [json.loads(line) for line in f]
    got = []
    for record in records:
      c, steps = tf.io.parse_single_sequence_example(record, context, lists)
      assert int(c["length"]) == len(steps["tokens"])
      got.append((steps["tokens"].numpy().tolist(),
                  steps["labels"].numpy().tolist()))
    assert sorted(got) == sorted((r["tokens"], r["labels"]) for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_the_dataset_is_described_as_the_tfrecord_builds(builds, name):
  """Counts, dead letters, statistics and the report are the TFRecord
  build's; dataset.json says the file format and array-record's
  compression; the published files are exactly those it lists."""
  tfrecord, array_record, _ = builds[name]
  with open(os.path.join(array_record, "dataset.json")) as f:
    meta = json.load(f)
  with open(os.path.join(tfrecord, "dataset.json")) as f:
    theirs = json.load(f)
  assert (meta["file_format"], meta["compression"]) == ("array_record",
                                                        "ZSTD")
  assert "file_format" not in theirs and theirs["compression"] == "GZIP"
  assert meta["options"]["array_record_options"] == "group_size:1"
  assert "member_bytes" not in meta["options"]
  for key in ("counts", "errors", "statistics", "feature_spec", "schema"):
    assert meta[key] == theirs[key], key
  if name == "movie_ratings":
    assert meta["counts"]["rows_rejected"] == 2
  for f in listed_files(meta):
    if f.startswith("errors/") or f in ("statistics.pb",
                                        "statistics.state.json"):
      with open(os.path.join(array_record, f), "rb") as a, \
          open(os.path.join(tfrecord, f), "rb") as b:
        assert a.read() == b.read(), f
  present = sorted(os.path.relpath(os.path.join(root, f), array_record)
                   for root, _, files in os.walk(array_record)
                   for f in files)
  assert present == sorted(set(listed_files(meta)) | {"dataset.json", "_SUCCESS"})
  assert "report.html" in present
  assert DatasetInfo.from_directory(array_record).to_text() == json.dumps(
      meta, indent=2, sort_keys=True) + "\n"
  # validate and inspect read ArrayRecord files too.
  report = validate(array_record, load_schema(str(SCHEMAS /
                                                BUNDLED[name][0])))
  assert (report.records, report.bad_records) == (
      meta["counts"]["records_written"], 0)
  files, kind, _, _, first = inspect_files(
      [os.path.join(array_record, "*.array_record")], show=1)
  assert [f.compression for f in files] == ["array_record"] * SHARDS
  assert sum(f.records for f in files) == meta["counts"]["records_written"]
  assert kind == meta["record"] and len(first) == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_the_same_bytes_on_every_run(builds, name):
  _, array_record, again = builds[name]
  info = btr.dataset_info(array_record)
  for split in info.splits.values():
    for f in split.files:
      with open(os.path.join(array_record, f), "rb") as a, \
          open(os.path.join(again, f), "rb") as b:
        assert a.read() == b.read(), f
  assert btr.dataset_info(again).splits == info.splits


@pytest.mark.slow
def test_the_command_line_writes_the_same_bytes_in_another_process(
    inputs, builds, tmp_path):
  """Other interpreters (other addresses), two worker processes writing
  shards at once (array-record's own threads too): the same files."""
  schema, data = inputs["movie_ratings"]
  out = str(tmp_path / "cli")
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
       "--input", data, "--output", out, "--num-shards", str(SHARDS),
       "--max-bad-fraction", "1", "--file-format", "array_record",
       "--direct_num_workers=2", "--direct_running_mode=multi_processing"],
      capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert run.returncode == 0, run.stderr[-3000:]
  _, array_record, _ = builds["movie_ratings"]
  files = btr.dataset_info(array_record).splits["train"].files
  assert btr.dataset_info(out).splits["train"].files == files
  for f in files:
    with open(os.path.join(array_record, f), "rb") as a, \
        open(os.path.join(out, f), "rb") as b:
      assert a.read() == b.read(), f


@pytest.mark.slow
def test_grain_shuffles_globally_and_gives_every_record_once(builds, tf):
  _, array_record, _ = builds["movie_ratings"]
  info = btr.dataset_info(array_record)
  files = [os.path.join(array_record, f) for f in info.splits["train"].files]
  source = grain.sources.ArrayRecordDataSource(files)
  assert len(source) == info.splits["train"].num_records

  def parse(record):
    example = tf.train.Example.FromString(record)
    return (example.features.feature["age"].int64_list.value[0],
            tuple(example.features.feature["movies"].bytes_list.value),
            record)

  def epoch(seed):
    return list(grain.MapDataset.source(source).shuffle(seed=seed)
                .map(parse))

  first, again, other = epoch(7), epoch(7), epoch(8)
  in_order = [parse(r) for f in files for r in _array_records(f)]
  assert collections.Counter(first) == collections.Counter(in_order)
  assert len(set(r for _, _, r in first)) == len(first) == len(in_order)
  assert first == again and first != other and first != in_order
  # Global: the first records come from every shard, not the first one.
  shard_of = {r: i for i, f in enumerate(files) for r in _array_records(f)}
  assert {shard_of[r] for _, _, r in first[:30]} == set(range(SHARDS))


@pytest.mark.slow
def test_a_seeded_shuffle_writes_the_tfrecord_builds_order(inputs, builds,
                                                           tmp_path):
  schema, data = inputs["movie_ratings"]
  out = {}
  for kind in ("tfrecord", "array_record"):
    out[kind] = str(tmp_path / kind)
    btr.build(schema, data, out[kind], num_shards=2, shuffle_seed=11,
              max_bad_fraction=1.0, file_format=kind)
  shuffled = []
  for f in btr.dataset_info(out["tfrecord"]).splits["train"].files:
    records = _array_records(os.path.join(
        out["array_record"], f.replace(".tfrecord.gz", ".array_record")))
    assert records == list(iter_tfrecords(os.path.join(out["tfrecord"], f)))
    shuffled += records
  unshuffled = [r for f in btr.dataset_info(builds["movie_ratings"][0])
                .splits["train"].files for r in iter_tfrecords(os.path.join(
                    builds["movie_ratings"][0], f))]
  assert len(shuffled) == 200
  assert sorted(shuffled) == sorted(unshuffled) and shuffled != unshuffled


@pytest.mark.slow
def test_tfds_as_data_source_reads_every_value(tmp_path):
  if os.environ.get("BTR_REQUIRE_EXTRAS"):
    import tensorflow_datasets as tfds
  else:
    tfds = pytest.importorskip("tensorflow_datasets")
  out = {}
  for kind in ("tfrecord", "array_record"):
    out[kind] = str(tmp_path / kind)
    btr.build(PENGUINS_SCHEMA, str(PENGUINS), out[kind], tfds=True,
              num_shards=2, file_format=kind)
  names = sorted(os.listdir(out["array_record"]))
  assert "train-00000-of-00002.array_record" in names
  assert not [n for n in names if ".tfrecord" in n]
  with open(os.path.join(out["array_record"], "dataset_info.json")) as f:
    assert json.load(f)["fileFormat"] == "array_record"
  sources = tfds.builder_from_directory(out["array_record"]).as_data_source()
  tfrecords = tfds.builder_from_directory(out["tfrecord"])
  for split in ("train", "test"):
    want = list(tfds.as_numpy(tfrecords.as_dataset(
        split=split, read_config=tfds.ReadConfig(interleave_cycle_length=1))))
    source = sources[split]
    assert len(source) == len(want) > 0
    for i in (0, len(want) // 2, len(want) - 1):  # at random
      got = source[i]
      assert sorted(got) == sorted(want[i])
      for key, value in want[i].items():
        assert np.array_equal(got[key], value), (split, i, key)
    assert [int(source[i]["body_mass_g"]) for i in range(len(source))] == [
        int(w["body_mass_g"]) for w in want]


@pytest.mark.slow
def test_expectations_gate_an_array_record_build(tmp_path):
  out = str(tmp_path / "flights")
  result = btr.build(FLIGHTS, DAY1, out, file_format="array_record")
  assert result.info.anomalies is not None
  assert result.info.anomalies.found == ()
  assert result.info.counts.records_written == 842
  strict = dict(FLIGHTS, expect={"records": {"min": 10 ** 6}})
  with pytest.raises(AnomalyError, match="dataset: records.min: observed "
                     "842, expected >= 1,000,000"):
    btr.build(strict, DAY1, str(tmp_path / "strict"),
              file_format="array_record")
  # (the staging folder, and the finished units a rerun reuses)
  assert not [n for n in os.listdir(tmp_path / "strict")
              if not n.startswith((".staging-", ".units"))]


@pytest.mark.slow
def test_publishing_replaces_a_tfrecord_dataset_with_an_array_record_one(
    inputs, tmp_path):
  schema, data = inputs["tokens_labels"]
  out = str(tmp_path / "out")
  btr.build(schema, data, out, num_shards=2)
  assert any(n.endswith(".tfrecord.gz") for n in os.listdir(out))
  btr.build(schema, data, out, num_shards=2, file_format="array_record",
            overwrite=True)
  names = sorted(os.listdir(out))
  assert [n for n in names if "-of-" in n] == [
      "train-00000-of-00002.array_record",
      "train-00001-of-00002.array_record"]
  assert "index" not in names  # the gzip shards' indexes went with them
  assert not [n for n in names if n.startswith(".staging")]
  # The same options again: up to date; other options: built again.
  assert btr.build(schema, data, out, num_shards=2,
                   file_format="array_record").up_to_date
  again = btr.build(schema, data, out, num_shards=2,
                    file_format="array_record",
                    array_record_options="group_size:1,uncompressed",
                    overwrite=True)
  assert not again.up_to_date and again.info.compression == "NONE"


def test_a_transform_section_is_refused(tmp_path):
  with pytest.raises(InputError, match=r"a schema with transform: writes "
                     r"TFRecord shards \(TensorFlow Transform reads them "
                     r"back\); drop --file-format array_record"):
    btr.build(str(SCHEMAS / "movie_ratings_tft.yaml"),
              str(DATA / "ratings.csv"), str(tmp_path / "out"),
              file_format="array_record")
  assert not os.path.exists(tmp_path / "out")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_our_readers_read_it_as_the_tfrecord_build(builds, name, tf):
  """btr.iter_records, btr.load (tf.data), RecordStream and random access
  (a global shuffle, records by number) give the TFRecord build's values
  and records."""
  from beam_tfrecords.read.random_access import RecordIndex
  from beam_tfrecords.read.stream import RecordStream
  tfrecord, array_record, _ = builds[name]
  assert list(btr.iter_records(array_record)) == \
      list(btr.iter_records(tfrecord))
  records = list(RecordStream(tfrecord))
  assert list(RecordStream(array_record)) == records
  def loaded(path):
    def value(t):
      if hasattr(t, "to_list"):  # a RaggedTensor
        return t.to_list()
      if isinstance(t, tf.SparseTensor):
        return tf.sparse.to_dense(t).numpy().tolist()
      v = t.numpy()
      return v.tolist() if hasattr(v, "tolist") else v
    return [tf.nest.map_structure(value, x) for x in btr.load(path)]
  assert loaded(array_record) == loaded(tfrecord)
  by_number = RecordIndex(array_record)
  picks = np.random.default_rng(2).integers(0, len(records), 50).tolist()
  assert by_number.get(picks) == [records[i] for i in picks]
  assert list(RecordStream(array_record, shuffle_seed=3,
                           shuffle="global")) == list(RecordStream(
                               tfrecord, shuffle_seed=3, shuffle="global"))

"""Reading for training (issue 34, parts 1-3): windows of daily datasets
and pins, exact per-rank shares (and per worker inside a rank), seeded
orders and resuming mid-epoch. Real data: the Palmer penguins (CC0), one
dataset per year as a scheduled build would make them, three shards each,
so that shares cross files."""

import csv
import os
import shutil

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError
from beam_tfrecords.read.stream import RecordStream

from tests.helpers.penguins import PENGUINS, SCHEMA, _build


@pytest.fixture(scope="module")
def days(tmp_path_factory):
  folder = tmp_path_factory.mktemp("windows")
  return folder, [_build(folder, y) for y in ("2007", "2008", "2009")]


def _rows(records):
  return [r["row"] for r in records]


def test_a_window_reads_its_datasets_one_after_the_other(days):
  folder, paths = days
  each = [_rows(btr.iter_records(p)) for p in paths]
  assert all(each) and len(set(sum(each, []))) == sum(map(len, each))
  assert _rows(btr.iter_records(paths)) == sum(each, [])
  glob = str(folder / "days" / "200*")
  assert _rows(btr.iter_records(glob)) == sum(each, [])
  assert _rows(btr.iter_records([paths[2], paths[0]])) == each[2] + each[0]
  parsed = [int(x["row"]) for x in btr.load(glob, "train")]
  assert parsed == sum(each, [])


def test_a_pin_reads_exactly_its_datasets_or_names_the_changed_one(
    days, tmp_path):
  folder, paths = days
  copy = tmp_path / "days"
  shutil.copytree(folder / "days", copy)
  pinned = str(tmp_path / "window.json")
  content = btr.pin(str(copy / "200[78]*"), pinned)
  assert [d["path"] for d in content["datasets"]] == [
      str(copy / "2007-01-01"), str(copy / "2008-01-01")]
  want = _rows(btr.iter_records(pinned))
  assert want == _rows(btr.iter_records(paths[:2]))
  # A later build of the same day, with fewer rows: the pin refuses it.
  later = tmp_path / "later"
  later.mkdir()
  _build(later, "2008", rows=10)
  shutil.rmtree(copy / "2008-01-01")
  shutil.copytree(later / "days" / "2008-01-01", copy / "2008-01-01")
  with pytest.raises(InputError, match=r"2008-01-01 was rebuilt or "
                     r"changed since it was pinned"):
    list(btr.iter_records(pinned))
  with pytest.raises(InputError, match="2008-01-01 was rebuilt"):
    btr.load(pinned, "train")


def test_a_pin_holds_the_records_checksums_and_survives_a_same_rebuild(
    days, tmp_path):
  """A pin is of the records (each shard's checksum, as dataset.json
  records it): a rebuild that wrote the same records keeps it; a shard
  replaced by another file is caught by its size; a pin of version 1
  (a digest of dataset.json) still reads."""
  import dataclasses
  import json
  from beam_tfrecords.read.window import digest, records_digest
  folder, paths = days
  copy = tmp_path / "days"
  shutil.copytree(folder / "days", copy)
  pinned = str(tmp_path / "window.json")
  day = str(copy / "2007-01-01")
  content = btr.pin(day, pinned)
  info = btr.dataset_info(day)
  assert content == {"kind": "beam_tfrecords.read.window", "version": 2,
                     "datasets": [{"path": day,
                                   "records": records_digest(info)}]}
  # Of every shard's checksum, and of how the records parse.
  shard = info.splits["train"].shards[0]
  other = dataclasses.replace(shard, sha256="0" * 64)
  for changed in (
      dataclasses.replace(info, splits={"train": dataclasses.replace(
          info.splits["train"], shards=(other,) + info.splits[
              "train"].shards[1:])}),
      dataclasses.replace(info, feature_spec=dict(
          info.feature_spec, row={"kind": "VarLenFeature",
                                  "dtype": "string"})),
      dataclasses.replace(info, label=("species",))):
    assert records_digest(changed) != records_digest(info)
  want = _rows(btr.iter_records(pinned))
  # Rebuilt from the same input without a report: the same records.
  btr.build(SCHEMA, str(folder / "2007.csv"), day, num_shards=3,
            overwrite=True, report=False)
  assert btr.dataset_info(day).report is None
  assert _rows(btr.iter_records(pinned)) == want
  # A shard replaced (dataset.json unchanged): refused by its size.
  shard = os.path.join(day, info.splits["train"].files[1])
  with open(shard, "ab") as f:
    f.write(b"\0")
  with pytest.raises(InputError, match="2007-01-01 was rebuilt or changed"):
    list(btr.iter_records(pinned))
  # A version-1 pin of the untouched day still reads, by its digest.
  other = str(copy / "2008-01-01")
  old = tmp_path / "old.json"
  old.write_text(json.dumps({"kind": "beam_tfrecords.read.window",
                             "version": 1, "datasets": [
                                 {"path": other, "digest": digest(other)}]}))
  assert _rows(btr.iter_records(str(old))) == _rows(btr.iter_records(other))


def test_a_window_refuses_what_does_not_read_as_one(days, tmp_path):
  folder, paths = days
  other = dict(SCHEMA, features=dict(SCHEMA["features"], body_mass_g={
      "type": "float"}))
  odd = _build(tmp_path, "2009", schema=other)
  with pytest.raises(InputError, match=r"2009-01-01 cannot be read with "
                     r".*2007-01-01: feature 'body_mass_g' is "
                     r"VarLenFeature\(float32\) there and "
                     r"VarLenFeature\(int64\)"):
    btr.load([paths[0], odd], "train")
  labelled = dict(SCHEMA, label="species")
  other_day = tmp_path / "labelled"
  other_day.mkdir()
  with pytest.raises(InputError, match=r"their label differ"):
    btr.load([paths[0], _build(other_day, "2008", schema=labelled)],
             "train")
  with pytest.raises(InputError, match="as_supervised reads the raw"):
    btr.load(paths[0], transformed=True, as_supervised=True)
  os.remove(os.path.join(odd, "_SUCCESS"))
  with pytest.raises(InputError, match="is not a finished dataset"):
    list(btr.iter_records([paths[0], odd]))
  with pytest.raises(InputError, match="no dataset matches"):
    list(btr.iter_records(str(tmp_path / "nothing-*")))
  with pytest.raises(InputError, match="named twice"):
    list(btr.iter_records([paths[0], paths[0]]))
  with pytest.raises(InputError, match="has no split 'eval'"):
    list(btr.iter_records(paths, "eval"))


@pytest.mark.parametrize("count", range(1, 9))
def test_shares_are_exact_for_ranks_and_their_workers(days, count):
  _, paths = days
  every = list(RecordStream(paths))
  n = len(every)
  files = {p.file: p.take for p in RecordStream(paths).pieces}
  for drop in (False, True):
    seen, sizes = [], []
    for rank in range(count):
      stream = RecordStream(paths, shard=(rank, count), drop_remainder=drop)
      pieces = stream.pieces
      # Whole files but for the first and the last piece.
      assert all(p.skip == 0 and p.take == files[p.file]
                 for p in pieces[1:-1])
      mine = list(stream)
      assert len(mine) == len(stream)
      sizes.append(len(mine))
      for workers in (1, 2):
        parts = [list(RecordStream(paths, shard=(rank, count),
                                   drop_remainder=drop,
                                   worker=(w, workers)))
                 for w in range(workers)]
        assert sum(parts, []) == mine
      seen += mine
    if drop:
      assert sizes == [n // count] * count
      assert seen == every[:n // count * count]
    else:
      assert max(sizes) - min(sizes) <= 1 and seen == every


def test_tf_data_reads_the_same_share(days):
  _, paths = days
  for rank in range(3):
    want = _rows(btr.iter_records(paths, shard=(rank, 3)))
    got = [int(x["row"]) for x in btr.load(paths, "train",
                                           shard=(rank, 3))]
    assert got == want
  batched = list(btr.load(paths, "train", batch_size=8, shard=(1, 3),
                          drop_remainder=True))
  assert sum(len(b["row"]) for b in batched) == len(list(RecordStream(
      paths, shard=(1, 3), drop_remainder=True)))
  once = [int(x["row"]) for x in btr.load(paths, shuffle_seed=5)]
  again = [int(x["row"]) for x in btr.load(paths, shuffle_seed=5)]
  assert once == again and sorted(once) == sorted(
      _rows(btr.iter_records(paths))) and once != sorted(once)
  with pytest.raises(ValueError, match=r"shard=\(3, 3\)"):
    btr.load(paths, shard=(3, 3))


def test_a_seeded_order_is_the_same_every_run_and_new_each_epoch(days):
  _, paths = days
  plain = list(RecordStream(paths, shard=(0, 2)))
  first = list(RecordStream(paths, shard=(0, 2), shuffle_seed=11))
  assert first == list(RecordStream(paths, shard=(0, 2), shuffle_seed=11))
  other = list(RecordStream(paths, shard=(0, 2), shuffle_seed=11, epoch=1))
  assert first != plain and other != first
  both = RecordStream(paths, shuffle_seed=11, epoch=1)
  ranks = [list(RecordStream(paths, shard=(r, 2), shuffle_seed=11,
                             epoch=1)) for r in range(2)]
  assert sorted(ranks[0] + ranks[1]) == sorted(both) == sorted(
      RecordStream(paths))


@pytest.mark.parametrize("seed", [None, 3])
def test_a_resumed_reader_yields_exactly_what_was_still_to_come(days, seed):
  _, paths = days
  args = dict(shard=(1, 2), shuffle_seed=seed, epoch=2, shuffle_buffer=40,
              worker=(1, 2))
  whole = list(RecordStream(paths, **args))
  stream = RecordStream(paths, **args)
  it = iter(stream)
  head = [next(it) for _ in range(17)]
  state = stream.state_dict()
  assert state["position"] == 17 and head == whole[:17]
  resumed = RecordStream(paths, **args)
  resumed.load_state_dict(state)
  assert list(resumed) == whole[17:]
  assert list(resumed) == whole  # the next pass starts the epoch again
  wrong = RecordStream(paths, **dict(args, shard=(0, 2)))
  with pytest.raises(InputError, match=r"shard=\[1, 2\]"):
    wrong.load_state_dict(state)


def test_inspect_shows_a_window(days, tmp_path, capsys):
  from beam_tfrecords import cli
  folder, paths = days
  assert cli.main(["inspect", str(folder / "days" / "200*"),
                   "--records", "1"]) == 0
  out = capsys.readouterr().out
  total = sum(1 for _ in btr.iter_records(paths))
  first = next(iter(btr.iter_records(paths)))
  assert out.startswith("window of 3 datasets (example), read in this "
                        "order:\n")
  assert f"split train: {total:,} records in all\n" in out
  assert f'record 0: {{"body_mass_g"' in out and f'"row": {first["row"]}' \
      in out
  pinned = str(tmp_path / "w.json")
  btr.pin(paths[1:], pinned)
  assert cli.main(["inspect", pinned, "--records", "0"]) == 0
  out = capsys.readouterr().out
  assert out.startswith("window of 2 datasets") and paths[0] not in out


def test_report_over_a_window_draws_each_dataset(days, tmp_path):
  import re
  from beam_tfrecords import cli
  folder, paths = days
  target = str(tmp_path / "trend.html")
  assert cli.main(["report", str(folder / "days" / "200*"), "-o",
                   target]) == 0
  page = open(target).read()
  records = [len(list(btr.iter_records(p))) for p in paths]
  assert [int(n) for n in re.findall(r"<td data-records='(\d+)'>",
                                     page)] == records
  row = re.search(r"<tr><td>body_mass_g</td>(.*?)</tr>", page).group(1)
  means = [float(m) for m in re.findall(r'data-mean="([^"]+)"', row)]
  presence = [float(m) for m in re.findall(r'data-presence="([^"]+)"',
                                           row)]
  for p, mean, present in zip(paths, means, presence):
    masses = [r["body_mass_g"] for r in btr.iter_records(p)]
    found = [m for m in masses if m is not None]
    assert mean == pytest.approx(sum(found) / len(found))
    assert present == pytest.approx(len(found) / len(masses))
  assert len(means) == len(presence) == 3


def test_set_epoch_after_loading_a_state_keeps_its_place(days):
  """The usual resume: load the state, then set_epoch(the state's epoch)
  at the top of the epoch loop; state_dict() is right before the first
  record too."""
  _, paths = days
  args = dict(shard=(0, 2), shuffle_seed=4, shuffle_buffer=16)
  stream = RecordStream(paths, epoch=3, **args)
  whole = list(stream)
  assert stream.state_dict()["position"] == len(whole)
  iter(stream)
  assert stream.state_dict()["position"] == 0  # a new pass began
  it = iter(stream)
  head = [next(it) for _ in range(9)]
  state = stream.state_dict()
  resumed = RecordStream(paths, epoch=0, **args)
  resumed.load_state_dict(state)
  assert resumed.state_dict()["position"] == 9
  resumed.set_epoch(3)
  assert head + list(resumed) == whole
  resumed.set_epoch(4)  # another epoch: from its start
  assert len(list(resumed)) == len(whole)


def test_a_window_may_mix_gzip_and_uncompressed_datasets(days, tmp_path):
  _, paths = days
  with open(PENGUINS) as f:
    rows = [dict(r, row=i) for i, r in enumerate(csv.DictReader(f))
            if r["year"] == "2009"]
  src = tmp_path / "2009.csv"
  with open(src, "w", newline="") as f:
    w = csv.DictWriter(f, ["row", "species", "island", "body_mass_g"],
                       extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
  plain = dict(SCHEMA, features=dict(SCHEMA["features"], body_mass_g={
      "type": "int64", "shape": [-1]}))
  gz = str(tmp_path / "gz")
  tfds = str(tmp_path / "plain")
  btr.build(plain, str(src), gz, num_shards=2)
  btr.build(plain, str(src), tfds, num_shards=2, tfds=True)
  assert any(n.endswith(".tfrecord") for n in os.listdir(tfds))
  want = _rows(btr.iter_records(gz)) * 2
  assert _rows(btr.iter_records([gz, tfds])) == want
  assert [int(x["row"]) for x in btr.load([gz, tfds])] == want
  assert [int(x["row"]) for x in btr.load(
      [gz, tfds], shard=(1, 3))] == _rows(btr.iter_records(
          [gz, tfds], shard=(1, 3)))


def test_what_follows_a_files_last_record_is_an_error(tmp_path):
  """A reader checks that nothing follows a file's last listed record (a
  review: the list-at-a-time reader stopped at the last record and
  missed a truncated tail): the shard's size is not dataset.json's, said
  before the first record."""
  import gzip
  import importlib
  import shutil
  from beam_tfrecords.read.stream import RecordStream
  out = tmp_path / "movies"
  importlib.import_module("pipelines.movie_ratings").run(
      ["--output", str(out)])
  shard = next(out.glob("train-*.tfrecord.gz"))
  data = gzip.decompress(shard.read_bytes())
  shutil.copy(shard, tmp_path / "good")
  sized = (r"train-00000-of-00001\.tfrecord\.gz: it is [\d,]+ bytes; its "
           r"dataset\.json lists [\d,]+ \(an empty, cut or replaced file")
  shard.write_bytes(gzip.compress(data + data[:20]))  # a record cut short
  with pytest.raises(btr.ShardDamagedError, match=sized):
    list(RecordStream(str(out)))
  with pytest.raises(btr.ShardDamagedError, match=sized):
    list(RecordStream(str(out)).batches(4))
  first = 16 + int.from_bytes(data[:8], "little")  # one framed record
  shard.write_bytes(gzip.compress(data + data[:first]))  # one too many
  with pytest.raises(InputError, match=sized):
    list(RecordStream(str(out)))
  shutil.copy(tmp_path / "good", shard)
  assert len(list(RecordStream(str(out)))) == len(
      list(btr.iter_records(str(out))))

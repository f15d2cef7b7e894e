"""--append (issue 62, publish/append.py): new inputs become new shard
files after the old ones, the old shards keep their inodes, and the
dataset reads as a clean build of all the inputs: the same records in
each split, the same counts, rejected rows and statistics."""

import json
import os

import pytest

import beam_tfrecords as btr
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.read.stream import RecordStream

SCHEMA = {
    "name": "events",
    "features": {"id": {"type": "int64", "required": True},
                 "user": "string", "score": "float"},
    "splits": {"hash": "user", "weights": {"train": 3, "test": 1}},
}


@pytest.fixture(autouse=True)
def _fixed_time(monkeypatch):
  monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # croissant.json


def _inputs(folder, n, rows=1200):
  """n CSV files of `rows` rows, every 97th with an id that is no int."""
  paths = []
  for k in range(n):
    lines = ["id,user,score"]
    for i in range(rows):
      row = k * rows + i
      ident = "x" if row % 97 == 5 else str(row)
      lines.append(f"{ident},u{row % 350},{(row * 7) % 101 / 4}")
    path = folder / f"day{k}.csv"
    path.write_text("\n".join(lines) + "\n")
    paths.append(str(path))
  return paths


def _records(out, split):
  return sorted(RecordStream(out, split))


def _errors(out):
  rows = []
  for name in sorted(os.listdir(os.path.join(out, "errors"))):
    with open(os.path.join(out, "errors", name)) as f:
      rows += [json.loads(line) for line in f]
  return sorted(json.dumps(r["raw"], sort_keys=True) for r in rows)


def _meta(out):
  with open(os.path.join(out, "dataset.json")) as f:
    return json.load(f)


def _read(out, name):
  with open(os.path.join(out, name), "rb") as f:
    return f.read()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """Two days built, a third appended, and a clean build of all three."""
  folder = tmp_path_factory.mktemp("append")
  before = os.environ.get("SOURCE_DATE_EPOCH")
  os.environ["SOURCE_DATE_EPOCH"] = "1700000000"
  try:
    days = _inputs(folder, 3)
    out, clean = str(folder / "out"), str(folder / "clean")
    args = dict(num_shards=2, max_bad_fraction=0.05)
    btr.build(SCHEMA, days[:2], out, **args)
    shards = {n: os.stat(os.path.join(out, n)).st_ino
              for n in os.listdir(out) if n.endswith(".tfrecord.gz")}
    result = btr.build(SCHEMA, days[2:], out, append=True, **args)
    btr.build(SCHEMA, days, clean, **args)
  finally:
    if before is None:
      del os.environ["SOURCE_DATE_EPOCH"]
    else:
      os.environ["SOURCE_DATE_EPOCH"] = before
  return out, clean, shards, result, days


def test_the_appended_dataset_holds_what_a_clean_build_of_all_does(built):
  out, clean, _, result, _ = built
  a, b = _meta(out), _meta(clean)
  assert a["counts"] == b["counts"]
  assert a["counts"]["rows_read"] == 3600
  assert a["counts"]["rows_rejected"] == b["errors"]["rows"] > 0
  assert set(a["splits"]) == {"train", "test"}
  for split in ("train", "test"):
    assert _records(out, split) == _records(clean, split)
    assert a["splits"][split]["records"] == \
        b["splits"][split]["records"]
  assert _errors(out) == _errors(clean)
  # Statistics merged exactly (no text feature of over 1,000 values).
  assert a["statistics"] == b["statistics"]
  assert _read(out, "statistics.pb") == _read(clean, "statistics.pb")
  assert _read(out, "statistics.state.json") == \
      _read(clean, "statistics.state.json")
  assert result.info.counts.rows_read == 3600


def test_old_shards_keep_their_inodes_and_new_ones_come_after(built):
  out, _, before, _, days = built
  meta = _meta(out)
  train = [s["file"] for s in meta["splits"]["train"]["shards"]]
  assert train == [f"train-{i:05d}-of-00004.tfrecord.gz" for i in range(4)]
  for i, name in enumerate(sorted(before)):
    if name.startswith("train-"):
      renamed = name.replace("-of-00002", "-of-00004")
      assert os.stat(os.path.join(out, renamed)).st_ino == before[name]
  assert sorted(n for n in os.listdir(out) if n.endswith(".tfrecord.gz")) \
      == sorted(s["file"] for split in meta["splits"].values()
                for s in split["shards"])
  assert [f["path"] for f in meta["inputs"]["files"]] == days
  assert meta["inputs"]["appends"][0]["files"] == 1
  errors = sorted(os.listdir(os.path.join(out, "errors")))
  assert errors == [f["file"].split("/")[-1]
                    for f in meta["errors"]["files"]]


def test_readers_verify_and_croissant_see_the_new_set(built):
  out, _, _, _, _ = built
  assert btr.verify(out).ok
  croissant = _read(out, "croissant.json").decode()
  meta = _meta(out)
  for split in meta["splits"].values():
    for shard in split["shards"]:
      assert shard["file"] in croissant
  # Random access numbers the old records first, as the stream reads.
  stream = list(RecordStream(out, "train"))
  by_number = btr.open(out).by_number("train")
  assert len(by_number) == len(stream)
  for i in (0, len(stream) // 2, len(stream) - 1):
    assert by_number[i] == stream[i]
  assert sum(1 for _ in btr.iter_records(out, split="test")) == \
      meta["splits"]["test"]["records"]


def test_the_same_append_again_is_up_to_date(built):
  out, _, _, _, days = built
  again = btr.build(SCHEMA, days[2:], out, append=True, num_shards=2,
                    max_bad_fraction=0.05)
  assert again.up_to_date
  assert _meta(out)["counts"]["rows_read"] == 3600


@pytest.mark.parametrize("case, message", [
    ("nothing", "holds no finished dataset to append to"),
    ("held", "already holds"),
    ("schema", "another schema"),
    ("statistics", "built with statistics; append without --no-statistics"),
    ("overwrite", "--overwrite replaces the dataset"),
])
def test_what_cannot_be_appended_is_refused(tmp_path, case, message):
  days = _inputs(tmp_path, 2, rows=100)
  out = str(tmp_path / "out")
  args = dict(max_bad_fraction=0.05)
  if case != "nothing":
    btr.build(SCHEMA, days[:1], out, **args)
  schema = SCHEMA
  extra = {}
  inputs = days[1:]
  if case == "held":
    inputs = days
  elif case == "schema":
    schema = {**SCHEMA, "features": {**SCHEMA["features"], "score": "int64"}}
  elif case == "statistics":
    extra = {"statistics": False}
  elif case == "overwrite":
    extra = {"overwrite": True}
  before = _read(out, "dataset.json") if case != "nothing" else None
  with pytest.raises(InputError, match=message):
    btr.build(schema, inputs, out, append=True, **args, **extra)
  if before is not None:
    assert _read(out, "dataset.json") == before
    assert not [n for n in os.listdir(out) if n.startswith(".staging-")]


def test_an_old_shard_gone_is_named_and_nothing_is_appended(tmp_path):
  days = _inputs(tmp_path, 2, rows=300)
  out = str(tmp_path / "out")
  btr.build(SCHEMA, days[:1], out, max_bad_fraction=0.05)
  shard = sorted(n for n in os.listdir(out) if n.startswith("train-"))[0]
  os.remove(os.path.join(out, shard))
  before = _read(out, "dataset.json")
  with pytest.raises(btr.ShardDamagedError, match=(
      f"{shard}: listed by the dataset appended to, and not there")):
    btr.build(SCHEMA, days[1:], out, append=True, max_bad_fraction=0.05)
  assert _read(out, "dataset.json") == before

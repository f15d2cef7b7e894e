"""beam-tfrecords verify on real builds: the SHA-256s dataset.json records
are of the bytes written, and a flipped byte, a cut shard, a lost index, a
stray file or a damaged report is named with its kind and exit 1."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.core.info import DatasetInfo

from tests.helpers.faults import SCHEMA, write_rows
from tests.helpers.paths import ROOT

# Two splits; one row in 25 has a bad score (rejected, to errors/).
SPLIT_SCHEMA = dict(SCHEMA, splits={"hash": "id", "weights": {
    "train": "80%", "test": "20%"}})
SHARDS = [f"{split}-0000{i}-of-00002.tfrecord.gz" for split in
          ("test", "train") for i in (0, 1)]
LISTED = sorted(SHARDS + [f"index/{s}.index" for s in SHARDS] + [
    "errors/errors-00000-of-00001.jsonl", "README.md",
    "preview/test.parquet", "preview/train.parquet", "report.html",
    "schema.pbtxt", "statistics.pb", "statistics.state.json"])


def _build(folder, name, **options):
  src = os.path.join(folder, "in.csv")
  if not os.path.exists(src):
    write_rows(src, 300, bad_every=25)
  return btr.build(SPLIT_SCHEMA, src, os.path.join(folder, name),
                   num_shards=2, max_bad_fraction=1.0, **options)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  result = _build(str(tmp_path_factory.mktemp("verify")), "out")
  assert result.info.counts.rows_rejected == 12
  assert {s: len(v.shards) for s, v in result.splits.items()} == {
      "train": 2, "test": 2}
  return result.output


@pytest.fixture
def copy(built, tmp_path):
  """The build's folder copied, to damage."""
  out = str(tmp_path / "ds")
  shutil.copytree(built, out)
  return out


def _sha(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _verify(out, *flags):
  """The command line in a child process: (exit code, stdout lines,
  stderr)."""
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "verify", out, *flags],
      capture_output=True, text=True, timeout=120, cwd=ROOT)
  return run.returncode, run.stdout.splitlines(), run.stderr


def _verify_here(capsys, out, *flags):
  """The command line's main() in this process, as _verify (a child
  process costs 2-3 s of imports; test_an_intact_build_verifies runs the
  real one)."""
  capsys.readouterr()
  code = cli.main(["verify", out, *flags])
  said = capsys.readouterr()
  return code, said.out.splitlines(), said.err


def _bytes_read(out):
  return sum(os.path.getsize(os.path.join(d, f))
             for d, _, files in os.walk(out) for f in files
             if f != "_SUCCESS")


def _assert_checksums_are_of_the_bytes(out):
  """Every file dataset.json lists has the size and SHA-256 of its bytes;
  croissant.json gives dataset.json's own and the shards'."""
  info = DatasetInfo.from_directory(out)
  sums = info.file_checksums()
  for name, (size, sha) in sums.items():
    assert sha is not None, name
    assert os.path.getsize(os.path.join(out, name)) == size, name
    assert _sha(os.path.join(out, name)) == sha, name
  present = {os.path.relpath(os.path.join(d, f), out)
             for d, _, files in os.walk(out) for f in files}
  assert present - set(sums) == {"_SUCCESS", "dataset.json",
                                 "croissant.json"}
  assert info.croissant == "croissant.json"
  with open(os.path.join(out, "croissant.json")) as f:
    described = {e["contentUrl"]: e.get("sha256")
                 for e in json.load(f)["distribution"]
                 if e["@type"] == "cr:FileObject"}
  assert described["dataset.json"] == _sha(os.path.join(out, "dataset.json"))
  for shard in info.shards():
    assert described[shard.file] == shard.sha256
  return sums


def test_the_recorded_checksums_are_of_the_bytes_written(built):
  sums = _assert_checksums_are_of_the_bytes(built)
  assert sorted(sums) == LISTED
  with open(os.path.join(built, "dataset.json")) as f:
    meta = json.load(f)
  assert all(len(s["sha256"]) == 64 and len(s["index"]["sha256"]) == 64
             for split in meta["splits"].values() for s in split["shards"])
  (error,) = meta["errors"]["files"]
  assert error["sha256"] == _sha(os.path.join(built, error["file"]))
  assert sorted(meta["checksums"]) == ["README.md", "preview/test.parquet",
                                   "preview/train.parquet", "report.html",
                                   "schema.pbtxt", "statistics.pb",
                                   "statistics.state.json"]


def test_an_intact_build_verifies(built):
  result = btr.verify(built)
  assert result.ok and result.problems == ()
  assert result.checked == len(LISTED)
  assert result.num_bytes == _bytes_read(built)
  code, lines, _ = _verify(built, "--threads", "2")
  assert code == 0
  assert lines == [f"{built}: {len(LISTED)} file(s) intact "
                   f"({_bytes_read(built):,} bytes read)"]


def _flip(path, at):
  with open(path, "r+b") as f:
    f.seek(at)
    byte = f.read(1)
    f.seek(at)
    f.write(bytes([byte[0] ^ 0xFF]))


def _flip_a_shard(out):
  name = "train-00001-of-00002.tfrecord.gz"
  want = _sha(os.path.join(out, name))
  _flip(os.path.join(out, name), 40)
  return (f"damaged: {name}: SHA-256 {_sha(os.path.join(out, name))[:16]}"
          f"..., {want[:16]}... written: its bytes changed"), 1


def _truncate_a_shard(out):
  name = "test-00000-of-00002.tfrecord.gz"
  path = os.path.join(out, name)
  size = os.path.getsize(path)
  with open(path, "r+b") as f:
    f.truncate(size // 2)
  return f"truncated: {name}: {size // 2:,} bytes, {size:,} written", 1


def _delete_an_index(out):
  name = "index/train-00000-of-00002.tfrecord.gz.index"
  os.remove(os.path.join(out, name))
  return f"missing: {name}: listed in dataset.json, not there", 1


def _add_a_file(out):
  with open(os.path.join(out, "train-00002-of-00003.tfrecord.gz"),
            "wb") as f:
    f.write(b"x" * 1500)
  return ("extra: train-00002-of-00003.tfrecord.gz: 1,500 bytes, not listed "
          "in dataset.json"), 0


def _damage_the_report(out):
  path = os.path.join(out, "report.html")
  want = _sha(path)
  with open(path, "rb") as f:
    text = f.read()
  with open(path, "wb") as f:
    f.write(text.replace(b"<html", b"<HTML", 1))
  return (f"damaged: report.html: SHA-256 {_sha(path)[:16]}..., "
          f"{want[:16]}... written: its bytes changed"), 1


@pytest.mark.parametrize("damage", [
    _flip_a_shard, _truncate_a_shard, _delete_an_index, _add_a_file,
    _damage_the_report], ids=["flipped_byte", "truncated_shard",
                              "deleted_index", "extra_file",
                              "damaged_report"])
def test_a_damaged_build_is_named_with_exit_1(copy, damage, capsys):
  line, lost = damage(copy)
  code, lines, stderr = _verify_here(capsys, copy)
  assert code == 1, stderr
  assert lines == [line, f"{copy}: 1 problem(s); {len(LISTED) - lost} "
                   "file(s) intact"]


def test_a_folder_without_success_exits_2(copy, capsys):
  os.remove(os.path.join(copy, "_SUCCESS"))
  code, lines, stderr = _verify_here(capsys, copy)
  assert (code, lines) == (2, [])
  assert stderr.splitlines()[-1] == (
      f"error: {copy} is not a finished dataset (no _SUCCESS file); its "
      "build failed, was killed or is still running")


@pytest.mark.parametrize("options,shards", [
    ({"sink": "beam"}, [f"{s}-0000{i}-of-00002.tfrecord.gz"
                        for s in ("test", "train") for i in (0, 1)]),
    ({"compression": "none"}, [f"{s}-0000{i}-of-00002.tfrecord"
                               for s in ("test", "train") for i in (0, 1)]),
    ({"file_format": "array_record"}, [
        f"{s}-0000{i}-of-00002.array_record"
        for s in ("test", "train") for i in (0, 1)]),
], ids=["beam_sink", "no_compression", "array_record"])
def test_other_sinks_and_formats_verify(tmp_path, options, shards):
  if options.get("file_format") == "array_record":
    pytest.importorskip("array_record")
  out = _build(str(tmp_path), "out", **options).output
  sums = _assert_checksums_are_of_the_bytes(out)
  assert sorted(s.file for s in DatasetInfo.from_directory(out).shards()) \
      == shards
  result = btr.verify(out)
  assert result.ok, result.problems
  assert result.checked == len(sums)
  assert result.num_bytes == _bytes_read(out)
  # Their shards' checksums are checked too.
  _flip(os.path.join(out, shards[-1]), 20)
  assert [(p.file, p.kind) for p in btr.verify(out).problems] == [
      (shards[-1], "damaged")]


def test_an_overwrite_while_verifying_is_said_not_reported_as_damage(
    copy, tmp_path, monkeypatch, capsys):
  """A real overwrite (other rows: other shards) between verify's read of
  dataset.json and its reads of the files: "replaced while verifying",
  exit 2, never truncated / resized / croissant (issue 60)."""
  from beam_tfrecords.publish import verify as verifying
  other = write_rows(str(tmp_path / "other.csv"), 200)
  listing = verifying._present  # pylint: disable=protected-access

  def overwritten_then_listed(path):
    # (force: the second one, of the same rows, is published too)
    btr.build(SPLIT_SCHEMA, other, copy, num_shards=2, max_bad_fraction=1.0,
              overwrite=True, force=True)
    return listing(path)
  monkeypatch.setattr(verifying, "_present", overwritten_then_listed)
  with pytest.raises(btr.DatasetReplacedError,
                     match=f"^{copy} was replaced while verifying: "):
    btr.verify(copy)
  capsys.readouterr()
  assert cli.main(["verify", copy]) == cli.EXIT_INPUT == 2
  out, err = capsys.readouterr()
  assert out == ""
  # (a details: line before it names the debug log: the overwrite's
  # pipeline ran inside the command, here)
  assert err.splitlines()[-1:] == [
      f"error: {copy} was replaced while verifying: a newer build published "
      "over it (or is publishing) after its dataset.json was read, so the "
      "files read were not all of the build it describes, and their sizes "
      "and checksums say nothing of damage. Verify it again"]
  # Verified again, it is the newer build, whole.
  monkeypatch.undo()
  result = btr.verify(copy)
  assert result.ok, result.problems
  assert btr.dataset_info(copy).counts.rows_read == 200

"""publish.verify on dataset folders made by hand: every file dataset.json
lists against its size and SHA-256, the files it does not list, and
croissant.json against dataset.json."""

import hashlib
import json
import os
import threading

import pytest

from beam_tfrecords import DatasetReplacedError, InputError
from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import MalformedFileError
from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.publish.verify import Problem, lines, verify

SHARD0 = "train-00000-of-00002.tfrecord.gz"
SHARD1 = "train-00001-of-00002.tfrecord.gz"
TEST = "test-00000-of-00001.tfrecord.gz"
INDEX0 = f"index/{SHARD0}.index"
ERRORS = "errors/errors-00000-of-00001.jsonl"
# What a build writes besides the shards, their indexes and errors/.
OTHERS = ("README.md", "preview/train.parquet", "report.html",
          "schema.pbtxt", "statistics.pb")
CONTENT = {
    SHARD0: b"\x1f\x8b shard zero of train" * 60,  # 1,320 bytes
    SHARD1: b"\x1f\x8b shard one of train" * 30,
    TEST: b"\x1f\x8b the test shard" * 20,
    INDEX0: b"index of shard zero" * 3,
    ERRORS: b'{"raw": {"id": "oops"}, "reason": "not a number"}\n',
    "README.md": b"# hand\n\nA dataset made by hand.\n",
    "preview/train.parquet": b"PAR1 preview PAR1",
    "report.html": b"<html><body>report</body></html>\n",
    "schema.pbtxt": b'feature { name: "id" type: INT }\n',
    "statistics.pb": b"\x0a\x04stat" * 10,
}
CHECKSUMMED = len(CONTENT)  # 10 files
# Not in the datasets written before checksums.
NEW = (INDEX0, "README.md", "preview/train.parquet")
SUCCESS = b"beam-tfrecords 0.1.0 0123456789abcdef0123456789abcdef 1d98dad27dc6"


def _sum(data, with_sha=True):
  out = {"bytes": len(data)}
  if with_sha:
    out["sha256"] = hashlib.sha256(data).hexdigest()
  return out


def _shard(name, records, with_sha, index=None):
  out = {"file": name, "records": records, "bytes": len(CONTENT[name])}
  if with_sha:
    out["sha256"] = hashlib.sha256(CONTENT[name]).hexdigest()
  if index:
    out["index"] = {"file": index, **_sum(CONTENT[index])}
  return out


def _meta(checksums=True):
  """dataset.json's object, as a build writes it (checksums=False: as
  one did before it recorded checksums: no sha256, no `checksums`, no
  croissant.json, no index)."""
  sha = checksums
  error = {"file": ERRORS, "lines": 1, "rows": 1}
  if sha:
    error.update(_sum(CONTENT[ERRORS]))
  train = [_shard(SHARD0, 2, sha, INDEX0 if sha else None),
           _shard(SHARD1, 1, sha)]
  meta = {
      "name": "hand", "record": "example", "compression": "GZIP",
      "splits": {
          "train": {"records": 3, "bytes": sum(s["bytes"] for s in train),
                    "shards": train},
          "test": {"records": 1, "bytes": len(CONTENT[TEST]),
                   "shards": [_shard(TEST, 1, sha)]}},
      "counts": {"rows_read": 5, "rows_written": 4, "rows_rejected": 1,
                 "rows_dropped": 0, "records_written": 4},
      "errors": {"rows": 1, "files": [error], "reasons": []},
      "schema": {"name": "hand", "features": {"id": {"type": "int64"}}},
      "feature_spec": {"id": {"kind": "FixedLenFeature", "dtype": "int64",
                              "shape": []}},
      "inputs": {"format": "csv", "patterns": ["in.csv"]},
      "options": {"num_shards": {"train": 2, "test": 1},
                  "max_shard_bytes": {"train": None, "test": None},
                  "sink": "deterministic"},
      "split_rule": {"kind": "hash", "splits": ["train", "test"]},
      "tool": {"name": "beam-tfrecords", "version": "0.1.0"},
      "report": "report.html", "tfdv_statistics": "statistics.pb",
      "tfmd_schema": "schema.pbtxt",
  }
  if sha:
    meta["checksums"] = {name: _sum(CONTENT[name]) for name in OTHERS}
    meta["croissant"] = "croissant.json"
  return meta


def _write(path, data):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(data)


def _croissant(dataset_json):
  """croissant.json's distribution: dataset.json's SHA-256 and every
  shard's (cr:FileObject), and a FileSet (not a file: skipped)."""
  files = [("dataset.json", dataset_json)] + [
      (n, CONTENT[n]) for n in (SHARD0, SHARD1, TEST)]
  return json.dumps({"@type": "sc:Dataset", "name": "hand", "distribution": [
      {"@type": "cr:FileObject", "@id": n, "contentUrl": n,
       "sha256": hashlib.sha256(data).hexdigest()} for n, data in files] + [
           {"@type": "cr:FileSet", "@id": "shards",
            "includes": "*.tfrecord.gz"}]}, indent=2).encode()


def make(tmp_path, checksums=True):
  """A finished dataset folder: its files, dataset.json (through
  DatasetInfo: as a build writes it), croissant.json and _SUCCESS."""
  out = tmp_path / "ds"
  for name, data in CONTENT.items():
    if checksums or name not in NEW:
      _write(str(out / name), data)
  text = DatasetInfo.from_json(_meta(checksums)).to_text().encode()
  _write(str(out / "dataset.json"), text)
  if checksums:
    _write(str(out / "croissant.json"), _croissant(text))
  _write(str(out / "_SUCCESS"), SUCCESS)
  return out


def _all_bytes(out):
  """Bytes of every file of the folder but _SUCCESS (what verify reads)."""
  return sum(os.path.getsize(os.path.join(d, f))
             for d, _, files in os.walk(out) for f in files
             if f != "_SUCCESS")


def test_the_hand_made_folder_reads_as_a_build_writes_it(tmp_path):
  info = DatasetInfo.from_directory(str(make(tmp_path)))
  assert sorted(info.file_checksums()) == sorted(CONTENT)
  assert all(sha is not None for _, sha in info.file_checksums().values())


def test_an_intact_dataset_is_ok(tmp_path):
  out = make(tmp_path)
  result = verify(str(out))
  assert result.ok
  assert result.problems == ()
  assert result.path == str(out)
  assert result.checked == CHECKSUMMED
  assert result.num_bytes == _all_bytes(out)
  assert lines(result)[-1] == (
      f"{out}: {CHECKSUMMED} file(s) intact ({_all_bytes(out):,} bytes read)")


def test_a_trailing_slash_and_one_thread_give_the_same(tmp_path):
  out = make(tmp_path)
  result = verify(str(out) + "/", threads=1)
  assert result.ok and result.path == str(out)
  assert result.checked == CHECKSUMMED


def test_a_dataset_with_checksums_has_no_unchecked_file(tmp_path):
  out = make(tmp_path)
  result = verify(str(out))
  assert result.unchecked == ()
  assert lines(result) == [
      f"{out}: {CHECKSUMMED} file(s) intact ({_all_bytes(out):,} bytes read)"]


def _flip(path, at):
  with open(path, "r+b") as f:
    f.seek(at)
    byte = f.read(1)
    f.seek(at)
    f.write(bytes([byte[0] ^ 0x01]))


def test_a_flipped_byte_in_a_shard_is_damaged(tmp_path):
  out = make(tmp_path)
  _flip(out / SHARD1, 100)
  result = verify(str(out))
  assert not result.ok
  assert [(p.file, p.kind) for p in result.problems] == [(SHARD1, "damaged")]
  got = hashlib.sha256((out / SHARD1).read_bytes()).hexdigest()
  want = hashlib.sha256(CONTENT[SHARD1]).hexdigest()
  assert result.problems[0].detail == (
      f"SHA-256 {got[:16]}..., {want[:16]}... written: its bytes changed")
  assert result.checked == CHECKSUMMED - 1
  assert lines(result)[0] == (
      f"damaged: {SHARD1}: {result.problems[0].detail}")
  assert lines(result)[-1] == (
      f"{out}: 1 problem(s); {CHECKSUMMED - 1} file(s) intact")


def test_a_truncated_file_says_its_size_and_the_size_written(tmp_path):
  out = make(tmp_path)
  size = len(CONTENT[SHARD0])
  with open(out / SHARD0, "r+b") as f:
    f.truncate(size - 10)
  result = verify(str(out))
  assert size == 1320
  assert result.problems == (Problem(
      SHARD0, "truncated", "1,310 bytes, 1,320 written"),)
  assert result.problems[0].line() == (
      f"truncated: {SHARD0}: 1,310 bytes, 1,320 written")


def test_an_appended_byte_is_resized(tmp_path):
  out = make(tmp_path)
  with open(out / "report.html", "ab") as f:
    f.write(b"\n")
  size = len(CONTENT["report.html"])
  assert verify(str(out)).problems == (Problem(
      "report.html", "resized", f"{size + 1:,} bytes, {size:,} written"),)


def test_a_deleted_listed_file_is_missing(tmp_path):
  out = make(tmp_path)
  os.remove(out / INDEX0)
  result = verify(str(out))
  assert result.problems == (
      Problem(INDEX0, "missing", "listed in dataset.json, not there"),)
  assert result.checked == CHECKSUMMED - 1
  assert result.num_bytes == _all_bytes(out)


def test_a_stray_file_is_extra(tmp_path):
  out = make(tmp_path)
  _write(str(out / "train-00002-of-00003.tfrecord.gz"), b"x" * 1234)
  _write(str(out / "errors" / "notes.txt"), b"hi")
  result = verify(str(out))
  assert result.problems == (
      Problem("errors/notes.txt", "extra",
              "2 bytes, not listed in dataset.json"),
      Problem("train-00002-of-00003.tfrecord.gz", "extra",
              "1,234 bytes, not listed in dataset.json"))
  assert result.checked == CHECKSUMMED


def test_a_staging_folder_and_the_lock_are_not_extra(tmp_path):
  out = make(tmp_path)
  _write(str(out / ".staging-0123456789ab" / SHARD0), b"a build's part")
  _write(str(out / ".staging-0123456789ab" / "publish.json"), b"{}")
  _write(str(out / ".beam-tfrecords.lock"), b"1234 host")
  result = verify(str(out))
  assert result.ok, result.problems
  assert result.checked == CHECKSUMMED


def test_dataset_json_changed_after_croissant_json_is_a_croissant_problem(
    tmp_path):
  out = make(tmp_path)
  before = (out / "dataset.json").read_bytes()
  meta = json.loads(before)
  meta["name"] = "renamed by hand"
  after = DatasetInfo.from_json(meta).to_text().encode()
  (out / "dataset.json").write_bytes(after)
  result = verify(str(out))
  old = hashlib.sha256(before).hexdigest()
  new = hashlib.sha256(after).hexdigest()
  assert result.problems == (Problem(
      "croissant.json", "croissant",
      f"gives dataset.json the SHA-256 {old[:16]}..., which is "
      f"{new[:16]}... (dataset.json was changed since it was published)"),)
  # The files themselves are intact.
  assert result.checked == CHECKSUMMED


def test_a_croissant_json_that_is_not_json_is_named(tmp_path):
  out = make(tmp_path)
  (out / "croissant.json").write_bytes(b"{not json")
  problems = verify(str(out)).problems
  assert [(p.file, p.kind) for p in problems] == [
      ("croissant.json", "croissant")]
  assert problems[0].detail.startswith("not valid JSON (")


def test_a_croissant_json_with_another_shard_checksum_is_named(tmp_path):
  out = make(tmp_path)
  described = json.loads((out / "croissant.json").read_bytes())
  entry = next(e for e in described["distribution"]
               if e.get("contentUrl") == TEST)
  entry["sha256"] = "0" * 64
  (out / "croissant.json").write_bytes(json.dumps(described).encode())
  want = hashlib.sha256(CONTENT[TEST]).hexdigest()
  assert verify(str(out)).problems == (Problem(
      "croissant.json", "croissant",
      f"gives {TEST} the SHA-256 {'0' * 16}..., which is {want[:16]}..."),)


def test_a_deleted_croissant_json_is_missing_once(tmp_path):
  out = make(tmp_path)
  os.remove(out / "croissant.json")
  assert verify(str(out)).problems == (Problem(
      "croissant.json", "missing", "listed in dataset.json, not there"),)


def test_a_dataset_written_before_checksums_is_checked_by_size(tmp_path):
  out = make(tmp_path, checksums=False)
  meta = json.loads((out / "dataset.json").read_bytes())
  assert "checksums" not in meta and "sha256" not in json.dumps(meta)
  result = verify(str(out))
  assert result.ok
  assert result.checked == 0
  assert result.unchecked == tuple(sorted(
      [SHARD0, SHARD1, TEST, ERRORS, "report.html", "schema.pbtxt",
       "statistics.pb"]))
  assert lines(result) == [
      "note: 7 file(s) have no checksum (written before beam-tfrecords "
      "recorded them): their sizes were compared where dataset.json gives "
      "one (shards and indexes), the others only found",
      f"{out}: 0 file(s) intact ({_all_bytes(out):,} bytes read)"]


def test_a_dataset_written_before_checksums_still_catches_truncation(
    tmp_path):
  out = make(tmp_path, checksums=False)
  size = len(CONTENT[SHARD1])
  with open(out / SHARD1, "r+b") as f:
    f.truncate(7)
  _flip(out / TEST, 3)  # the same size: no checksum to tell
  result = verify(str(out))
  assert result.problems == (Problem(
      SHARD1, "truncated", f"7 bytes, {size:,} written"),)


def test_a_folder_without_success_is_not_a_finished_dataset(tmp_path):
  out = make(tmp_path)
  os.remove(out / "_SUCCESS")
  with pytest.raises(InputError, match="is not a finished dataset"):
    verify(str(out))


def test_several_problems_are_all_reported_sorted_by_file(tmp_path):
  out = make(tmp_path)
  _flip(out / "statistics.pb", 0)
  os.remove(out / TEST)
  with open(out / ERRORS, "r+b") as f:
    f.truncate(5)
  with open(out / "preview" / "train.parquet", "ab") as f:
    f.write(b"!")
  _write(str(out / "index" / "stray.index"), b"zz")
  result = verify(str(out))
  assert [(p.file, p.kind) for p in result.problems] == [
      (ERRORS, "truncated"),
      ("index/stray.index", "extra"),
      ("preview/train.parquet", "resized"),
      ("statistics.pb", "damaged"),
      (TEST, "missing"),
  ]
  assert result.checked == CHECKSUMMED - 4
  said = lines(result)
  assert said[:5] == [p.line() for p in result.problems]
  assert said[-1] == f"{out}: 5 problem(s); {CHECKSUMMED - 4} file(s) intact"


# --- Files that are not regular ones, and files that grow (issue 60) ------

def _within(seconds, call):
  """call() in a thread, failing (instead of hanging the suite) if it does
  not return within `seconds`: what it returned."""
  done = {}

  def run():
    try:
      done["value"] = call()
    except BaseException as e:  # pylint: disable=broad-except
      done["error"] = e
  thread = threading.Thread(target=run, daemon=True)
  thread.start()
  thread.join(seconds)
  assert not thread.is_alive(), f"still running after {seconds} s"
  if "error" in done:
    raise done["error"]
  return done["value"]


def _fifo(path):
  os.remove(path)
  os.mkfifo(path)


def _dev_zero(path):
  os.remove(path)
  os.symlink("/dev/zero", path)


def _folder(path):
  os.remove(path)
  os.mkdir(path)


@pytest.mark.parametrize("replace,what", [
    (_fifo, "a FIFO"),
    (_dev_zero, "a character device (through a symbolic link)"),
    (_folder, "a folder"),
], ids=["fifo", "symlink_to_dev_zero", "folder"])
def test_a_file_that_is_not_a_regular_one_is_named_not_read(tmp_path,
                                                            replace, what):
  out = make(tmp_path)
  replace(str(out / SHARD1))
  result = _within(30, lambda: verify(str(out)))
  assert result.problems == (Problem(
      SHARD1, "unreadable", f"{what}, not a regular file: not read"),)
  assert result.checked == CHECKSUMMED - 1
  assert result.num_bytes == _all_bytes(out) - (
      0 if replace is _folder else os.path.getsize(out / SHARD1))
  assert lines(result)[0] == (
      f"unreadable: {SHARD1}: {what}, not a regular file: not read")


def test_a_dataset_json_that_is_a_fifo_is_refused_not_read(tmp_path):
  out = make(tmp_path)
  _fifo(str(out / "dataset.json"))
  with pytest.raises(MalformedFileError, match="dataset.json: a FIFO, not "
                     "a regular file: not read"):
    _within(30, lambda: verify(str(out)))


def test_a_file_is_read_to_one_byte_past_its_listed_size(tmp_path,
                                                         monkeypatch):
  out = make(tmp_path)
  size = len(CONTENT[SHARD0])
  with open(out / SHARD0, "ab") as f:
    f.write(b"\0" * (3 << 20))  # 3 MiB more: a file that grew
  asked = {}
  sha256_of = fs.sha256_of

  def spy(path, read_bytes=8 << 20, limit=None):
    asked[os.path.relpath(path, out)] = limit
    return sha256_of(path, read_bytes, limit)
  monkeypatch.setattr(fs, "sha256_of", spy)
  result = verify(str(out))
  assert result.problems == (Problem(
      SHARD0, "resized", f"{size + (3 << 20):,} bytes, {size:,} written"),)
  assert asked[SHARD0] == size + 1
  assert asked["report.html"] == len(CONTENT["report.html"]) + 1
  # Read: every file but the grown one as it is, that one to its limit.
  assert result.num_bytes == _all_bytes(out) - (3 << 20) + 1


# --- A dataset replaced while it is verified (issue 60) -------------------

NEWER = SUCCESS.rsplit(b" ", 1)[0] + b" 2e09ebe38ed7"


def _overwritten(out):
  """What an overwrite does while verify reads: another build's
  _SUCCESS, and its shards (of other sizes)."""
  (out / "_SUCCESS").write_bytes(NEWER)
  (out / SHARD0).write_bytes(b"\x1f\x8b the newer build's shard")


def _being_published(out):
  """A publish under way: _SUCCESS moved away, a shard not there yet."""
  os.remove(out / "_SUCCESS")
  os.remove(out / SHARD1)


@pytest.mark.parametrize("switch", [_overwritten, _being_published],
                         ids=["overwritten", "being_published"])
def test_a_dataset_replaced_while_verified_says_so_not_damage(
    tmp_path, monkeypatch, switch):
  out = make(tmp_path)
  sha256_of = fs.sha256_of
  switched = []

  def switching(path, *args, **kwargs):
    if not switched:  # the first file read: the switch happens
      switched.append(path)
      switch(out)
    return sha256_of(path, *args, **kwargs)
  monkeypatch.setattr(fs, "sha256_of", switching)
  with pytest.raises(DatasetReplacedError) as caught:
    verify(str(out), threads=1)
  assert switched
  assert str(caught.value) == (
      f"{out} was replaced while verifying: a newer build published over "
      "it (or is publishing) after its dataset.json was read, so the files "
      "read were not all of the build it describes, and their sizes and "
      "checksums say nothing of damage. Verify it again")


def test_damage_under_the_same_success_throughout_is_damage(tmp_path):
  """_SUCCESS read back the same after every file: no replacement, the
  damage found is said."""
  out = make(tmp_path)
  (out / SHARD0).write_bytes(b"short")
  assert [(p.file, p.kind) for p in verify(str(out)).problems] == [
      (SHARD0, "truncated")]

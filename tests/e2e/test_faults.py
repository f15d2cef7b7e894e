"""Faults: deterministic files, atomic publishing, killed runs, thresholds."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords import BadRowsError, InputError

from tests.helpers.records import shard_paths, tf_records
from tests.helpers.datasets import dataset_files, same_file, assert_same_files
from tests.helpers.faults import SCHEMA, write_rows


@pytest.mark.slow
def test_same_bytes_with_different_worker_counts(tmp_path, monkeypatch):
  # Three files, one bad row in twenty: shards, errors/ and dataset.json.
  srcs = [write_rows(tmp_path / f"in{i}.csv", 3000 + i, bad_every=20)
          for i in range(3)]
  one = btr.build(SCHEMA, srcs, str(tmp_path / "one"), num_shards=3,
                  max_bad_fraction=1.0)
  two = btr.build(SCHEMA, srcs, str(tmp_path / "two"), num_shards=3,
                  max_bad_fraction=1.0, beam_args=["--direct_num_workers=2",
                             "--direct_running_mode=multi_processing"])
  # One encoding thread instead of one per core.
  from beam_tfrecords.transforms import batch_fn
  monkeypatch.setattr(batch_fn, "ENCODE_THREADS_MAX", 1)
  three = btr.build(SCHEMA, srcs, str(tmp_path / "three"), num_shards=3,
                    max_bad_fraction=1.0)
  assert one.info.counts.rows_rejected == 3 * 150
  assert_same_files(one.output, two.output)
  assert_same_files(one.output, three.output)
  # Shards are filled evenly and all exist.
  sizes = [s.num_records for s in one.splits["train"].shards]
  assert len(sizes) == 3 and max(sizes) - min(sizes) <= 3


def test_every_shard_exists_and_beam_reads_them(tf, tmp_path):
  src = write_rows(tmp_path / "in.csv", 5)
  out = str(tmp_path / "out")
  result = btr.build(SCHEMA, src, out, num_shards=8)
  shards = result.splits["train"].shards
  assert [s.file for s in shards] == [
      f"train-{i:05d}-of-00008.tfrecord.gz" for i in range(8)]
  assert sum(s.num_records for s in shards) == 5
  assert sum(1 for s in shards if s.num_records == 0) == 3
  # Empty shards are valid gzip; TensorFlow and Beam read every file.
  assert len(tf_records(tf, out)) == 5
  import apache_beam as beam
  from apache_beam.testing.util import assert_that, equal_to
  with beam.Pipeline() as p:
    read = p | beam.io.ReadFromTFRecord(os.path.join(out, "train-*"))
    assert_that(read | beam.combiners.Count.Globally(), equal_to([5]))


@pytest.mark.slow
def test_big_chunks_travel_as_gzip_members(tf, tmp_path):
  """Batches over 64 KiB are compressed before the shuffle; the
  concatenated members read back as one stream, in order."""
  src = write_rows(tmp_path / "in.csv", 20_000)
  out = str(tmp_path / "out")
  btr.build(SCHEMA, src, out, num_shards=2)
  ids = sorted(r["id"] for r in btr.iter_records(out))
  assert ids == list(range(20_000))
  assert len(tf_records(tf, out)) == 20_000
  with open(shard_paths(out)[0], "rb") as f:
    data = f.read()
  assert data.count(b"\x1f\x8b\x08") >= 1


def test_records_cross_the_shuffle_in_part_files_cleaned_up_after(
    tmp_path, monkeypatch):
  """Every batch's parts go to one part file under the staging directory
  (the shuffle carries their slices: names and sizes, whatever the parts'
  size), and the slices of GATHER_BATCHES batches go to a shard as one
  element; the shards are the bytes of a build whose shuffle carried the
  parts themselves, and no part file is left behind."""
  from beam_tfrecords.sinks import part_files, shards
  # 2,000 rows (30,684 bytes) in blocks of 5,600 bytes: 6 batches, as
  # 20,000 rows in blocks of 64 KiB were, for a tenth of the rows.
  src = write_rows(tmp_path / "in.csv", 2_000)
  monkeypatch.setattr(shards, "GATHER_BATCHES", 3)
  small_batches = {"block_size": 5_600}  # 6 batches of rows
  written, carried = [], []
  real_spilled, real_process = shards._DealFn._spilled, \
      shards._WriteShardFn.process

  def spilled(self, split, dealt):
    out = real_spilled(self, split, dealt)  # (path, crc32, parts)
    written.extend(part[2].path for _, part in out[2])
    return out

  def process(self, element):
    carried.extend(element[1])
    return real_process(self, element)

  monkeypatch.setattr(shards._DealFn, "_spilled", spilled)
  monkeypatch.setattr(shards._WriteShardFn, "process", process)
  spilled_out = btr.build(SCHEMA, src, str(tmp_path / "spilled"),
                          num_shards=4, format_options=small_batches,
                          resume=False)
  batches = len(set(written))
  assert batches == 6
  assert written and all("/.staging-" in p and "/.parts/train/" in p
                         for p in written)
  assert not any(os.path.exists(p) for p in written)
  # What crossed the shuffle: slices, gathered 3 batches to an element
  # (each batch has a part for every shard), and empty-shard markers.
  gathered = [p for p in carried if p is not None]
  assert len(gathered) == 4 * 6 // 3
  assert all(isinstance(g, shards.Gathered) and len(g.parts) == 3 and all(
      isinstance(p[2], part_files.Slice) for p in g.parts) for g in gathered)
  assert dataset_files(spilled_out.output) == [
      "README.md", "_SUCCESS", "croissant.json", "dataset.json"] + [
          f"index/train-0000{i}-of-00004.tfrecord.gz.index"
          for i in range(4)] + [
              "preview/train.parquet", "report.html", "schema.pbtxt",
              "statistics.pb", "statistics.state.json"] + [
                  f"train-0000{i}-of-00004.tfrecord.gz" for i in range(4)]
  # The parts themselves through the shuffle (no part directory, so no
  # units kept: --no-resume): the same bytes.
  monkeypatch.setattr(shards._DealFn, "_spilled",
                      lambda self, split, dealt: (None, 0, dealt))
  inline = btr.build(SCHEMA, src, str(tmp_path / "inline"), num_shards=4,
                     format_options=small_batches, resume=False)
  assert_same_files(spilled_out.output, inline.output)
  assert sorted(r["id"] for r in btr.iter_records(spilled_out.output)) == \
      list(range(2_000))


def test_threshold_failure_publishes_nothing(tmp_path):
  src = write_rows(tmp_path / "in.csv", 200, bad_every=10)  # 20 bad rows
  out = str(tmp_path / "out")
  first = btr.build(SCHEMA, write_rows(tmp_path / "ok.csv", 10), out)
  with pytest.raises(BadRowsError) as e:
    btr.build(SCHEMA, src, out, overwrite=True, max_bad_fraction=0.05)
  message = str(e.value)
  assert "20 of 200 rows (10.00%) were rejected: more than " \
      "--max-bad-fraction 0.05 allow" in message
  assert 'In feature "score": could not parse … as float' in message
  assert "in.csv row 4: In feature \"score\": could not parse 'oops' as " \
      "float" in message
  # The previous finished dataset is untouched.
  assert btr.dataset_info(out).counts == first.info.counts
  assert sorted(r["id"] for r in btr.iter_records(out)) == list(range(10))
  # The rejected rows are kept in the staging directory named.
  staging = [d for d in os.listdir(out) if d.startswith(".staging-")]
  assert len(staging) == 1 and staging[0] in message
  # ... without the records' part files (the shard holds them).
  assert dataset_files(os.path.join(out, staging[0])) == [
      "dataset.json", "errors/errors-00000-of-00001.jsonl",
      "index/train-00000-of-00001.tfrecord.gz.index", "report.html",
      "schema.pbtxt", "statistics.pb", "statistics.state.json",
      "train-00000-of-00001.tfrecord.gz"]
  # Under the limit it publishes; dataset.json lists the reasons.
  result = btr.build(SCHEMA, src, out, overwrite=True, max_bad_rows=20)
  (reason,) = result.info.errors.reasons
  assert reason.to_json() == {"reason": 'In feature "score": could not parse … as '
                              "float", "rows": 20,
                    "example": {"source": src, "row": 4,
                                "reason": 'In feature "score": could not '
                                          "parse 'oops' as float"}}


@pytest.mark.slow
def test_threshold_from_the_schema_and_cli_exit_code(tmp_path):
  src = write_rows(tmp_path / "in.csv", 50, bad_every=10)
  schema = tmp_path / "s.yaml"
  schema.write_text("name: faults\nmax_bad_rows: 2\nfeatures:\n"
                    "  id: {type: int64, required: true}\n"
                    "  score: float\n")
  out = str(tmp_path / "out")
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
       str(schema), "--input", src, "--output", out],
      capture_output=True, text=True, timeout=300)
  assert run.returncode == 3, run.stderr  # too many bad rows
  assert "5 of 50 rows (10.00%) were rejected: more than --max-bad-rows 2" \
      in run.stderr
  assert not os.path.exists(os.path.join(out, "_SUCCESS"))
  # The flag overrides the schema.
  result = btr.build(str(schema), src, out, max_bad_rows=5)
  assert result.rows_rejected == 5


def _start_build(src, out, extra=()):
  schema = os.path.join(os.path.dirname(out), "schema.json")
  with open(schema, "w") as f:
    json.dump(SCHEMA, f)  # JSON is YAML
  return subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema", schema,
       "--input", src, "--output", out, "--num-shards", "4", *extra],
      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
      start_new_session=True)


def _kill_when_staging_has_files(proc, out, timeout=120):
  deadline = time.time() + timeout
  while time.time() < deadline:
    staged = [os.path.join(root, f) for root, _, files in os.walk(out)
              if ".staging-" in root for f in files]
    if staged:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
      return staged
    if proc.poll() is not None:
      raise AssertionError("the build ended before it could be killed: "
                           + proc.stderr.read().decode())
    time.sleep(0.02)
  os.killpg(proc.pid, signal.SIGKILL)
  raise AssertionError("no staged file appeared")


@pytest.mark.slow
def test_killed_build_leaves_nothing_finished_and_rerun_is_identical(
    tmp_path):
  src = write_rows(tmp_path / "in.csv", 300_000, bad_every=1000)
  reference = str(tmp_path / "reference")
  btr.build(SCHEMA, src, reference, num_shards=4)
  out = str(tmp_path / "out")
  _kill_when_staging_has_files(_start_build(src, out), out)
  assert not os.path.exists(os.path.join(out, "_SUCCESS"))
  assert not [f for f in os.listdir(out) if f.endswith(".tfrecord.gz")]
  with pytest.raises(InputError, match="not a finished dataset"):
    btr.dataset_info(out)
  # A rerun (no --overwrite needed: nothing was finished) gives the bytes
  # of an uninterrupted run, and leaves no staging directory behind.
  btr.build(SCHEMA, src, out, num_shards=4)
  published = [f for f in dataset_files(out) if not f.startswith(".")]
  assert published == dataset_files(reference)
  for rel in published:
    assert same_file(out, reference, rel), rel


@pytest.mark.slow
def test_killed_overwrite_keeps_the_old_dataset_whole(tmp_path):
  out = str(tmp_path / "out")
  old = btr.build(SCHEMA, write_rows(tmp_path / "old.csv", 100), out,
                  num_shards=4)
  before = {f: open(os.path.join(out, f), "rb").read()
            for f in dataset_files(out)}
  src = write_rows(tmp_path / "new.csv", 300_000)
  _kill_when_staging_has_files(_start_build(src, out, ["--overwrite"]), out)
  after = {f: open(os.path.join(out, f), "rb").read()
           for f in dataset_files(out) if not f.startswith(".")}
  assert after == before
  assert btr.dataset_info(out).counts == old.info.counts


def test_beam_sink_writes_the_same_records(tf, tmp_path):
  src = write_rows(tmp_path / "in.csv", 200, bad_every=100)
  ours = btr.build(SCHEMA, src, str(tmp_path / "ours"), num_shards=2)
  beams = btr.build(SCHEMA, src, str(tmp_path / "beam"), num_shards=2,
                    sink="beam")
  assert beams.info.options.sink == "beam"
  assert [s.file for s in beams.splits["train"].shards] == [
      "train-00000-of-00002.tfrecord.gz", "train-00001-of-00002.tfrecord.gz"]
  assert beams.info.counts == ours.info.counts
  assert sorted(tf_records(tf, beams.output)) == sorted(
      tf_records(tf, ours.output))


# Slow: the fast tier's tests/unit/publish/test_journal.py::test_the_staged_dataset_replaces_the_old_and_nothing_else
# publishes over a dataset with files beside it that no dataset lists.
@pytest.mark.slow
def test_publish_leaves_files_it_did_not_make(tmp_path):
  out = tmp_path / "out"
  src = write_rows(tmp_path / "in.csv", 10)
  btr.build(SCHEMA, src, str(out), num_shards=2)
  # Files put next to a dataset of ours later are left alone by an
  # overwrite (only what the previous dataset.json lists goes).
  (out / "mine.tfrecord.gz").write_bytes(b"not ours")
  (out / "notes.txt").write_text("keep")
  btr.build(SCHEMA, src, str(out), num_shards=1, overwrite=True)
  assert sorted(os.listdir(out)) == [
      "README.md", "_SUCCESS", "croissant.json", "dataset.json", "errors",
      "index", "mine.tfrecord.gz", "notes.txt", "preview", "report.html",
      "schema.pbtxt", "statistics.pb", "statistics.state.json",
      "train-00000-of-00001.tfrecord.gz"]
  assert (out / "mine.tfrecord.gz").read_bytes() == b"not ours"
  assert os.listdir(out / "errors") == []  # no errors: no errors file


def test_a_readme_the_dataset_does_not_list_is_refused_before_the_build(
    tmp_path):
  """A README.md (or croissant.json, preview/) in the output that its
  dataset does not list, as a dataset of an older version with a file of
  the user's beside it has: refused before anything is read, not at the
  end of the build, and the dataset stays as it was."""
  out = tmp_path / "out"
  src = write_rows(tmp_path / "in.csv", 10)
  btr.build(SCHEMA, src, str(out), num_shards=1)
  meta = json.loads((out / "dataset.json").read_text())
  del meta["checksums"]["README.md"]  # as an older version's lists it
  (out / "dataset.json").write_text(json.dumps(meta, indent=2))
  (out / "README.md").write_text("my notes")
  before = dataset_files(str(out))
  with pytest.raises(InputError) as e:
    btr.build(SCHEMA, src, str(out), num_shards=2, overwrite=True)
  assert str(e.value).startswith(
      f"output {out} holds README.md, which a build writes (the dataset "
      "card, croissant.json, the previews) and the dataset there does not "
      "list")
  assert dataset_files(str(out)) == before
  assert (out / "README.md").read_text() == "my notes"


@pytest.mark.slow
def test_gzip_level_changes_the_bytes_not_the_records(tf, tmp_path):
  src = write_rows(tmp_path / "in.csv", 20_000)
  fast = btr.build(SCHEMA, src, str(tmp_path / "fast"))
  small = btr.build(SCHEMA, src, str(tmp_path / "small"), gzip_level=9)
  assert small.info.options.gzip_level == 9
  assert tf_records(tf, fast.output) == tf_records(tf, small.output)
  assert small.splits["train"].num_bytes < fast.splits["train"].num_bytes
  with pytest.raises(InputError, match="--gzip-level must be 1-9"):
    btr.build(SCHEMA, src, str(tmp_path / "bad"), gzip_level=0)


@pytest.mark.slow
def test_a_job_server_that_cannot_start_is_refused_in_one_line(tmp_path):
  """FlinkRunner / SparkRunner start a job server with `java -jar`: a jar
  that is not there, no Java, or a --job_port in use is refused before
  anything runs, in one line, exit code 2 (Beam: a traceback, or a Java
  stack and "Service failed to start up")."""
  import socket
  (tmp_path / "in.csv").write_text("id\n1\n")
  (tmp_path / "s.yaml").write_text(
      "name: n\nfeatures:\n  id: {type: int64}\n")
  jar = tmp_path / "jobserver.jar"
  jar.write_bytes(b"PK")
  base = [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
          "s.yaml", "--input", "in.csv", "--output", "out", "--runner",
          "FlinkRunner", "--flink_master", "localhost:1",
          "--environment_type", "PROCESS",
          "--environment_config", '{"command": "/bin/true"}']
  with socket.socket() as busy:
    busy.bind(("localhost", 0))
    busy.listen()
    port = busy.getsockname()[1]
    for flags, expected in (
        (["--flink_job_server_jar", "no/such.jar"],
         "error: --flink_job_server_jar no/such.jar: no such file. Give the "
         "path of Beam's Flink job-server jar"),
        ([f"--flink_job_server_jar={jar}", "--job_server_java_launcher",
          "no-such-java"],
         "error: the Flink job server runs on Java, but 'no-such-java' is "
         "not on PATH"),
        ([f"--flink_job_server_jar={jar}", f"--job_port={port}"],
         f"error: --job_port {port}: that port is in use on this machine, "
         "so the Flink job server cannot listen on it")):
      run = subprocess.run(base + flags, cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
      lines = run.stderr.strip().splitlines()
      assert run.returncode == 2 and len(lines) == 1, run.stderr[-3000:]
      assert lines[0].startswith(expected), lines[0]
  assert not (tmp_path / "out").exists()


def test_a_run_that_loses_the_rows_publishes_nothing(tmp_path, monkeypatch):
  """A runner that drops a step's outputs (Beam's DaskRunner drops what a
  DoFn emits in finish_bundle) reads 0 rows: the build fails, naming the
  runner, instead of publishing an empty dataset."""
  from beam_tfrecords.transforms import inputs as read_module
  src = tmp_path / "in.csv"
  src.write_text("id\n1\n2\n")
  monkeypatch.setattr(read_module._ReadUnitFn, "process",
                      lambda self, element: iter(()))
  out = tmp_path / "out"
  with pytest.raises(InputError) as e:
    btr.build({"name": "n", "features": {"id": {"type": "int64"}}},
              str(src), str(out))
  assert str(e.value).startswith(
      f"the DirectRunner read 0 rows, but the input holds rows ({src} has "
      "2 in its first batch): the runner lost them, and nothing was "
      "published")
  assert not (out / "_SUCCESS").exists()
  assert not (out / "dataset.json").exists()


def test_an_input_without_rows_builds_an_empty_dataset(tmp_path):
  src = tmp_path / "in.csv"
  src.write_text("id\n")
  out = tmp_path / "out"
  result = btr.build({"name": "n", "features": {"id": {"type": "int64"}}},
                     str(src), str(out))
  assert result.info.counts.rows_read == 0
  assert (out / "_SUCCESS").exists()

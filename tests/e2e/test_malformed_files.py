"""dataset.json, croissant.json and pin files of the wrong shape (issue
60): each is a MalformedFileError naming the file, from the readers,
`verify` and `inspect`, and one `error:` line with exit 2 from the
command line, never a KeyError, TypeError or AttributeError. A
croissant.json of the wrong shape is a problem `verify` reports (exit 1):
the readers do not read it."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli
from beam_tfrecords.core.errors import BeamTFRecordsError, MalformedFileError

from tests.helpers.faults import SCHEMA, write_rows
from tests.helpers.paths import ROOT


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """A small finished dataset (one split, one shard), built once."""
  folder = tmp_path_factory.mktemp("malformed")
  src = write_rows(folder / "in.csv", 40)
  return btr.build(SCHEMA, src, str(folder / "out"), num_shards=1).output


def _without(key):
  def change(value):
    del value[key]
  return change


def _set(path, new):
  """A change that sets value[path[0]][path[1]]... to `new`."""
  def change(value):
    for key in path[:-1]:
      value = value[key]
    value[path[-1]] = new
  return change


def _file_object(i):
  return lambda d: [n for n, e in enumerate(d["distribution"])
                    if e.get("@type") == "cr:FileObject"][i]


# (id, what is written: bytes, or a change of the file's JSON object, or
# "cut": the file's first half), for each file; and what the message says.
def _variants(empty):
  """The variants of every file; `empty`: what `{}` is said to be."""
  return [
      ("list", b"[]", "expected a JSON object, got a list"),
      ("empty_object", b"{}", empty),
      ("string", b'"x"', "expected a JSON object, got a string ('x')"),
      ("null", b"null", "expected a JSON object, got null"),
      ("invalid_utf8", b'{"name": "\xff\xfe"}', "not UTF-8 text (byte 10"),
      ("truncated", "cut", "not valid JSON ("),
  ]


DATASET_JSON = _variants("has no 'name'") + [
    ("no_splits", _without("splits"), "has no 'splits'"),
    ("records_a_string", _set(["splits", "train", "shards", 0, "records"],
                              "40"),
     "splits.train.shards[0].records: expected an integer, got a string "
     "('40')"),
    ("spec_of_another_kind", _set(["feature_spec", "id", "kind"], "Dense"),
     "feature_spec.id.kind: expected one of \"FixedLenFeature\""),
]
PIN = _variants("is not a pin file (btr.pin writes them") + [
    ("no_path", lambda d: d["datasets"][0].pop("path"),
     "datasets[0] has no 'path'"),
    ("records_a_number", _set(["datasets", 0, "records"], 7),
     "datasets[0].records: expected a string, got an integer (7)"),
    ("datasets_a_string", _set(["datasets"], "out"),
     "datasets: expected a list, got a string ('out')"),
    ("entry_a_list", _set(["datasets", 0], ["out"]),
     "datasets[0]: expected a JSON object, got a list"),
]
CROISSANT = _variants("has no 'distribution'") + [
    ("no_distribution", _without("distribution"), "has no 'distribution'"),
    ("no_content_url", lambda d: d["distribution"][_file_object(0)(d)].pop(
        "contentUrl"), "] has no 'contentUrl'"),
    ("sha256_a_number",
     lambda d: d["distribution"][_file_object(0)(d)].update(sha256=5),
     ".sha256: expected a string, got an integer (5)"),
    ("entries_strings", _set(["distribution"], ["dataset.json"]),
     "distribution[0]: expected a JSON object, got a string"),
]


def _write(file, how):
  """Writes a variant over `file` (a valid one, as written)."""
  with open(file, "rb") as f:
    data = f.read()
  if how == "cut":
    data = data[:len(data) // 2]
  elif callable(how):
    value = json.loads(data)
    how(value)
    data = json.dumps(value).encode()
  else:
    data = how
  with open(file, "wb") as f:
    f.write(data)


@pytest.fixture
def copy(built, tmp_path):
  out = str(tmp_path / "ds")
  shutil.copytree(built, out)
  return out


def _raises_naming(file, said, call):
  with pytest.raises(MalformedFileError) as caught:
    call()
  assert isinstance(caught.value, BeamTFRecordsError)
  assert caught.value.file == file
  assert str(caught.value).startswith(file)
  assert said in str(caught.value)


def _command(capsys, *argv):
  """main() as the command line runs it: (exit code, stdout, stderr)."""
  capsys.readouterr()
  code = cli.main(list(argv))
  out, err = capsys.readouterr()
  return code, out, err


def _one_error_line(err, file, said):
  (line,) = err.splitlines()
  assert line.startswith(f"error: {file}") and said in line, line


@pytest.mark.parametrize("how,said", [v[1:] for v in DATASET_JSON],
                         ids=[v[0] for v in DATASET_JSON])
def test_a_malformed_dataset_json_is_named_everywhere(copy, capsys, how,
                                                      said):
  file = os.path.join(copy, "dataset.json")
  _write(file, how)
  _raises_naming(file, said, lambda: btr.verify(copy))
  _raises_naming(file, said, lambda: btr.open(copy))
  _raises_naming(file, said, lambda: btr.dataset_info(copy))
  _raises_naming(file, said, lambda: list(btr.iter_records(copy)))
  _raises_naming(file, said, lambda: btr.load(copy, "train"))
  for command in ("inspect", "verify"):
    code, out, err = _command(capsys, command, copy)
    assert (code, out) == (cli.EXIT_INPUT, ""), (command, err)
    _one_error_line(err, file, said)


@pytest.mark.parametrize("how,said", [v[1:] for v in PIN],
                         ids=[v[0] for v in PIN])
def test_a_malformed_pin_is_named_everywhere(built, tmp_path, capsys, how,
                                             said):
  file = str(tmp_path / "window.json")
  btr.pin([built], file)
  _write(file, how)
  _raises_naming(file, said, lambda: btr.open(file))
  _raises_naming(file, said, lambda: list(btr.iter_records(file)))
  _raises_naming(file, said, lambda: btr.load(file, "train"))
  code, out, err = _command(capsys, "inspect", file)
  assert (code, out) == (cli.EXIT_INPUT, ""), err
  _one_error_line(err, file, said)


@pytest.mark.parametrize("how,said", [v[1:] for v in CROISSANT],
                         ids=[v[0] for v in CROISSANT])
def test_a_malformed_croissant_json_is_a_problem_verify_names(copy, capsys,
                                                              how, said):
  file = os.path.join(copy, "croissant.json")
  _write(file, how)
  (problem,) = btr.verify(copy).problems
  assert (problem.file, problem.kind) == ("croissant.json", "croissant")
  assert said in problem.detail
  code, out, err = _command(capsys, "verify", copy)
  assert (code, err) == (1, "")
  assert out.splitlines()[0] == problem.line()
  # The readers do not read it: the records are there.
  assert len(list(btr.iter_records(copy))) == 40
  assert _command(capsys, "inspect", copy)[0] == 0


def test_a_dataset_json_changed_since_its_publish_is_refused(copy, capsys):
  """A dataset.json of the right shape and other bytes (here one feature
  renamed, as one flipped bit can: every record would decode without it):
  the readers refuse it by the SHA-256 its _SUCCESS seals; verify names
  it damaged."""
  file = os.path.join(copy, "dataset.json")
  with open(file, "rb") as f:
    published = f.read()
  with open(os.path.join(copy, "_SUCCESS"), encoding="utf-8") as f:
    _, seal = f.read().splitlines()
  assert seal == ("dataset.json sha256 "
                  + hashlib.sha256(published).hexdigest())
  renamed = published.replace(b'"id"', b'"i$"')
  assert renamed != published
  with open(file, "wb") as f:
    f.write(renamed)
  said = ("is not the dataset.json its build published (its SHA-256 is "
          f"{hashlib.sha256(renamed).hexdigest()[:16]}..., _SUCCESS gives "
          f"{hashlib.sha256(published).hexdigest()[:16]}...)")
  _raises_naming(file, said, lambda: btr.open(copy))
  _raises_naming(file, said, lambda: btr.dataset_info(copy))
  _raises_naming(file, said, lambda: list(btr.iter_records(copy)))
  _raises_naming(file, said, lambda: btr.load(copy, "train"))
  problems = {(p.file, p.kind) for p in btr.verify(copy).problems}
  assert ("dataset.json", "damaged") in problems
  code, out, err = _command(capsys, "inspect", copy)
  assert (code, out) == (cli.EXIT_INPUT, "")
  _one_error_line(err, file, said)
  # Put back, it reads again.
  with open(file, "wb") as f:
    f.write(published)
  assert len(list(btr.iter_records(copy))) == 40


@pytest.mark.parametrize("command", ["verify", "inspect"])
def test_the_program_says_one_line_without_a_traceback(copy, command):
  file = os.path.join(copy, "dataset.json")
  _write(file, b"[]")
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", command, copy],
      capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert run.returncode == cli.EXIT_INPUT == 2
  assert run.stdout == ""
  assert run.stderr.splitlines() == [
      f"error: {file}: expected a JSON object, got a list (not a "
      "dataset.json a build writes: restore it from a copy, or build the "
      "dataset again)"]

"""beam_tfrecords/core/generations.py, on values: which generation a reader
reads, a publish that ends between two looks, and a listed file that is not
there."""

import hashlib
import os

import pytest

from beam_tfrecords.core import generations
from beam_tfrecords.core.errors import (DatasetReplacedError, InputError,
                                        MalformedFileError)
from beam_tfrecords.core.generations import (Guard, check_sealed, consistent,
                                             seal_of, sealed)
from beam_tfrecords.core.layout import JOURNAL, SUCCESS, staging_name


def test_a_publish_that_ends_between_the_two_looks_is_read(tmp_path,
                                                           monkeypatch):
  """No _SUCCESS at the first look; by the time the journal is looked
  for, the publish wrote its _SUCCESS and removed its staging folder:
  the reader reads the new generation, it does not call the dataset
  unfinished."""
  staging = tmp_path / staging_name("run1")
  staging.mkdir()
  (staging / JOURNAL).write_text("{}")
  looked = []

  def publishing(path):
    (tmp_path / SUCCESS).write_text("build-2 run1")
    os.remove(staging / JOURNAL)
    os.rmdir(staging)
    looked.append(path)
    return False

  monkeypatch.setattr(generations, "_publishing", publishing)
  assert consistent(str(tmp_path), lambda: "dataset.json") == (
      "dataset.json", "build-2 run1")
  assert looked == [str(tmp_path)]


def test_an_unfinished_dataset_and_a_long_switch_are_said_so(tmp_path):
  with pytest.raises(InputError, match="is not a finished dataset"):
    consistent(str(tmp_path), lambda: None)
  staging = tmp_path / staging_name("run1")
  staging.mkdir()
  (staging / JOURNAL).write_text("{}")
  with pytest.raises(DatasetReplacedError,
                     match="is being replaced by a new build right now"):
    consistent(str(tmp_path), lambda: None, wait=0.05)


def test_a_listed_file_that_is_not_there_is_said_missing(tmp_path):
  """A file dataset.json lists and the folder does not hold (removed, or
  a damaged dataset.json names another): the reader's error names it,
  not a raw FileNotFoundError; a replaced dataset is still said so."""
  (tmp_path / SUCCESS).write_text("build-1 run1")
  guard = Guard({str(tmp_path): "build-1 run1"})
  file = str(tmp_path / "train-00000-of-00002.tfrecord.Gz")
  raw = FileNotFoundError(2, "No such file or directory", file)
  error = guard.failed(file, raw)
  assert type(error) is InputError  # pylint: disable=unidiomatic-typecheck
  assert str(error) == (
      f"{file} is missing, and its dataset.json lists it: the dataset is "
      "incomplete (a file was removed or renamed after the build, or "
      "dataset.json was changed). Build it again or restore the file")
  assert error.__cause__ is raw
  other = OSError(5, "Input/output error")
  assert guard.failed(file, other) is other
  (tmp_path / SUCCESS).write_text("build-2 run2")
  assert isinstance(guard.failed(file, raw), DatasetReplacedError)


def test_success_seals_the_dataset_json_it_publishes(tmp_path):
  """The publish's line, then dataset.json's SHA-256; a description of
  other bytes is refused, naming the file and both digests; a _SUCCESS
  of a version before the seal checks nothing."""
  description = b'{"name": "r"}\n'
  token = sealed("beam-tfrecords 0.1.0 key run1\n", description)
  assert token == ("beam-tfrecords 0.1.0 key run1\ndataset.json sha256 "
                   + hashlib.sha256(description).hexdigest() + "\n")
  assert seal_of(token) == hashlib.sha256(description).hexdigest()
  assert seal_of("beam-tfrecords 0.1.0 key run1\n") is None
  file = str(tmp_path / "dataset.json")
  check_sealed(file, token, description)
  check_sealed(file, "beam-tfrecords 0.1.0 key run1\n", b"anything")
  changed = b'{"name": "s"}\n'
  with pytest.raises(MalformedFileError) as e:
    check_sealed(file, token, changed)
  assert e.value.file == file
  assert str(e.value) == (
      f"{file} is not the dataset.json its build published (its SHA-256 is "
      f"{hashlib.sha256(changed).hexdigest()[:16]}..., _SUCCESS gives "
      f"{hashlib.sha256(description).hexdigest()[:16]}...): it was damaged "
      "or edited since, and its records would be read by a description "
      "that is not theirs. Restore it from a copy, or build the dataset "
      "again")

"""beam_tfrecords/core/json_shapes.py, on values: JSON read back and its
shape checked, each wrong value named with the file, its key path and
what was found."""

import copy

import pytest

from beam_tfrecords.core.errors import InputError, MalformedFileError
from beam_tfrecords.core.json_shapes import (Each, Maybe, OneOf, check,
                                             kind_of, parse)

FILE = "out/ds/dataset.json"
SHARD = {"file": str, "records": int, "bytes": int, "sha256?": str}
SHAPE = {"name": str, "record": OneOf(("example", "sequence_example")),
         "splits": Each({"shards": [SHARD]}),
         "options": {"max_shard_bytes": Each(Maybe(int)),
                     "fraction?": float},
         "top?": [(object, int)]}
GOOD = {"name": "x", "record": "example",
        "splits": {"train": {"shards": [
            {"file": "a.gz", "records": 3, "bytes": 9}]}},
        "options": {"max_shard_bytes": {"train": None}, "fraction": 1},
        "top": [["a", 2]], "later": {"any": "thing"}}


def _with(path, value):
  """GOOD with the value at `path` set (KeyError: removed)."""
  out = copy.deepcopy(GOOD)
  holder = out
  for key in path[:-1]:
    holder = holder[key]
  if value is KeyError:
    del holder[path[-1]]
  else:
    holder[path[-1]] = value
  return out


def test_a_value_of_the_shape_passes():
  check(GOOD, SHAPE, FILE)
  # Optional keys may be absent or null; keys it does not name pass.
  check(_with(["top"], None), SHAPE, FILE)
  check(_with(["options", "fraction"], KeyError), SHAPE, FILE)


@pytest.mark.parametrize("value,message", [
    ([], f"{FILE}: expected a JSON object, got a list"),
    (None, f"{FILE}: expected a JSON object, got null"),
    ("x", f"{FILE}: expected a JSON object, got a string ('x')"),
    ({}, f"{FILE} has no 'name'"),
    (_with(["name"], 5), f"{FILE}: name: expected a string, got an integer "
     "(5)"),
    (_with(["record"], "rows"), f"{FILE}: record: expected \"example\" or "
     "\"sequence_example\", got a string ('rows')"),
    (_with(["splits", "train", "shards", 0, "records"], "3"),
     f"{FILE}: splits.train.shards[0].records: expected an integer, got a "
     "string ('3')"),
    (_with(["splits", "train", "shards", 0, "records"], True),
     f"{FILE}: splits.train.shards[0].records: expected an integer, got "
     "true"),
    (_with(["splits", "train", "shards", 0, "file"], KeyError),
     f"{FILE}: splits.train.shards[0] has no 'file'"),
    (_with(["splits", "train", "shards"], {"0": {}}),
     f"{FILE}: splits.train.shards: expected a list, got a JSON object"),
    (_with(["splits", "train", "shards", 0, "sha256"], 7),
     f"{FILE}: splits.train.shards[0].sha256: expected a string, got an "
     "integer (7)"),
    (_with(["options", "max_shard_bytes", "train"], "1GB"),
     f"{FILE}: options.max_shard_bytes.train: expected an integer, got a "
     "string ('1GB')"),
    (_with(["options", "fraction"], "all"),
     f"{FILE}: options.fraction: expected a number, got a string ('all')"),
    (_with(["top"], [["a", 2, 3]]),
     f"{FILE}: top[0]: expected a list of 2 items, got 3"),
    (_with(["top"], [["a", "2"]]),
     f"{FILE}: top[0][1]: expected an integer, got a string ('2')"),
], ids=["list", "null", "string", "empty_object", "text_a_number",
        "not_one_of", "integer_a_string", "integer_a_bool", "missing_key",
        "list_an_object", "optional_of_another_type", "maybe_of_another_type",
        "number_a_string", "pair_of_three", "pair_item"])
def test_a_value_of_another_shape_is_named(value, message):
  with pytest.raises(MalformedFileError) as caught:
    check(value, SHAPE, FILE, hint=" (fix it)")
  assert str(caught.value) == message + " (fix it)"
  assert caught.value.file == FILE
  assert isinstance(caught.value, InputError)


@pytest.mark.parametrize("data,message", [
    (b'{"a": "\xff"}', f"{FILE}: not UTF-8 text (byte 7: invalid start "
     "byte)"),
    (b'{"a": ', f"{FILE}: not valid JSON (Expecting value: line 1 column 7 "
     "(char 6))"),
    (b"", f"{FILE}: not valid JSON (Expecting value: line 1 column 1 "
     "(char 0))"),
], ids=["invalid_utf8", "truncated", "empty"])
def test_bytes_that_are_not_json_are_named(data, message):
  with pytest.raises(MalformedFileError) as caught:
    parse(data, FILE, " (fix it)")
  assert str(caught.value) == message + " (fix it)"
  assert caught.value.file == FILE


def test_a_long_value_is_shown_cut():
  said = kind_of("x" * 500)
  assert said.startswith("a string ('xxx") and "(502 characters)" in said
  assert kind_of(1.5) == "a number (1.5)" and kind_of(False) == "false"

"""beam_tfrecords/schema/field_paths.py, on values: Paths into nested input:
`source: user.address.city`, `ratings[].movie_id`."""

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError

from tests.helpers.nested import _inputs


@pytest.mark.parametrize("source,message", [
    ("user..name", "source 'user..name': the path 'user..name' is not "
     "valid: a name is empty (at character 6)"),
    ("`user.name", "a backtick is not closed"),
    ("user.name.first", "the path 'user.name.first' reads .first of "
     "user.name, which is a string value, not an object"),
    ("user[].name", "the path 'user[].name' takes every element of user, "
     "which is an object, not a list"),
])
def test_bad_paths_are_refused_before_the_run(tmp_path, source, message):
  _, parquet = _inputs(tmp_path)
  schema = {"name": "bad", "features": {"x": {"type": "string",
                                              "source": source}}}
  with pytest.raises(InputError) as e:
    btr.build(schema, parquet, str(tmp_path / "out"))
  assert message in str(e.value)
  assert not (tmp_path / "out").exists()

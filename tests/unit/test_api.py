"""The public API: every name beam_tfrecords exports imports, and
docs/api.md lists exactly them."""

import beam_tfrecords as btr


def test_every_public_name_imports():
  for name in btr.__all__:
    assert getattr(btr, name) is not None, name


def test_docs_api_lists_exactly_the_public_names():
  """docs/api.md's tables name every public name and nothing else; each
  has a docstring."""
  import pathlib
  import re
  page = (pathlib.Path(__file__).resolve().parents[2] / "docs" /
          "api.md").read_text()
  listed = set(re.findall(r"^\| `btr\.(\w+)`", page, re.M))
  assert listed == set(btr.__all__) - {"__version__"}
  # The trimmed API: about 20 names, and the errors (two more for damaged
  # and malformed files, issue 60).
  assert len(listed) <= 29
  for name in listed:
    assert (getattr(btr, name).__doc__ or "").strip(), name

"""The public API: every name beam_tfrecords exports imports."""

import beam_tfrecords as btr


def test_every_public_name_imports():
  for name in btr.__all__:
    assert getattr(btr, name) is not None, name

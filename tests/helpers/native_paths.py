"""Tests that run on both paths: the pure-Python reference and the native
core (beam_tfrecords_native).

    path = both_paths("numpy")   # in a test module: every test runs twice
"""

import pytest

from beam_tfrecords.core import native

# The native module, or None where it is not built.
NATIVE = native._load("")  # pylint: disable=protected-access


def both_paths(reference: str):
  """An autouse fixture: each test of the module that assigns it runs on
  the reference (BTR_NATIVE=0, its param named `reference`) and on the
  native core (param "native"; skipped where the core is not built: its
  absence is a failure where cargo is, tests/unit/encoding/
  test_messages.py)."""

  @pytest.fixture(autouse=True, params=[reference, "native"])
  def path(request, monkeypatch):
    if request.param == "native" and NATIVE is None:
      pytest.skip("the native core is not built")
    monkeypatch.setenv(native.ENV,
                       "1" if request.param == "native" else "0")
    return request.param

  return path

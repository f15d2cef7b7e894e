"""Headless Chromium for the tests that render pages (the report, the
viewer): Debian's package, which .ci/run installs."""

import shutil

import pytest


def chromium() -> str:
  """Chromium's executable; the test is skipped where there is none."""
  found = shutil.which("chromium") or shutil.which("chromium-browser") or \
      shutil.which("google-chrome")
  if found is None:
    pytest.skip("Chromium is not installed (apt-get install chromium; "
                ".ci/run installs it)")
  return found

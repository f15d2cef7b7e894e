"""What tests/e2e/test_publish_safety.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import os


# --- Foreign files, inputs inside the output, leftovers --------------------

def _tree(folder) -> dict:
  return {os.path.relpath(os.path.join(root, f), folder):
          open(os.path.join(root, f), "rb").read()
          for root, _, files in os.walk(folder) for f in files}

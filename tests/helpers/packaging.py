"""What tests/e2e/test_packaging.py shares with the tests split from it
(tests/unit, tests/cluster)."""

from tests.helpers.paths import ROOT


HERE = ROOT

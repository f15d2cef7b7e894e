"""The test suite: tests/unit, tests/e2e and tests/cluster (docs/development.md)."""

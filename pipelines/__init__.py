"""Runnable pipelines for the bundled use cases (docs/index.md lists them)."""

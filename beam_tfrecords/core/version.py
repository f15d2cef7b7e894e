"""The package version, read by setup.py and recorded in dataset.json."""

__version__ = "0.1.0"

"""Runnable pipelines for the use cases this tool grew from."""

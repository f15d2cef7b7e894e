"""Looking at data: the report, a window's trend, drift, the schema's
expectations, checking TFRecord files and proposing a schema from a
sample of input."""

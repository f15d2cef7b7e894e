"""Input files written from rows (CSV, optionally gzipped)."""

import gzip


def _csv_cell(value):
  if value is None:
    return ""
  if isinstance(value, list):
    value = "|".join(repr(v) if isinstance(v, float) else str(v) for v in value)
  if isinstance(value, float):
    value = repr(value)
  return '"' + str(value).replace('"', '""') + '"'


def write_csv(path, rows, gz=False):
  header = list(rows[0])
  lines = [",".join(header)] + [
      ",".join(_csv_cell(r[c]) for c in header) for r in rows]
  data = ("\n".join(lines) + "\n").encode("utf-8")
  if gz:
    data = gzip.compress(data)
  with open(path, "wb") as f:
    f.write(data)
  return str(path)

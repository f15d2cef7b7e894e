"""Memory does not grow with the data (issue 50): the DirectRunner's
FnApiRunner holds a stage's whole output between stages, so what crosses
the shards' GroupByKey must be names and sizes, never records. Eight
shards make each batch's part per shard small (the case that travelled
inline before the fix); a build of 4x the rows must peak within 20% of
the small one's. Before the fix these builds peaked at 562 and 898 MB
(1.60x); after, 452 and 497 MB (1.10x).

The peak is the build process's own VmHWM, read by the process as it
exits: a child's ru_maxrss includes the peak of the process it was forked
from (pytest's worker here), which hides the build's own."""

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

SCHEMA = """name: wide
features:
  id: {type: int64, required: true}
  a: {type: int64}
  b: {type: int64}
  c: {type: int64}
  x: {type: float}
  y: {type: float}
  word: {type: string}
  tag: {type: string}
"""
WORDS = [f"w{i:04d}" for i in range(3000)]

# Runs the CLI, then writes the process's peak RSS (kB) to argv[1] (at
# exit: the CLI ends with os._exit after the exit handlers).
_MEASURED = """
import atexit, runpy, sys
where = sys.argv.pop(1)

def peak():
  with open("/proc/self/status") as f:
    kb = next(l.split()[1] for l in f if l.startswith("VmHWM:"))
  with open(where, "w") as out:
    out.write(kb)

atexit.register(peak)
runpy.run_module("beam_tfrecords", run_name="__main__")
"""


def _files(folder, rows_per_file, files=2):
  """The input CSV files (made by numpy and Arrow: a Python loop took 12
  s of the test for the two sizes)."""
  folder.mkdir()
  rng = np.random.default_rng(7)
  words = pa.array(WORDS)
  tags = pa.array([f"t{i}" for i in range(50)])
  for f in range(files):
    n = rows_per_file
    table = pa.table({
        "id": np.arange(f * n, (f + 1) * n),
        "a": rng.integers(0, 10**9, n), "b": rng.integers(0, 10**6, n),
        "c": rng.integers(0, 100, n), "x": np.round(rng.random(n), 6),
        "y": np.round(rng.normal(0, 1, n), 5),
        "word": words.take(rng.integers(0, len(WORDS), n)),
        "tag": tags.take(rng.integers(0, 50, n))})
    with open(folder / f"part-{f}.csv", "wb") as out:
      out.write(b"id,a,b,c,x,y,word,tag\n")
      pacsv.write_csv(table, out, pacsv.WriteOptions(
          include_header=False, quoting_style="none"))
  return str(folder / "*.csv")


def _peak(tmp_path, inputs, out):
  """(peak RSS MB of the build's process, output MB, records)."""
  schema = tmp_path / "s.yaml"
  schema.write_text(SCHEMA)
  where = tmp_path / "peak"
  subprocess.run(
      [sys.executable, "-c", _MEASURED, str(where), "build", "-q",
       "--schema", str(schema), "--input", inputs, "--output", str(out),
       "--num-shards", "8"], check=True, stdout=subprocess.DEVNULL)
  size = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out)
             if n.endswith(".tfrecord.gz"))
  return int(where.read_text()) / 1024, size / 2**20


@pytest.mark.slow
def test_peak_memory_does_not_grow_with_the_rows(tmp_path):
  small = _peak(tmp_path, _files(tmp_path / "small", 250_000),
                tmp_path / "out-small")
  large = _peak(tmp_path, _files(tmp_path / "large", 1_000_000),
                tmp_path / "out-large")
  # The output is large enough to show: before the fix the large build
  # held about 4.5 times its output's growth over the small one's.
  assert large[1] > 60, large
  assert 250 < small[0], small  # the measure is the build's own
  assert large[0] < 1.2 * small[0], (small, large)

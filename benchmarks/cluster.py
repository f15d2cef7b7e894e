"""The cluster suite of benchmarks/run.py: the same input built with 1 and
with 2 workers on every engine that runs here, and whether the outputs are
identical.

* DirectRunner: its default (one worker process that encodes with a
  thread per core) against --direct_num_workers 2 (multi_processing).
* Dask: Beam's DaskRunner on a dask.distributed cluster on 127.0.0.1
  (`dask scheduler` + 1 or 2 `dask worker` processes, one thread each,
  and 1 worker of 2 threads). Dask workers live on between builds: each
  cluster does one small build first (untimed), since a worker's first
  task pays ~5 s of imports (TensorFlow, pyarrow, this package).
* Portable: PortableRunner against Beam's job service with two EXTERNAL
  worker pools, --sdk_worker_parallelism 1 and 2 (how Flink and Spark run
  Python; beam_tfrecords.testing.portable).

Each build is a fresh `beam-tfrecords build` process, timed from start to
exit (launcher planning and the commit included). "Fixed cost" is the
same build of 1,000 rows: start-up, planning, scheduling, commit.
"""

import os
import shutil
import sys
import time

from common import examples_input, run, same_files, show

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _build(workdir, name, schema, src, flags):
  out = os.path.join(workdir, f"cluster-{name}")
  shutil.rmtree(out, ignore_errors=True)
  return out, [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
               schema, "--input", src, "--output", out] + flags


def cluster_suite(args) -> None:
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.testing.dask import LocalDask
  from beam_tfrecords.testing.portable import LocalPortable
  src, schema = examples_input(args.workdir, args.rows)
  tiny, _ = examples_input(args.workdir, 1000)
  rows = []  # (engine, fixed s, 1 worker s, 2 workers s, same outputs)

  def timed(name, flags, source=src):
    out, cmd = _build(args.workdir, name, schema, source, flags)
    return run(cmd)[0], out

  def pair(engine, one, two):
    fixed, _ = timed("fixed", one, tiny)
    first, out1 = timed("1", one)
    second, out2 = timed("2", two)
    rows.append((engine, fixed, first, second, same_files(out1, out2)))

  started = time.time()
  pair("DirectRunner", [], ["--direct_num_workers=2",
                            "--direct_running_mode=multi_processing"])
  results = {}
  for workers, threads in ((1, 1), (2, 1), (1, 2)):
    with LocalDask(os.path.join(args.workdir, f"dask{workers}"),
                   workers=workers, threads=threads) as cluster:
      flags = ["--runner", "DaskRunner"] + cluster.args
      timed("warm", flags, tiny)  # the workers' first build imports
      fixed = timed("fixed", flags, tiny)[0]
      results[workers, threads] = (fixed,) + timed(f"dask{workers}", flags)
  for label, base in (("1 thread", (1, 1)), ("2 threads", (1, 2))):
    rows.append((f"Dask (1 worker of {label} vs 2 workers of 1 thread)",
                 results[base][0], results[base][1], results[2, 1][1],
                 same_files(results[base][2], results[2, 1][2])))
  with LocalPortable(os.path.join(args.workdir, "pools"), source=HERE,
                     pools=2) as cluster:
    pair("Portable (job service, 2 EXTERNAL worker pools)",
         cluster.args + ["--sdk_worker_parallelism=1"],
         cluster.args + ["--sdk_worker_parallelism=2"])
  mb = os.path.getsize(src) / 1e6
  show("cluster", f"cluster: {args.rows:,} rows, {mb:.1f} MB input, "
       f"{os.cpu_count()} cores (ideal speed-up here: "
       f"{min(2, os.cpu_count() or 1)}x); fixed cost: the same build of "
       "1,000 rows with 1 worker (start-up, planning, commit); one run of "
       f"each (the suite: {time.time() - started:.0f} s)",
       ["engine", "fixed cost s", "1 worker s", "2 workers s", "speed-up",
        "speed-up beyond the fixed cost", "outputs of 1 and 2"],
       [(engine, f"{fixed:.1f}", f"{one:.1f}", f"{two:.1f}",
         f"{one / two:.2f}x",
         f"{(one - fixed) / max(two - fixed, 0.1):.2f}x", same)
        for engine, fixed, one, two, same in rows])

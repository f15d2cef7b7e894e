"""The portable suite: the 12-column CSV at each of --portable-rows on the
DirectRunner and on PortableRunner against Beam's job service and a
worker pool on 127.0.0.1 (the path Flink and Spark use for Python),
against the DirectRunner, and whether the files are identical. It starts
servers."""

import os
import shutil
import sys

from common import examples_input, table, timed_cmd


def _same_outputs(a: str, b: str) -> str:
  """"identical" when every shard and errors/ file of `a` equals `b`'s."""
  import filecmp
  from beam_tfrecords.core.info import DatasetInfo
  info = DatasetInfo.from_directory(a)
  names = [f for split in info.splits.values() for f in split.files]
  names += [e.file for e in info.errors.files]
  differ = [n for n in names if not filecmp.cmp(
      os.path.join(a, n), os.path.join(b, n), shallow=False)]
  return f"{len(names)} files identical" if not differ else \
      f"DIFFER: {differ}"


def portable_suite(args) -> None:
  """The 12-column CSV built on the DirectRunner and on Beam's portable
  path: PortableRunner + local_job_service_main + an EXTERNAL worker pool
  whose Python has the package from the wheel only (how Flink and Spark
  run Python; beam_tfrecords.testing.portable)."""
  from beam_tfrecords.testing.portable import LocalPortable
  here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  with LocalPortable(os.path.join(args.workdir, "portable"),
                     source=here) as cluster:
    for rows in [int(r) for r in args.portable_rows.split(",")]:
      src, schema = examples_input(args.workdir, rows)
      results, outs = [], {}
      for name, flags in (("DirectRunner", []),
                          ("PortableRunner (job service + worker pool)",
                           cluster.args)):
        out = os.path.join(args.workdir, f"out-{len(outs)}")
        shutil.rmtree(out, ignore_errors=True)
        timed_cmd(results, name, [
            sys.executable, "-m", "beam_tfrecords", "build", "--schema",
            schema, "--input", src, "--output", out] + flags)
        outs[name] = out
      table("portable (peak RSS: the launcher's; the portable run's "
            "workers run in the pool's processes)", rows, src, results,
            [("DirectRunner", results[0].seconds)])
      print(f"\noutputs: {_same_outputs(*outs.values())}")

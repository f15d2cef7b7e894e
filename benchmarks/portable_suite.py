"""The portable suite: the 12-column CSV at each of --portable-rows on the
DirectRunner and on PortableRunner against Beam's job service and a
worker pool on 127.0.0.1 (the path Flink and Spark use for Python),
against the DirectRunner, and whether the files are identical. It starts
servers."""

import os
import shutil
import sys

from common import examples_input, same_files, show, timed_cmd


def portable_suite(args) -> None:
  """The 12-column CSV built on the DirectRunner and on Beam's portable
  path: PortableRunner + local_job_service_main + an EXTERNAL worker pool
  whose Python has the package from the wheel only (how Flink and Spark
  run Python; beam_tfrecords.testing.portable)."""
  from beam_tfrecords.testing.portable import LocalPortable
  here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  lines = []
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
      same = same_files(*outs.values())
      size = f"{rows:,}"
      for r in results:
        lines.append((size, r.name, f"{r.seconds:.1f}",
                      f"{rows / r.seconds:,.0f}",
                      f"{r.seconds - results[0].seconds:+.1f}",
                      same if r is results[-1] else ""))
        size = ""
  show("portable", f"portable: the 12-column CSV, one run of each, "
       f"{os.cpu_count()} cores; the PortableRunner's outputs against the "
       "DirectRunner's", ["rows", "runner", "wall s", "rows/s",
                          "s more than the DirectRunner", "outputs"], lines)

"""The cli suite: start-up of the commands that should start fast (--help,
build --help, and inspect, validate and infer-schema on local files), best
of --check-rounds, against importing Apache Beam (and TensorFlow) alone."""

import os
import shutil
import sys

from common import cli_cmd, examples_input, run, show


def cli_suite(args) -> None:
  """The commands that should start fast: --help, and inspect / validate /
  infer-schema on local files (no Beam or TensorFlow import), against the
  import of Apache Beam alone. The best of --check-rounds runs each."""
  src, schema = examples_input(args.workdir, min(args.rows, 10_000))
  out = os.path.join(args.workdir, "cli-out")
  if not os.path.exists(os.path.join(out, "_SUCCESS")):
    run(cli_cmd(args.workdir, schema, src, []))
    shutil.rmtree(out, ignore_errors=True)
    shutil.move(os.path.join(args.workdir, "out"), out)
  me = [sys.executable, "-m", "beam_tfrecords"]
  runs = [("beam-tfrecords --help", me + ["--help"]),
          ("beam-tfrecords build --help", me + ["build", "--help"]),
          ("beam-tfrecords inspect DATASET", me + ["inspect", out]),
          ("beam-tfrecords validate --schema S DATASET",
           me + ["validate", "--schema", schema, out]),
          ("beam-tfrecords infer-schema --input CSV",
           me + ["infer-schema", "--input", src]),
          ("baseline: python -c 'import apache_beam'",
           [sys.executable, "-c", "import apache_beam"]),
          ("baseline: python -c 'import tensorflow'",
           [sys.executable, "-c", "import tensorflow"])]
  lines = []
  for name, cmd in runs:
    best = min((run(cmd) for _ in range(args.check_rounds)),
               key=lambda r: r[0])
    lines.append((name, f"{best[0]:.2f}", f"{best[1]:,.0f}"))
  show("cli", f"cli: start-up of the commands, best of {args.check_rounds} "
       f"({os.cpu_count()} cores)", ["command", "wall s", "peak RSS MB"],
       lines)

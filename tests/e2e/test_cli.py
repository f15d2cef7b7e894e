"""The command line end to end: Beam's own options still work, and --help,
inspect, validate and infer-schema import neither Beam nor TensorFlow."""

import glob
import os
import subprocess
import sys
import textwrap

import pytest

import beam_tfrecords as btr
from beam_tfrecords import cli

from tests.helpers.cli_builds import _build, _write_inputs


def test_beam_options_and_repeated_inputs_still_work(tmp_path, capsys):
  schema, data = _write_inputs(tmp_path, [(1, 0.5)])
  other = tmp_path / "in2.csv"
  other.write_text("id,score\n2,0.25\n")
  assert cli.main(["build", "--schema", schema, "--input", data, "--input",
                   str(other), "--output", str(tmp_path / "out"),
                   "--direct_num_workers=1", "--runner", "DirectRunner",
                   "--job_name", "trust-test"]) == 0
  assert sorted(r["id"] for r in btr.iter_records(str(tmp_path / "out"))) \
      == [1, 2]


# --- A fast command line -----------------------------------------------------

@pytest.mark.parametrize("argv", [["--help"], ["build", "--help"],
                                  ["inspect", "--help"]],
                         ids=["help", "build_help", "inspect_help"])
def test_help_imports_neither_beam_nor_tensorflow(argv):
  code = textwrap.dedent(f"""\
      import sys
      from beam_tfrecords.cli import main
      try:
        main({argv!r})
      except SystemExit:
        pass
      heavy = [m for m in ("apache_beam", "tensorflow", "pyarrow")
               if m in sys.modules]
      print("heavy:", heavy)
      """)
  run = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, timeout=60)
  assert run.returncode == 0, run.stderr
  assert run.stdout.splitlines()[-1] == "heavy: []"


def test_the_command_line_sets_glibc_s_allocator_in_its_own_process():
  """runners.allocator.tune, with the real mallopt: called by the
  program (argv from sys.argv) and taken by glibc; BTR_MALLOC=0 leaves
  it alone."""
  import platform
  if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
    pytest.skip("glibc's mallopt")
  code = textwrap.dedent("""\
      import sys
      from beam_tfrecords.runners import allocator
      tuned = []
      real = allocator.tune
      allocator.tune = lambda: tuned.append(real())
      sys.argv = ["beam-tfrecords", "--version"]
      from beam_tfrecords.cli import main
      try:
        main()
      except SystemExit:
        pass
      print("tuned:", tuned)
      """)
  env = {k: v for k, v in os.environ.items()
         if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
  for value, said in (("1", "tuned: [True]"), ("0", "tuned: [False]")):
    run = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60,
                         env=dict(env, BTR_MALLOC=value))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == said


def test_a_build_by_the_command_line_freezes_what_it_imported(tmp_path):
  """runners.allocator.imports_frozen, for real: a build run as the
  program runs with Beam's, pyarrow's and our modules' objects frozen
  (out of the collector's reach), thawed after it, and publishes as
  usual; BTR_MALLOC=0 leaves them unfrozen. What the interpreter froze
  itself (375 objects at CPython 3.12.1's start, none on 3.11 or 3.13) is
  not a program's freeze, and is not left alone for one."""
  (tmp_path / "in.csv").write_text("id,x\n1,0.5\n2,0.25\n")
  (tmp_path / "s.yaml").write_text(
      "name: frozen\nfeatures:\n  id: {type: int64}\n  x: {type: float}\n")
  code = textwrap.dedent(f"""\
      import gc, sys
      start = gc.get_freeze_count()
      sys.argv = ["beam-tfrecords", "build", "--schema", {str(tmp_path / "s.yaml")!r},
                  "--input", {str(tmp_path / "in.csv")!r}, "--output",
                  {str(tmp_path / "out")!r}, "-q", "--overwrite"]
      from beam_tfrecords import cli
      from beam_tfrecords.building import builder
      during = []
      real = builder.build
      def build(*args, **kwargs):
        during.append(gc.get_freeze_count() > 100_000)
        return real(*args, **kwargs)
      builder.build = build
      code = cli.main()
      print(code, "frozen:", during, gc.get_freeze_count(),
            gc.get_freeze_count() == start)
      """)
  # (the thaw thaws the interpreter's own too; unfrozen, they stay)
  for value, said in (("1", "0 frozen: [True] 0 "),
                      ("0", "0 frozen: [False] ")):
    run = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=300,
                         env=dict(os.environ, BTR_MALLOC=value))
    assert run.returncode == 0, run.stderr
    last = run.stdout.splitlines()[-1]
    assert last.startswith(said), last
    if value == "0":
      assert last.endswith(" True"), last
    assert os.path.exists(tmp_path / "out" / "dataset.json")


@pytest.mark.slow
def test_inspect_validate_and_infer_schema_import_neither_beam_nor_tf(
    tmp_path):
  assert _build(tmp_path, rows=[(1, 0.5), (2, 0.25)]) == 0
  out, schema, data = (str(tmp_path / "out"), str(tmp_path / "s.yaml"),
                       str(tmp_path / "in.csv"))
  shard = glob.glob(os.path.join(out, "train-*.tfrecord.gz"))[0]
  for argv in (["inspect", out], ["inspect", shard],
               ["validate", "--schema", schema, out],
               ["infer-schema", "--input", data]):
    code = textwrap.dedent(f"""\
        import contextlib, io, sys
        from beam_tfrecords.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
          code = main({argv!r})
        heavy = [m for m in ("apache_beam", "tensorflow") if m in sys.modules]
        print(code, "heavy:", heavy)
        """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "0 heavy: []", (argv, run.stdout)

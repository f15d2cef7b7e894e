"""The documentation: docs/cli.md is what docs/gen_cli.py prints, the site
builds with no warnings, the README is short and links to every page, and
the code blocks of the README and of every page run.

Code blocks, per page, in order, in a temporary folder that links the
repository's schemas/ and pipelines/:
  ```python      run in one namespace per page (one interpreter per page);
  ```sh/```bash  run as shell when a line calls beam-tfrecords or python
                 (`pip install` and `make` lines are left out), with this
                 interpreter's bin/ first on PATH; a block of plain
                 `beam-tfrecords` lines (tests.helpers.docs.plain_command)
                 runs through cli.main in the page's interpreter instead
                 (what it sets up, logging say, stays for the page);
  ```text/```json/``` yaml ...: output or file contents, not run.
Right before a block, `<!-- snippet: not run, REASON -->` skips it (the
reason is required) and `<!-- snippet: write FILE -->` writes its text to
FILE in the folder instead of running it.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
from typing import List

import pytest

from tests.helpers.paths import ROOT
from tests.helpers.docs import Block, SHELL, SNIPPET_FILES, _shell_commands, blocks, runnable


def _outputs(block: Block) -> List[str]:
  """Dataset folders the block publishes, to check for _SUCCESS."""
  if block.lang in SHELL:
    return [m.group(1) for l in _shell_commands(block.text)
            if l.strip().startswith("beam-tfrecords build")
            for m in [re.search(r"--output\s+'?([^\s']+)", l)] if m]
  return re.findall(r"(?:build|WriteDataset)\([^)]*?\"(out/[^\"]+)\"",
                    block.text, re.S)


# Runs a page's steps in one interpreter: python blocks share a namespace.
DRIVER = textwrap.dedent("""\
    import json, os, sys, traceback
    steps = json.load(open(sys.argv[1]))
    namespace = {"__name__": "__main__"}
    from tests.helpers.docs import run_shell
    for step in steps:
      where = "%s:%d" % (step["file"], step["line"])
      print("=== %s (%s)" % (where, step["kind"]), flush=True)
      if step["kind"] == "write":
        with open(step["path"], "w") as f:
          f.write(step["text"])
        continue
      try:
        if step["kind"] == "python":
          exec(compile(step["text"], where, "exec"), namespace)
        else:
          run_shell(step["text"])
      except BaseException:
        traceback.print_exc()
        print("SNIPPET FAILED: %s" % where, flush=True)
        sys.exit(1)
      for out in step["outputs"]:
        if not os.path.exists(os.path.join(out, "_SUCCESS")):
          print("SNIPPET FAILED: %s: %s has no _SUCCESS" % (where, out))
          sys.exit(1)
    """)


def test_the_site_builds_with_no_warnings(tmp_path):
  pytest.importorskip("mkdocs", reason="mkdocs is not installed "
                      "(pip install -e '.[test]' brings it)")
  run = subprocess.run(
      [sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
       "-f", os.path.join(ROOT, "mkdocs.yml"), "-d", str(tmp_path / "site")],
      cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert run.returncode == 0, run.stdout + run.stderr
  assert "WARNING" not in run.stdout + run.stderr
  assert (tmp_path / "site" / "index.html").exists()
  assert (tmp_path / "site" / "report-movie-ratings.png").exists()


@pytest.mark.slow
@pytest.mark.parametrize("file", SNIPPET_FILES)
def test_snippets_run(file, tmp_path):
  steps = []
  for block in blocks(file):
    if block.mark and block.mark.startswith("write "):
      steps.append({"kind": "write", "file": file, "line": block.line,
                    "path": block.mark.split(" ", 1)[1], "text": block.text})
    elif runnable(block) and not block.mark:
      text = block.text
      if block.lang in SHELL:
        text = "\n".join(_shell_commands(text))
      steps.append({"kind": "python" if block.lang == "python" else "sh",
                    "file": file, "line": block.line, "text": text,
                    "outputs": _outputs(block)})
  if not any(s["kind"] != "write" for s in steps):
    pytest.skip(f"{file} has no snippet that runs here")
  work = tmp_path / "work"
  work.mkdir()
  for name in ("schemas", "pipelines"):
    os.symlink(os.path.join(ROOT, name), work / name)
  (tmp_path / "steps.json").write_text(json.dumps(steps))
  (tmp_path / "driver.py").write_text(DRIVER)
  env = dict(os.environ)
  env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
  env["PYTHONPATH"] = os.pathsep.join(
      [ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  run = subprocess.run(
      [sys.executable, str(tmp_path / "driver.py"),
       str(tmp_path / "steps.json")],
      cwd=work, env=env, capture_output=True, text=True, timeout=600)
  failed = re.findall(r"SNIPPET FAILED: (.*)", run.stdout)
  assert run.returncode == 0, (
      f"snippet failed: {failed[0] if failed else file}\n"
      + run.stdout[-4000:] + run.stderr[-4000:])

"""The documentation: docs/cli.md is what docs/gen_cli.py prints, the site
builds with no warnings, the README is short and links to every page, and
the code blocks of the README and of every page run.

Code blocks, per page, in order, in a temporary folder that links the
repository's schemas/ and pipelines/:
  ```python      run in one namespace per page (one interpreter per page);
  ```sh/```bash  run as shell when a line calls beam-tfrecords or python
                 (`pip install` and `make` lines are left out), with this
                 interpreter's bin/ first on PATH;
  ```text/```json/``` yaml ...: output or file contents, not run.
Right before a block, `<!-- snippet: not run, REASON -->` skips it (the
reason is required) and `<!-- snippet: write FILE -->` writes its text to
FILE in the folder instead of running it.
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from typing import List, NamedTuple, Optional

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
PAGES = sorted(name for name in os.listdir(DOCS) if name.endswith(".md"))
SNIPPET_FILES = ["README.md"] + [f"docs/{name}" for name in PAGES]
README_MAX_LINES = 250
REGENERATE = "make docs (or: python docs/gen_cli.py docs/cli.md)"

FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARK = re.compile(r"<!-- *snippet: *([^\n]*?) *-->\s*\Z")
SHELL = ("sh", "bash")
RUNS = re.compile(r"^(beam-tfrecords|python\S*|\S*/python\S*)\s")
LEFT_OUT = re.compile(r"^(pip install|make)\b")


class Block(NamedTuple):
  file: str      # README.md or docs/NAME.md
  line: int      # of the opening fence, from 1
  lang: str
  text: str
  mark: Optional[str]  # the snippet comment right before the block


def blocks(file: str) -> List[Block]:
  with open(os.path.join(ROOT, file)) as f:
    text = f.read()
  found = []
  for m in FENCE.finditer(text):
    before = MARK.search(text[:m.start()].rstrip() + "\n")
    line = text.count("\n", 0, m.start()) + 1
    found.append(Block(file, line, m.group(1), m.group(2),
                       before.group(1) if before else None))
  return found


def _shell_commands(text: str) -> List[str]:
  """The lines of a shell block that run, continuations joined."""
  lines = text.replace("\\\n", " ").splitlines()
  return [l for l in lines
          if l.strip() and not l.lstrip().startswith("#")
          and not LEFT_OUT.match(l.strip())]


def runnable(block: Block) -> bool:
  if block.lang == "python":
    return True
  if block.lang in SHELL:
    return any(RUNS.match(l.strip()) for l in _shell_commands(block.text))
  return False


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
    import json, os, subprocess, sys, traceback
    steps = json.load(open(sys.argv[1]))
    namespace = {"__name__": "__main__"}
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
          subprocess.run(["bash", "-e", "-o", "pipefail", "-c", step["text"]],
                         check=True)
      except BaseException:
        traceback.print_exc()
        print("SNIPPET FAILED: %s" % where, flush=True)
        sys.exit(1)
      for out in step["outputs"]:
        if not os.path.exists(os.path.join(out, "_SUCCESS")):
          print("SNIPPET FAILED: %s: %s has no _SUCCESS" % (where, out))
          sys.exit(1)
    """)


def test_cli_reference_is_generated_from_the_parser():
  spec = importlib.util.spec_from_file_location(
      "gen_cli", os.path.join(DOCS, "gen_cli.py"))
  gen_cli = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(gen_cli)
  with open(os.path.join(DOCS, "cli.md")) as f:
    committed = f.read()
  assert committed == gen_cli.markdown(), (
      f"docs/cli.md is stale: regenerate it with {REGENERATE}")


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


def test_every_page_is_in_the_navigation():
  with open(os.path.join(ROOT, "mkdocs.yml")) as f:
    config = yaml.safe_load(f)
  listed = {page for entry in config["nav"] for page in entry.values()}
  assert listed == set(PAGES)


def test_the_readme_is_short_and_links_to_every_page():
  with open(os.path.join(ROOT, "README.md")) as f:
    text = f.read()
  assert len(text.splitlines()) <= README_MAX_LINES
  linked = set(re.findall(r"\]\(docs/([\w-]+\.md)(?:#[^)]*)?\)", text))
  assert set(PAGES) - linked == set(), "pages the README does not link"
  for command in ("make demo", "make test"):
    assert command in text


def test_every_skipped_snippet_says_why():
  marks = [(b, b.mark) for f in SNIPPET_FILES for b in blocks(f) if b.mark]
  assert marks, "no snippet marks found: is the comment syntax right?"
  for block, mark in marks:
    where = f"{block.file}:{block.line}"
    if mark.startswith("write"):
      assert re.fullmatch(r"write [\w./-]+", mark), where
      continue
    assert re.fullmatch(r"not run, \S.*", mark, re.S), (
        f"{where}: a skipped snippet needs a reason: "
        f"<!-- snippet: not run, REASON -->, got {mark!r}")


def test_python_and_shell_blocks_are_found():
  """Guards the extraction: the README's own examples are seen as runnable."""
  readme = blocks("README.md")
  assert [b.lang for b in readme if runnable(b) and not b.mark] == [
      "sh", "python"]
  assert not any(runnable(b) for b in readme if b.lang == "text")


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

"""The documentation, read without running it: docs/cli.md is what
docs/gen_cli.py prints, every page is in the navigation, the README is
short and links to every page, and skipped snippets say why."""

import importlib.util
import os
import re

import yaml

from tests.helpers.docs import DOCS, PAGES, SNIPPET_FILES, blocks, runnable
from tests.helpers.paths import ROOT


README_MAX_LINES = 250
REGENERATE = "make docs (or: python docs/gen_cli.py docs/cli.md)"


def test_cli_reference_is_generated_from_the_parser():
  spec = importlib.util.spec_from_file_location(
      "gen_cli", os.path.join(DOCS, "gen_cli.py"))
  gen_cli = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(gen_cli)
  with open(os.path.join(DOCS, "cli.md")) as f:
    committed = f.read()
  assert committed == gen_cli.markdown(), (
      f"docs/cli.md is stale: regenerate it with {REGENERATE}")


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

"""What tests/e2e/test_docs.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import os
import re
import shlex
import subprocess
from typing import List, NamedTuple, Optional

from tests.helpers.paths import ROOT


DOCS = os.path.join(ROOT, "docs")
PAGES = sorted(name for name in os.listdir(DOCS) if name.endswith(".md"))
SNIPPET_FILES = ["README.md"] + [f"docs/{name}" for name in PAGES]


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


# Outside quotes and a trailing comment, what a shell would expand,
# redirect, pipe or chain.
_QUOTED = re.compile("'[^']*'" + r'|"[^"$`\\]*"')
_EXPANDS = re.compile(r"[|&;<>()$`*?\[\]{}~\\'\"]")
_COMMENT = re.compile(r"(^|\s)#.*$")


def plain_command(line: str) -> bool:
  """Whether a shell line is a `beam-tfrecords` command and nothing else
  (its arguments mean the same to shlex as to a shell): quoted spans
  taken out, a comment is a `#` after a space, and no `#` elsewhere, no
  quote left unmatched and nothing a shell expands remains."""
  bare = _COMMENT.sub("", _QUOTED.sub("", line))
  return (line.startswith("beam-tfrecords ") and "#" not in bare
          and not _EXPANDS.search(bare))


def run_shell(text: str) -> None:
  """Runs a docs shell block (test_docs' driver): a block of plain
  `beam-tfrecords` lines through the command's own entry point in this
  process (the same command and arguments, without 3 s of imports a
  line), any other block with bash. Raises on a failed command."""
  lines = [l.strip() for l in text.splitlines()]
  if not all(plain_command(l) for l in lines):
    subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], check=True)
    return
  from beam_tfrecords import cli  # pylint: disable=import-outside-toplevel
  for line in lines:
    code = cli.main(shlex.split(line, comments=True)[1:])
    if code:
      raise SystemExit(f"{line}: exit code {code}")

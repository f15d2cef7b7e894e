"""What the pages say about the code, checked against the code (issue 66).

The README and every page of docs/ are read as a user reads them, and
each claim of these kinds must hold:

  flag       a `--flag` (in backticks or a code block) is one that our
             parser (any command of beam_tfrecords.cli) or Beam's
             PipelineOptions takes; on a `beam-tfrecords` command line,
             only those; on a `python benchmarks/run.py` line, one of
             run.py's; other tools' flags are in OTHER_TOOLS, each saying
             whose it is;
  attribute  `btr.X` is a name `import beam_tfrecords as btr` has;
  error      an error class named in backticks (`SomethingError`,
             `btr.SomethingError`) exists: in the package, or Python's;
  raised     an error of beam_tfrecords.core.errors that a page says is
             raised (a sentence or a "raised when" table row) is raised
             or made somewhere in the library (`X(`), unless NOT_RAISED
             says why not;
  layout     the output layout the README and docs/index.md show is the
             one tests/unit/test_docs.py generates from core.layout (that
             file's test checks the pages; the kind is here so that
             other folders of pages are checked the same way).

Each finding names the page, the line and the claim. Another folder of
pages (an old commit's, say) is checked with

    python -m tests.unit.test_doc_claims FOLDER   # FOLDER/README.md, FOLDER/docs/*.md
"""

import argparse
import ast
import builtins
import dataclasses
import functools
import importlib
import os
import re
import sys
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple

import pytest

import beam_tfrecords as btr
from beam_tfrecords.core import errors as core_errors
from beam_tfrecords.core import layout
from tests.helpers.paths import ROOT
from tests.unit import test_docs


# Flags of other tools the pages show, each with the tool.
OTHER_TOOLS = {
    "--add-opens": "java (the Spark job server's JVM)",
    "--build-arg": "docker build",
    "--flink-master": "the Flink job server jar (Java)",
    "--spark-master-url": "the Spark job server jar (Java)",
    "--job-port": "Beam's job server jars (Java)",
    "--host": "dask scheduler",
    "--nthreads": "dask worker",
    "--memory-limit": "dask worker",
    "--worker_pool": "Beam's SDK container (docker run IMAGE --worker_pool)",
    "--service_port": "the worker image's entrypoint, after --worker_pool "
                      "(runners/worker_entrypoint.py)",
    "--jsonld": "mlcroissant validate",
    "--net": "docker run",
    "--no-cache-dir": "pip install",
    "--no-deps": "pip install",
    "--require-hashes": "pip install",
    "--strict": "mkdocs build",
    "--variant": "debootstrap",
    "--bridge": "dockerd",
    "--iptables": "dockerd",
    "--ip-forward": "dockerd",
    "--filter": "docker ps",
    "--metadata": "python -m beam_tfrecords.cli.flex_template",
    "--image": "gcloud dataflow flex-template build",
    "--sdk-language": "gcloud dataflow flex-template build",
    "--metadata-file": "gcloud dataflow flex-template build",
    "--template-file-gcs-location": "gcloud dataflow flex-template run",
    "--parameters": "gcloud dataflow flex-template run",
}
# Flags a page names on purpose although nothing takes them, by page.
REFUSED_ON_PURPOSE = {
    ("docs/operations.md", "--num_shards"):
        "shows the CLI refusing it with a did-you-mean",
}
# Errors of core.errors that no code raises, and why a page names them.
NOT_RAISED = {
    "BeamTFRecordsError": "the base class, to catch every error of ours",
    "EncodingError": "one bad value: a build puts its row in errors/ "
                     "(docs/api.md says so)",
}

BENCHMARK_RUN = os.path.join(ROOT, "benchmarks", "run.py")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
INLINE = re.compile(r"(`+)((?:(?!\n\s*\n).)+?)\1", re.S)
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
OUR_COMMAND = re.compile(
    r"^(?:\$ )?(?:\S*/)?(?:beam-tfrecords\b|python3? -m beam_tfrecords"
    r"(?![.\w]))")
BENCH_COMMAND = re.compile(r"^(?:\$ )?(?:\S*/)?python3? benchmarks/run\.py\b")
BTR_NAME = re.compile(r"(?<![\w.])btr\.([A-Za-z_]\w*)")
ERROR_NAME = re.compile(r"(?<![\w])((?:[\w]+\.)*)([A-Z]\w*Error)\b")
RAISED = re.compile(r"\brais(?:e|es|ed|ing)\b", re.I)
NEGATED = re.compile(r"\b(?:never|not|n't|no code)\s+(?:be\s+)?rais", re.I)


@dataclasses.dataclass(frozen=True)
class Bad:
  """A claim that does not hold."""
  page: str
  line: int
  kind: str
  claim: str
  why: str

  def __str__(self) -> str:
    return f"{self.page}:{self.line}: {self.kind}: {self.claim}: {self.why}"


@dataclasses.dataclass(frozen=True)
class Page:
  name: str  # README.md or docs/NAME.md
  text: str

  def line(self, offset: int) -> int:
    return self.text.count("\n", 0, offset) + 1

  def prose(self) -> str:
    """The text with code blocks blanked (offsets kept)."""
    return FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), self.text)

  def code(self) -> Iterator[Tuple[int, str, str]]:
    """(offset, text, command) of each code line and inline code span;
    command: "ours" or "bench" where the line runs that, else ""."""
    for block in FENCE.finditer(self.text):
      offset, command, continued = block.start(1), "", False
      for line in block.group(1).split("\n"):
        if not continued:  # (a line after a backslash: the same command)
          command = _command(line.strip())
        yield offset, line, command
        continued = line.rstrip().endswith("\\")
        offset += len(line) + 1
    for span in INLINE.finditer(self.prose()):
      yield span.start(2), span.group(2), _command(span.group(2))

  def units(self) -> Iterator[Tuple[int, str, str]]:
    """(offset, text, context) of each table row, its context the table's
    header row (which may say "raised when"), and of each sentence of
    the prose (no context)."""
    prose = self.prose()
    header = None
    for m in re.finditer(r"^.*$", prose, re.M):
      if not m.group(0).startswith("|"):
        header = None
        continue
      if header is None:
        header = m.group(0)
      yield m.start(), m.group(0), header
    for para in re.finditer(r"(?:^(?!\|)[^\n]*\S[^\n]*\n?)+", prose, re.M):
      for sentence in re.finditer(r"(?:[^.!?]|[.!?](?=\S))+[.!?]?",
                                  para.group(0)):
        yield para.start() + sentence.start(), sentence.group(0), ""


def _command(line: str) -> str:
  """ours / bench: the line runs beam-tfrecords / benchmarks/run.py."""
  return ("ours" if OUR_COMMAND.match(line) else
          "bench" if BENCH_COMMAND.match(line) else "")


def pages(root: str) -> List[Page]:
  """README.md and docs/*.md under root, in the README's reading order."""
  names = ["README.md"] + [f"docs/{n}" for n in sorted(
      os.listdir(os.path.join(root, "docs"))) if n.endswith(".md")]
  found = []
  for name in names:
    path = os.path.join(root, name)
    if os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        found.append(Page(name, f.read()))
  return found


# ---------------------------------------------------------------------------
# What the code takes, has and raises.


@functools.lru_cache(maxsize=None)
def our_flags() -> Set[str]:
  """Every --flag of every command of beam-tfrecords."""
  from beam_tfrecords.cli.args import parser
  flags: Set[str] = set()
  todo = [parser()]
  while todo:
    p = todo.pop()
    for action in p._actions:  # pylint: disable=protected-access
      flags |= {s for s in action.option_strings if s.startswith("--")}
      if isinstance(action, argparse._SubParsersAction):  # pylint: disable=protected-access
        todo += list(action.choices.values())
  return flags


@functools.lru_cache(maxsize=None)
def beam_flags() -> Set[str]:
  """Every --flag of Beam's option classes, the DaskRunner's included
  (its module registers them, as `--runner DaskRunner` imports it)."""
  importlib.import_module("apache_beam.runners.dask.dask_runner")
  from beam_tfrecords.runners.pipeline_options import beam_flags as flags
  return set(flags())


@functools.lru_cache(maxsize=None)
def benchmark_flags() -> Set[str]:
  """The --flags benchmarks/run.py's parser declares (read, not run: its
  import brings every suite)."""
  with open(BENCHMARK_RUN, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  return {arg.value for node in ast.walk(tree)
          if isinstance(node, ast.Call)
          and getattr(node.func, "attr", "") == "add_argument"
          for arg in node.args
          if isinstance(arg, ast.Constant) and str(arg.value).startswith("--")}


@functools.lru_cache(maxsize=None)
def library_sources() -> Tuple[str, ...]:
  texts = []
  for folder, _, files in os.walk(os.path.join(ROOT, "beam_tfrecords")):
    for name in sorted(files):
      if name.endswith(".py"):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
          texts.append(f.read())
  return tuple(texts)


@functools.lru_cache(maxsize=None)
def known_errors() -> Set[str]:
  """Error classes a page may name: ours (any module) and Python's."""
  ours = {m.group(1) for text in library_sources()
          for m in re.finditer(r"^\s*class (\w+Error)\b", text, re.M)}
  python = {n for n in dir(builtins) if n.endswith("Error")}
  return ours | python


def is_raised(error: str) -> bool:
  """Whether the library raises or makes `error` (not only defines or
  subclasses it)."""
  made = re.compile(rf"(?<![\w.])(?:raise\s+{error}\b|{error}\()")
  return any(made.search(line) and not line.lstrip().startswith("class ")
             for text in library_sources() for line in text.splitlines())


# ---------------------------------------------------------------------------
# The kinds of claim.


def flag_claims(page: Page) -> Iterator[Bad]:
  ours = our_flags() | beam_flags()
  anywhere = ours | benchmark_flags() | set(OTHER_TOOLS)
  for offset, text, command in page.code():
    for m in FLAG.finditer(text):
      flag = m.group(0).rstrip("-")
      if (page.name, flag) in REFUSED_ON_PURPOSE:
        continue
      if command == "ours" and flag not in ours:
        why = "neither beam-tfrecords nor Beam's PipelineOptions takes it"
      elif command == "bench" and flag not in benchmark_flags():
        why = "benchmarks/run.py takes no such flag"
      elif not command and flag not in anywhere:
        why = ("neither beam-tfrecords, Beam's PipelineOptions nor "
               "benchmarks/run.py takes it (another tool's? add it to "
               "OTHER_TOOLS with the tool)")
      else:
        continue
      yield Bad(page.name, page.line(offset + m.start()), "flag", flag, why)


def attribute_claims(page: Page) -> Iterator[Bad]:
  names = set(dir(btr))
  for m in BTR_NAME.finditer(page.text):
    if m.group(1) not in names:
      yield Bad(page.name, page.line(m.start()), "attribute",
                f"btr.{m.group(1)}", "import beam_tfrecords as btr has no "
                "such name (btr.__all__)")


def error_claims(page: Page) -> Iterator[Bad]:
  for offset, text, _ in page.code():
    for m in ERROR_NAME.finditer(text):
      qualifier, name = m.group(1), m.group(2)
      if qualifier == "btr.":
        if name not in btr.__all__:
          yield Bad(page.name, page.line(offset + m.start()), "error",
                    m.group(0), "btr has no such error (btr.__all__)")
      elif not qualifier and name not in known_errors():
        yield Bad(page.name, page.line(offset + m.start()), "error", name,
                  "no such error class in beam_tfrecords, nor Python's")
      elif qualifier.startswith("beam_tfrecords.") and not _has(
          qualifier[:-1], name):
        yield Bad(page.name, page.line(offset + m.start()), "error",
                  m.group(0), f"{qualifier[:-1]} has no such error")


def _has(module: str, name: str) -> bool:
  try:
    return hasattr(importlib.import_module(module), name)
  except ImportError:
    return False


def raised_claims(page: Page) -> Iterator[Bad]:
  ours = [n for n in core_errors.__all__
          if isinstance(getattr(core_errors, n), type)]
  for offset, unit, context in page.units():
    said = unit + "\n" + context
    if not RAISED.search(said) or NEGATED.search(said):
      continue
    for name in ours:
      m = re.search(rf"(?<![\w]){name}\b", unit)
      if m is None or name == "BeamTFRecordsError" or (
          name not in NOT_RAISED and is_raised(name)):
        continue
      why = (f"the page says it is raised; it is not: {NOT_RAISED[name]}"
             if name in NOT_RAISED else
             "the page says it is raised, and no code raises or makes it")
      yield Bad(page.name, page.line(offset + m.start()), "raised", name,
                why)


def layout_claims(page: Page) -> Iterator[Bad]:
  """The README's and docs/index.md's layout block against the generated
  one: each entry a file core.layout lists, and one that a default build
  of out/movie_ratings does not write ("only when ...") says when it is
  there; else the first line that differs."""
  if page.name not in test_docs.LAYOUT_PAGES:
    return
  shown = re.search(r"^```text\nout/movie_ratings/\n.*?^```", page.text,
                    re.M | re.S)
  want = test_docs.output_layout(test_docs.LAYOUT_PAGES[page.name])
  if shown is None:
    yield Bad(page.name, 1, "layout", "no output layout",
              "the page should show the generated one")
    return
  if shown.group(0) == want:
    return
  first = page.line(shown.start())
  entries = {e.name: e for e in layout.FINISHED + layout.BESIDE
             + layout.STAGED}
  found = []
  for start, name, text in _layout_entries(shown.group(0)):
    entry = entries.get(name)
    if entry is None:
      found.append(Bad(page.name, first + start, "layout", name,
                       "core.layout lists no such file"))
    elif entry.when.startswith("only") and " ".join(
        entry.when.split()) not in text:
      found.append(Bad(page.name, first + start, "layout", name,
                       f"shown as always there; core.layout: {entry.when}"))
  if not found:
    theirs, ours = shown.group(0).splitlines(), want.splitlines()
    at = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b),
              min(len(theirs), len(ours)))
    found.append(Bad(page.name, first + at, "layout",
                     theirs[at].strip() if at < len(theirs) else "its end",
                     "differs from core.layout's (regenerate: python -m "
                     "tests.unit.test_docs)"))
  yield from found


def _layout_entries(block: str) -> Iterator[Tuple[int, str, str]]:
  """(line within the block, name, its text joined) of each entry of a
  layout block: a line indented 2 or 4 spaces starts one (its name, then
  what it is), deeper lines go on with it."""
  lines = block.splitlines()
  for i, line in enumerate(lines):
    m = re.match(r"^(?: {2}| {4})([^\s,]+(?:, [^\s,]+)*)(.*)$", line)
    if not m:
      continue
    text = [m.group(2)]
    for more in lines[i + 1:]:
      if not more.startswith(" " * 6):
        break
      text.append(more.strip())
    yield i, m.group(1), " ".join(" ".join(text).split())


KINDS: Dict[str, Callable[[Page], Iterator[Bad]]] = {
    "flag": flag_claims,
    "attribute": attribute_claims,
    "error": error_claims,
    "raised": raised_claims,
    "layout": layout_claims,
}


def check(root: str, kinds=tuple(KINDS)) -> List[Bad]:
  """Every claim of these kinds that does not hold, in reading order."""
  found = [bad for page in pages(root) for kind in kinds
           for bad in KINDS[kind](page)]
  order = {page.name: i for i, page in enumerate(pages(root))}
  return sorted(found, key=lambda b: (order[b.page], b.line))


# ---------------------------------------------------------------------------
# The tests.


# (the layout: tests/unit/test_docs.py checks these pages' generated block)
@pytest.mark.parametrize("kind", ["flag", "attribute", "error", "raised"])
def test_the_pages_claims_hold(kind):
  bad = check(ROOT, (kind,))
  assert not bad, "claims of the docs the code does not bear out:\n" + \
      "\n".join(map(str, bad))


CASES = [
    # (name, README.md's text, the findings as str)
    ("a flag nobody takes",
     "Give `--num_shards` at least the worker count.\n",
     ["README.md:1: flag: --num_shards: neither beam-tfrecords, Beam's "
      "PipelineOptions nor benchmarks/run.py takes it (another tool's? add "
      "it to OTHER_TOOLS with the tool)"]),
    ("a flag of ours, one of Beam's, one of another tool's",
     "`--num-shards`, `--direct_num_workers 2`, `pip install --no-deps`\n",
     []),
    ("another tool's flag on our command line",
     "```sh\nbeam-tfrecords build --schema s.yaml \\\n"
     "    --no-deps --runner DirectRunner\n```\n",
     ["README.md:3: flag: --no-deps: neither beam-tfrecords nor Beam's "
      "PipelineOptions takes it"]),
    ("a benchmark flag run.py lacks",
     "```sh\npython benchmarks/run.py --suite examples --shuffle\n```\n",
     ["README.md:2: flag: --shuffle: benchmarks/run.py takes no such flag"]),
    ("a btr name that is not there",
     "```python\nbtr.load('out')\nbtr.read_dataset('out')\n```\n",
     ["README.md:3: attribute: btr.read_dataset: import beam_tfrecords as "
      "btr has no such name (btr.__all__)"]),
    ("an error class that does not exist",
     "A bad shard raises `ShardError`; a bad value `ValueError`.\n",
     ["README.md:1: error: ShardError: no such error class in "
      "beam_tfrecords, nor Python's"]),
    ("an error documented as raised that nothing raises",
     "| name | raised when |\n|---|---|\n"
     "| `btr.InputError` | an input is wrong |\n"
     "| `btr.EncodingError` | a row cannot be encoded |\n",
     ["README.md:4: raised: EncodingError: the page says it is raised; it "
      "is not: one bad value: a build puts its row in errors/ (docs/api.md "
      "says so)"]),
    ("an error said not to be raised",
     "`btr.EncodingError` is never raised by a build.\n", []),
]


@pytest.mark.parametrize("name,text,expected", CASES,
                         ids=[c[0] for c in CASES])
def test_the_checker_finds_what_does_not_hold(tmp_path, name, text,
                                              expected):
  (tmp_path / "docs").mkdir()
  (tmp_path / "README.md").write_text(text)
  found = check(str(tmp_path), ("flag", "attribute", "error", "raised"))
  assert [str(b) for b in found] == expected, name


def _layout_without_when(name: str) -> str:
  """The README's generated layout with `name`'s entry cut to its first
  line, so that it no longer says when the file is there."""
  lines, out, skipping = test_docs.output_layout(False).splitlines(), [], False
  for line in lines:
    if line.startswith("  " + name):
      out.append(f"  {name} one JSON object per rejected row")
      skipping = True
    elif skipping and line.startswith(" " * 6):
      continue
    else:
      skipping = False
      out.append(line)
  return "\n".join(out)


LAYOUT_CASES = [
    # (name, the README's layout block, the entry it gets wrong, the finding)
    ("the generated layout", test_docs.output_layout(False), None, None),
    ("errors/ shown as always there",
     _layout_without_when("errors/errors-00000-of-00001.jsonl"), "errors/",
     "layout: errors/errors-00000-of-00001.jsonl: shown as always there; "
     "core.layout: only when rows were rejected or dropped (on local disk "
     "the folder is there, empty, otherwise)"),
    ("a file core.layout does not list",
     test_docs.output_layout(False).replace("  _SUCCESS ", "  _DONE    "),
     "_DONE", "layout: _DONE: core.layout lists no such file"),
]


@pytest.mark.parametrize("name,block,entry,expected", LAYOUT_CASES,
                         ids=[c[0] for c in LAYOUT_CASES])
def test_the_checker_finds_a_layout_that_is_not_core_layouts(
    tmp_path, name, block, entry, expected):
  (tmp_path / "docs").mkdir()
  (tmp_path / "README.md").write_text(f"# Title\n\n{block}\n")
  found = [str(b) for b in check(str(tmp_path), ("layout",))]
  if entry is None:
    assert found == [], name
  else:
    # (the block starts on the page's line 3)
    line = 3 + next(i for i, text in enumerate(block.splitlines())
                    if text.startswith("  " + entry))
    assert found == [f"README.md:{line}: {expected}"], name


def test_the_allowed_flags_are_no_flags_of_ours_and_each_is_shown():
  """An allowed flag is another tool's, and a page shows it (else the
  entry goes)."""
  ours = our_flags() | beam_flags() | benchmark_flags()
  assert not set(OTHER_TOOLS) & ours
  shown = {m.group(0) for page in pages(ROOT) for _, text, _ in page.code()
           for m in FLAG.finditer(text)}
  assert set(OTHER_TOOLS) <= shown, set(OTHER_TOOLS) - shown
  for page, flag in REFUSED_ON_PURPOSE:
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
      assert flag not in ours and flag in f.read(), (page, flag)


def test_the_errors_not_raised_are_ours_and_not_raised():
  for name in NOT_RAISED:
    assert name in core_errors.__all__ or hasattr(core_errors, name), name
    assert not is_raised(name), f"{name} is raised now: drop it here"


def main(argv: Optional[List[str]] = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("folder", nargs="?", default=ROOT,
                 help="holds README.md and docs/*.md (default: this "
                 "checkout)")
  p.add_argument("--kinds", default=",".join(KINDS),
                 help="comma-separated, of " + ", ".join(KINDS))
  args = p.parse_args(argv)
  bad = check(args.folder, tuple(args.kinds.split(",")))
  for b in bad:
    print(b)
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())

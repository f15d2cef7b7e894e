"""The library's seams: one concept per module, checked on the source.

Packages import only from their own layer or lower ones (LAYERS), with no
import cycle between packages (imports inside functions count); functions
stay at most MAX_FUNCTION_LINES long; no module imports another's private
(underscore) names; encoding/ stays free of Apache Beam (the encoders take
rows and bytes; sources/ and transforms/ do the I/O). A module may be long
when it is one concept.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "beam_tfrecords"


def _modules():
  return sorted(PACKAGE.rglob("*.py"))


def _name(path: pathlib.Path) -> str:
  parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# NamedTuple's public methods carry an underscore (no clash with fields).
NAMEDTUPLE_API = {"_make", "_replace", "_asdict", "_fields", "_field_defaults"}


def _private(name: str) -> bool:
  return (name.startswith("_") and not name.startswith("__")
          and name not in NAMEDTUPLE_API)


def private_imports(path: pathlib.Path):
  """`from our.module import _x` and `module._x` on an imported module of
  ours, as "file:line: what"."""
  tree = ast.parse(path.read_text(), str(path))
  ours = set()  # local names bound to our modules
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom):
      module = node.module or ""
      if not (node.level or module.split(".")[0] == "beam_tfrecords"):
        continue
      for alias in node.names:
        if _private(alias.name):
          found.append(f"{path.name}:{node.lineno}: from {module} import "
                       f"{alias.name}")
        else:
          ours.add(alias.asname or alias.name)
    elif isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.split(".")[0] == "beam_tfrecords":
          ours.add(alias.asname or alias.name.split(".")[0])
  for node in ast.walk(tree):
    if (isinstance(node, ast.Attribute) and _private(node.attr)
        and isinstance(node.value, ast.Name) and node.value.id in ours):
      found.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
  return found


def test_the_checker_sees_private_imports(tmp_path):
  bad = tmp_path / "bad.py"
  bad.write_text("from beam_tfrecords.core.tfrecord_files import _x, fine\n"
                 "from beam_tfrecords import records\n"
                 "records._y(1)\n"
                 "import os\nos._exit\n")
  assert private_imports(bad) == [
      "bad.py:1: from beam_tfrecords.core.tfrecord_files import _x",
      "bad.py:3: records._y"]


@pytest.mark.parametrize("path", _modules(), ids=_name)
def test_no_module_imports_private_names(path):
  assert private_imports(path) == []


# The layers, lowest first: a package (or top-level module) of the
# library imports only from its own layer or lower ones, imports inside
# functions included, and no two import each other, even through others.
LAYERS = [
    {"core"},
    {"schema", "runners"},
    {"encoding"},
    {"read", "sources"},
    {"inspect"},
    {"sinks"},
    {"publish"},
    {"tft"},
    {"transforms"},
    {"building"},
    {"testing", "cli", "__main__", "__init__"},
]


def _unit(module: str) -> str:
  """beam_tfrecords.publish.lock -> sinks; beam_tfrecords -> __init__."""
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else "__init__"


def package_imports():
  """{(importer unit, imported unit): "file:line"} between the library's
  packages and top-level modules, every import statement counted."""
  found = {}
  for path in _modules():
    unit = _unit(_name(path))
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
      if isinstance(node, ast.ImportFrom) and node.level > 0:
        raise AssertionError(f"{path.name}:{node.lineno}: a relative "
                             "import (the layer checks read absolute ones)")
      if isinstance(node, ast.ImportFrom) and node.module:
        targets = ([f"{node.module}.{a.name}" for a in node.names]
                   if node.module == "beam_tfrecords" else [node.module])
      elif isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
      else:
        continue
      for target in targets:
        if target.startswith("beam_tfrecords."):
          to = _unit(target)
          if to != unit:
            found.setdefault((unit, to), f"{path.name}:{node.lineno}")
  return found


def _cycles(edges) -> list:
  """The groups of units that reach each other (Tarjan's algorithm)."""
  graph: dict = {}
  for a, b in edges:
    graph.setdefault(a, set()).add(b)
  index: dict = {}
  low: dict = {}
  stack: list = []
  groups = []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    for w in graph.get(v, ()):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      group = []
      while True:
        w = stack.pop()
        group.append(w)
        if w == v:
          break
      if len(group) > 1:
        groups.append(sorted(group))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return groups


def test_every_package_has_a_layer():
  units = {_unit(_name(p)) for p in _modules()}
  declared = set().union(*LAYERS)
  assert units - declared == set(), "add it to LAYERS"
  assert declared - units == set(), "gone: take it out of LAYERS"


def test_packages_import_only_their_layer_or_lower_ones():
  layer = {u: i for i, units in enumerate(LAYERS) for u in units}
  upward = {f"{a} -> {b} ({where})"
            for (a, b), where in package_imports().items()
            if layer[b] > layer[a]}
  assert upward == set()


def test_no_import_cycle_between_packages():
  assert _cycles(package_imports()) == []


def test_the_cycle_finder_finds_cycles():
  assert _cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [
      ["a", "b", "c"]]
  assert _cycles({("a", "b"), ("b", "c")}) == []


# Functions longer than this (without their docstring) are to be split.
MAX_FUNCTION_LINES = 80
# Known longer ones, at most as long as they are now (none today).
LONG_FUNCTIONS: dict = {}


def _function_lengths():
  """{module.function: lines without the docstring} of every function."""
  out = {}
  for path in _modules():
    module = _name(path).split(".", 1)[-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        lines = node.end_lineno - node.lineno + 1
        doc = node.body[0]
        if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) \
            and isinstance(doc.value.value, str):
          lines -= doc.end_lineno - doc.lineno + 1
        out[f"{module}.{node.name}"] = max(lines, out.get(
            f"{module}.{node.name}", 0))
  return out


def test_functions_are_at_most_80_lines():
  lengths = _function_lengths()
  too_long = {name: n for name, n in lengths.items()
              if n > LONG_FUNCTIONS.get(name, MAX_FUNCTION_LINES)}
  assert too_long == {}, "split these by what they do"
  shortened = {name for name, n in LONG_FUNCTIONS.items()
               if lengths.get(name, 0) <= MAX_FUNCTION_LINES}
  assert shortened == set(), "now short enough: take them out of " \
      "LONG_FUNCTIONS"


def test_encoding_imports_no_beam():
  for path in sorted((PACKAGE / "encoding").glob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import)
               else [node.module or ""] if isinstance(node, ast.ImportFrom)
               else [])
      assert not [n for n in names if n.split(".")[0] == "apache_beam"], \
          f"{path.name}:{node.lineno} imports Beam"


def test_no_two_modules_share_a_word_for_different_things():
  """transform (TensorFlow Transform: tft) vs transforms (Beam composites),
  read (reading finished datasets back) vs reading inputs (sources,
  transforms.inputs): renamed for good."""
  names = {_name(p) for p in _modules()}
  assert not {n for n in names if n.split(".")[-1] == "transform"}
  assert "beam_tfrecords.transforms.read" not in names
  assert {"beam_tfrecords.tft", "beam_tfrecords.schema.tft_section",
          "beam_tfrecords.read.reader",
          "beam_tfrecords.transforms.inputs"} <= names


def test_every_test_the_code_and_docs_name_exists():
  """A docstring or page that says `tests/.../test_x.py` (or
  `tests/.../test_x.py::test_y`) names a test file (and function) that is
  there."""
  import re
  root = PACKAGE.parent
  texts = list(_modules()) + sorted((root / "docs").rglob("*.md")) + [
      root / "README.md"]
  missing = []
  for path in texts:
    for m in re.finditer(r"tests/((?:\w+/)*test_\w+\.py)(?:::(\w+))?",
                         path.read_text()):
      test = root / "tests" / m.group(1)
      if not test.exists() or (m.group(2) and f"def {m.group(2)}("
                               not in test.read_text()):
        missing.append(f"{path.relative_to(root)}: {m.group(0)}")
  assert not missing


def test_the_tiers_name_tests_and_fixtures_that_exist():
  """The tiers are folders (tests/conftest.py): every test file is in
  tests/unit, tests/e2e or tests/cluster; a unit test file is named after
  the module it tests, tests/unit/<package>/test_<module>.py (or
  test_<module>_<aspect>.py; test_<package>.py for the package's
  __init__.py), and every cluster fixture conftest.py names is defined."""
  from tests import conftest
  tests = PACKAGE.parent / "tests"
  for path in tests.rglob("test_*.py"):
    parts = path.relative_to(tests).parts
    assert parts[0] in conftest.TIERS, path
    if parts[0] == "unit" and len(parts) > 2:
      package, name = parts[1], path.stem[len("test_"):]
      modules = {p.stem for p in (PACKAGE / package).glob("*.py")} - {
          "__init__"} | {package}
      assert len(parts) == 3 and any(
          name == m or name.startswith(m + "_") for m in modules), path
  sources = "".join(p.read_text() for p in tests.rglob("*.py"))
  for fixture in conftest.CLUSTER_FIXTURES:
    assert f"def {fixture}(" in sources, fixture

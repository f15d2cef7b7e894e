"""The library's seams: one concept per module, checked on the source.

Every module stays at most MAX_LINES long, no module imports another's
private (underscore) names, and encoding/ stays free of Apache Beam (the
encoders take rows and bytes; sources/ and transforms/ do the I/O).
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "beam_tfrecords"
MAX_LINES = 400


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
  bad.write_text("from beam_tfrecords.records import _x, fine\n"
                 "from beam_tfrecords import records\n"
                 "records._y(1)\n"
                 "import os\nos._exit\n")
  assert private_imports(bad) == [
      "bad.py:1: from beam_tfrecords.records import _x",
      "bad.py:3: records._y"]


@pytest.mark.parametrize("path", _modules(), ids=_name)
def test_no_module_imports_private_names(path):
  assert private_imports(path) == []


def test_every_module_is_at_most_400_lines():
  long = {_name(p): n for p in _modules()
          if (n := len(p.read_text().splitlines())) > MAX_LINES}
  assert long == {}, "split these by concept"


def test_encoding_imports_no_beam():
  for path in sorted((PACKAGE / "encoding").glob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import)
               else [node.module or ""] if isinstance(node, ast.ImportFrom)
               else [])
      assert not [n for n in names if n.split(".")[0] == "apache_beam"], \
          f"{path.name}:{node.lineno} imports Beam"


def test_no_two_modules_share_a_word_for_different_things():
  """transform (TensorFlow Transform) vs transforms (Beam composites), read
  (reading back) vs transforms.read (reading inputs): renamed for good."""
  names = {_name(p) for p in _modules()}
  assert not {"beam_tfrecords.transform", "beam_tfrecords.read",
              "beam_tfrecords.transforms.read"} & names
  assert {"beam_tfrecords.tft", "beam_tfrecords.reader",
          "beam_tfrecords.transforms.inputs"} <= names


def test_every_test_the_code_and_docs_name_exists():
  """A docstring or page that says `tests/test_x.py` (or
  `tests/test_x.py::test_y`) names a test file (and function) that is
  there."""
  import re
  root = PACKAGE.parent
  texts = list(_modules()) + sorted((root / "docs").rglob("*.md")) + [
      root / "README.md"]
  missing = []
  for path in texts:
    for m in re.finditer(r"tests/(test_\w+\.py)(?:::(\w+))?",
                         path.read_text()):
      test = root / "tests" / m.group(1)
      if not test.exists() or (m.group(2) and f"def {m.group(2)}("
                               not in test.read_text()):
        missing.append(f"{path.relative_to(root)}: {m.group(0)}")
  assert not missing


def test_the_tiers_name_tests_and_fixtures_that_exist():
  """tests/conftest.py's tier tables: every slow test, unit module and
  cluster fixture they name is there (a rename would silently move a test
  between tiers)."""
  from tests import conftest
  tests = PACKAGE.parent / "tests"
  for name in conftest.SLOW:
    module, function = name.split("::")
    assert f"def {function}(" in (tests / module).read_text(), name
  for module in conftest.UNIT_MODULES:
    assert (tests / f"{module}.py").exists(), module
  sources = "".join(p.read_text() for p in tests.glob("*.py"))
  for fixture in conftest.CLUSTER_FIXTURES:
    assert f"def {fixture}(" in sources, fixture

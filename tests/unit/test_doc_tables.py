"""docs/performance.md's tables are regenerated, not hand-kept (issue 66):
every table on the page sits between markers that `python
benchmarks/run.py --suite docs` writes (or keeps, saying why), each
section's command is the one the docs run runs, and the page writer
(benchmarks/doc_tables.py) reads back what it wrote, so that rewriting
the page with the rows it holds gives the same bytes. Read, not run: the
docs run itself takes about 35 minutes."""

import os
import sys

import pytest

from tests.helpers.paths import ROOT

BENCHMARKS = os.path.join(ROOT, "benchmarks")
PAGE = os.path.join(ROOT, "docs", "performance.md")


def _benchmark_modules():
  """benchmarks/ is not a package: its modules import each other by
  name, from their folder."""
  sys.path.insert(0, BENCHMARKS)
  try:
    import doc_tables  # pylint: disable=import-outside-toplevel
    import docs_suite  # pylint: disable=import-outside-toplevel
  finally:
    sys.path.remove(BENCHMARKS)
  return doc_tables, docs_suite


doc_tables, docs_suite = _benchmark_modules()
Table, Command, Stamp = doc_tables.Table, doc_tables.Command, doc_tables.Stamp


def _page() -> str:
  with open(PAGE, encoding="utf-8") as f:
    return f.read()


def test_every_table_is_between_markers_the_docs_suite_knows():
  assert docs_suite.page_problems(_page()) == []


def test_rewriting_the_page_with_what_it_holds_gives_the_same_bytes():
  page = _page()
  held = doc_tables.parsed(page)
  assert {k for k, _ in held} == {"table", "command", "stamp"}
  assert doc_tables.rewrite(page, held) == page


def test_each_section_shows_the_command_the_docs_run_runs():
  held = doc_tables.parsed(_page())
  for suite in docs_suite.PLAN:
    assert held["command", suite.name].argv == suite.argv, suite.name


def test_a_rewrite_changes_its_block_only():
  page = _page()
  new = Table.of("cli", "cli: best of 5", ["command", "wall s"],
                 [("beam-tfrecords --help", "0.25")])
  got = doc_tables.rewrite(page, {("table", "cli"): new})
  assert doc_tables.parsed(got)["table", "cli"] == new
  start = page.index("<!-- table: cli -->")
  end = page.index("<!-- /table: cli -->")
  assert got[:start] == page[:start]
  assert got[got.index("<!-- /table: cli -->"):] == page[end:]


TABLES = [
    ("cells as printed", Table.of(
        "t", "what was measured", ["approach", "wall s"],
        [("**build**", "**5.7**"), ("plain loop", "36.5")])),
    ("empty cells and a group's later rows", Table.of(
        "t", "", ["input", "approach", "ratio"],
        [("1,000 rows", "build", ""), ("", "plain loop", "1.00x")])),
    ("a pipe in a cell", Table.of(
        "t", "tags are a|b", ["tags", "n"], [("a|b", 2)])),
    ("no rows yet", Table.of("t", "Not yet measured.", ["step"], [])),
]


@pytest.mark.parametrize("name,table", TABLES, ids=[c[0] for c in TABLES])
def test_a_table_reads_back_as_it_was_written(name, table):
  del name
  assert Table.parse(table.name, table.markdown()) == table


@pytest.mark.parametrize("held", [
    Command(("--suite", "cli"), None), Command(("--suite", "cli"), 1.3),
    Stamp(None), Stamp("2026-11-30", "abc1234", 2, 35.2),
    Stamp("2026-11-30", "abc1234-dirty", 2, 9.9, quick=True)],
                         ids=str)
def test_a_command_and_a_stamp_read_back(held):
  parse = (Stamp.parse if isinstance(held, Stamp) else
           lambda text: Command.parse("cli", text))
  assert parse(held.markdown()) == held


def test_a_table_with_a_row_of_another_width_is_refused():
  with pytest.raises(ValueError, match="has 1 cells, the header 2"):
    Table.of("t", "", ["a", "b"], [("x",)])


KNOWN = {"tables": ["a"], "commands": ["p"], "kept": ["k"]}
STAMP = "<!-- stamp -->\n" + Stamp(None).markdown() + "\n<!-- /stamp -->\n"
BLOCK_A = "<!-- table: a -->\n| x |\n|---|\n<!-- /table: a -->\n"
BLOCK_P = ("<!-- command: p -->\n" + Command(("--suite", "cli"), None)
           .markdown() + "\n<!-- /command: p -->\n")
BLOCK_K = "<!-- kept: k -->\n| old |\n|---|\n<!-- /kept: k -->\n"
PROBLEMS = [
    ("as it should be", STAMP + BLOCK_A + BLOCK_P + BLOCK_K, []),
    ("a table outside the markers",
     STAMP + BLOCK_A + BLOCK_P + BLOCK_K + "\n| y |\n|---|\n",
     ["line 21: a table outside the markers (a table the docs run writes, "
      "or one it keeps)"]),
    ("a table the docs run does not know",
     STAMP + BLOCK_A + BLOCK_P + BLOCK_K + BLOCK_A.replace(": a", ": b"),
     ["<!-- table: b -->: the docs run does not know it"]),
    ("a table twice, a command missing",
     STAMP + BLOCK_A + BLOCK_A + BLOCK_K,
     ["<!-- table: a -->: 2 on the page, not 1",
      "<!-- command: p -->: 0 on the page, not 1"]),
    ("no stamp", BLOCK_A + BLOCK_P + BLOCK_K,
     ["<!-- stamp -->: 0 on the page, not 1"]),
    ("a marker without its pair",
     STAMP + BLOCK_A + BLOCK_P + BLOCK_K + "<!-- table: a -->\n",
     ["line 20: a marker without its pair: <!-- table: a -->"]),
    ("a table in a code block is no table",
     STAMP + BLOCK_A + BLOCK_P + BLOCK_K + "```text\n| y |\n```\n", []),
]


@pytest.mark.parametrize("name,page,expected", PROBLEMS,
                         ids=[c[0] for c in PROBLEMS])
def test_problems_of_a_page(name, page, expected):
  del name
  assert doc_tables.problems(page, **KNOWN) == expected


def test_moved_names_the_figures_that_moved_by_more_than_a_tenth():
  old = Table.of("t", "", ["rows", "build", "wall s", "peak RSS MB"],
                 [("1,000", "before", "10.0", "500"),
                  ("", "now", "5.0", "450"),
                  ("10,000", "now", "30.0", "480")])
  new = Table.of("t", "", ["rows", "build", "wall s", "CPU s"],
                 [("1,000", "before", "10.5", "9"),
                  ("", "now", "**4.0**", "7"),
                  ("10,000", "now", "40.0", "30")])
  assert list(doc_tables.moved(old, new)) == [
      "t: 1,000, now; wall s: 5.0 -> **4.0**",
      "t: 10,000, now; wall s: 30.0 -> 40.0"]

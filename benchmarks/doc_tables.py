"""The suites' tables, and docs/performance.md, whose tables
`python benchmarks/run.py --suite docs` rewrites in place (issue 66).

What a run writes into the page sits between two HTML comments, which
the rendered page does not show:

    <!-- table: NAME -->     a suite's table: its caption, then the table
    <!-- /table: NAME -->
    <!-- command: SUITE -->  a section's command (one suite, as the docs
    <!-- /command: SUITE --> run runs it) and how long it took
    <!-- stamp -->           the page's one date, commit, cores and the
    <!-- /stamp -->          run's length
    <!-- kept: NAME -->      a table the docs run cannot make (docs_suite
    <!-- /kept: NAME -->     KEPT says why): left as it is

Each kind reads back into what wrote it, so rewriting a page with what it
holds gives the same bytes (tests/unit/test_doc_tables.py). No imports
beyond the standard library: the unit tests load this file.
"""

import re
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

MARKED = re.compile(
    r"<!-- (?P<kind>table|command|stamp|kept)(?:: (?P<name>[\w-]+))? -->\n"
    r"(?P<body>.*?)"
    r"<!-- /(?P=kind)(?:: (?P=name))? -->", re.S)
OPENING = re.compile(r"<!-- /?(?:table|command|stamp|kept)\b[^>]*-->")
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
_PIPE = re.compile(r"(?<!\\)\|")


def _cells(line: str) -> Tuple[str, ...]:
  inner = line.strip()[1:-1]
  return tuple(c.strip().replace("\\|", "|") for c in _PIPE.split(inner))


def _line(cells: Sequence[str]) -> str:
  return "|" + "|".join(f" {c.replace('|', chr(92) + '|')} " if c else " "
                        for c in cells) + "|"


class Table(NamedTuple):
  """A table as a suite prints it and as the page holds it: a caption
  (what was measured: sizes, rounds; one paragraph, may be empty), a
  header and rows of cells (text as printed)."""
  name: str
  caption: str
  header: Tuple[str, ...]
  rows: Tuple[Tuple[str, ...], ...]

  @classmethod
  def of(cls, name: str, caption: str, header: Sequence[str],
         rows: Sequence[Sequence[object]]) -> "Table":
    """A table whose cells are turned into text (str())."""
    width = len(header)
    for row in rows:
      if len(row) != width:
        raise ValueError(f"table {name}: row {row!r} has {len(row)} cells, "
                         f"the header {width}")
    return cls(name, caption, tuple(header),
               tuple(tuple(str(c) for c in row) for row in rows))

  def markdown(self) -> str:
    lines = [self.caption, ""] if self.caption else []
    lines.append(_line(self.header))
    lines.append("|" + "---|" * len(self.header))
    lines += [_line(row) for row in self.rows]
    return "\n".join(lines)

  @classmethod
  def parse(cls, name: str, text: str) -> "Table":
    """The table that markdown() wrote as `text`."""
    lines = text.split("\n")
    first = next((i for i, l in enumerate(lines) if l.startswith("|")),
                 None)
    if first is None or len(lines) < first + 2:
      raise ValueError(f"table {name}: no table between its markers")
    caption = "\n".join(lines[:first])
    if caption:
      if not caption.endswith("\n"):
        raise ValueError(f"table {name}: a blank line must end the caption")
      caption = caption[:-1]
    header = _cells(lines[first])
    if lines[first + 1] != "|" + "---|" * len(header):
      raise ValueError(f"table {name}: line 2 of the table is not "
                       f"|{'---|' * len(header)}")
    rows = lines[first + 2:]
    if not all(r.startswith("|") for r in rows):
      raise ValueError(f"table {name}: text after the table (prose goes "
                       "outside the markers)")
    return cls(name, caption, header, tuple(_cells(r) for r in rows))

  def to_json(self) -> dict:
    return {"name": self.name, "caption": self.caption,
            "header": list(self.header), "rows": [list(r) for r in self.rows]}

  @classmethod
  def from_json(cls, data: dict) -> "Table":
    return cls(data["name"], data["caption"], tuple(data["header"]),
               tuple(tuple(r) for r in data["rows"]))


class Command(NamedTuple):
  """A section's command (run.py's arguments) and the minutes it took in
  the docs run (None: not yet timed)."""
  argv: Tuple[str, ...]
  minutes: Optional[float]

  def markdown(self) -> str:
    took = (f"It took {self.minutes:.1f} minutes in the run that made this "
            "page's tables." if self.minutes is not None else
            "Not yet timed: `--suite docs` says how long it takes.")
    return ("<!-- snippet: not run, a benchmark (how long: below) -->\n"
            "```sh\npython benchmarks/run.py " + " ".join(self.argv) +
            "\n```\n\n" + took)

  @classmethod
  def parse(cls, name: str, text: str) -> "Command":
    m = re.fullmatch(
        r"<!-- snippet: not run, a benchmark \(how long: below\) -->\n"
        r"```sh\npython benchmarks/run\.py (?P<argv>[^\n]*)\n```\n\n"
        r"(?:It took (?P<min>\d+\.\d) minutes in the run that made this "
        r"page's tables\.|Not yet timed: `--suite docs` says how long it "
        r"takes\.)", text)
    if not m:
      raise ValueError(f"command {name}: not as Command.markdown() writes "
                       "it")
    return cls(tuple(m.group("argv").split()),
               float(m.group("min")) if m.group("min") else None)


class Stamp(NamedTuple):
  """The page's one date: when, at which commit, on how many cores, in how
  many minutes the docs run made every table (None: not yet)."""
  date: Optional[str]
  commit: str = ""
  cores: int = 0
  minutes: float = 0.0
  quick: bool = False

  PENDING = ("**Not yet regenerated.** The tables below were measured on "
             "the dates their captions give, most of them before the "
             "native encoding core (2026-11-28), and await one run of "
             "`python benchmarks/run.py --suite docs`, which rewrites them "
             "all (issue 66).")

  def markdown(self) -> str:
    if self.date is None:
      return self.PENDING
    quick = (" **with --quick: tiny sizes, a smoke test of the run, no "
             "figures to quote**" if self.quick else "")
    return (f"Every table on this page comes from one run of `python "
            f"benchmarks/run.py --suite docs`{quick}, on {self.date} at "
            f"commit {self.commit}, on {self.cores} cores; it took "
            f"{self.minutes:.1f} minutes. Each section's command ran in it "
            "and made that section's tables.")

  @classmethod
  def parse(cls, text: str) -> "Stamp":
    if text == cls.PENDING:
      return cls(None)
    m = re.fullmatch(
        r"Every table on this page comes from one run of `python "
        r"benchmarks/run\.py --suite docs`(?P<quick> \*\*with --quick: tiny "
        r"sizes, a smoke test of the run, no figures to quote\*\*)?, on "
        r"(?P<date>\d{4}-\d\d-\d\d) at commit (?P<commit>\S+), on "
        r"(?P<cores>\d+) cores; it took (?P<min>\d+\.\d) minutes\. Each "
        r"section's command ran in it and made that section's tables\.",
        text)
    if not m:
      raise ValueError("stamp: not as Stamp.markdown() writes it")
    return cls(m.group("date"), m.group("commit"), int(m.group("cores")),
               float(m.group("min")), bool(m.group("quick")))


class Marked(NamedTuple):
  """A marked text of the page."""
  kind: str   # table, command, stamp or kept
  name: str   # "" for the stamp
  body: str   # the text between the markers, without their newlines
  line: int   # of the opening marker, from 1


def marked(page: str) -> List[Marked]:
  """The page's marked texts, in order."""
  found = []
  for m in MARKED.finditer(page):
    body = m.group("body")
    if not body.endswith("\n"):
      raise ValueError(f"line {page.count(chr(10), 0, m.start()) + 1}: "
                       f"<!-- /{m.group('kind')} --> must start a line")
    found.append(Marked(m.group("kind"), m.group("name") or "",
                        body[:-1], page.count("\n", 0, m.start()) + 1))
  return found


def parsed(page: str) -> Dict[Tuple[str, str], object]:
  """What each marked text that a run writes holds: {(kind, name):
  Table / Command / Stamp}; kept tables are left out (nothing writes
  them)."""
  out: Dict[Tuple[str, str], object] = {}
  for b in marked(page):
    if b.kind == "table":
      out[b.kind, b.name] = Table.parse(b.name, b.body)
    elif b.kind == "command":
      out[b.kind, b.name] = Command.parse(b.name, b.body)
    elif b.kind == "stamp":
      out[b.kind, b.name] = Stamp.parse(b.body)
  return out


def rewrite(page: str, new: Dict[Tuple[str, str], object]) -> str:
  """The page with each marked text that `new` has ({(kind, name):
  Table / Command / Stamp}) written again; the others as they are."""

  def one(m: "re.Match") -> str:
    key = (m.group("kind"), m.group("name") or "")
    if key not in new:
      return m.group(0)
    close = f"<!-- /{key[0]}" + (f": {key[1]}" if key[1] else "") + " -->"
    return m.group(0)[:m.start("body") - m.start()] + \
        new[key].markdown() + "\n" + close

  return MARKED.sub(one, page)


def problems(page: str, tables: Sequence[str], commands: Sequence[str],
             kept: Sequence[str]) -> List[str]:
  """What is wrong with the page's markers, given the tables and commands
  the docs run writes and the names of the kept tables: every one of them
  once, no marker it does not know, no table outside the markers."""
  found: List[str] = []
  try:
    got = marked(page)
  except ValueError as e:
    return [str(e)]
  names: Dict[str, List[str]] = {"table": [], "command": [], "stamp": [],
                                 "kept": []}
  for b in got:
    names[b.kind].append(b.name)
  for kind, want in (("table", tables), ("command", commands),
                     ("kept", kept), ("stamp", [""])):
    for name in sorted(set(names[kind]) | set(want)):
      count = names[kind].count(name)
      what = f"<!-- {kind}{': ' + name if name else ''} -->"
      if name not in want:
        found.append(f"{what}: the docs run does not know it")
      elif count != 1:
        found.append(f"{what}: {count} on the page, not 1")
  inside = MARKED.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)),
                     FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)),
                               page))
  for m in OPENING.finditer(inside):
    found.append(f"line {inside.count(chr(10), 0, m.start()) + 1}: a "
                 f"marker without its pair: {m.group(0)}")
  above = ""
  for number, line in enumerate(inside.split("\n"), 1):
    if line.startswith("|") and not above.startswith("|"):
      found.append(f"line {number}: a table outside the markers (a table "
                   "the docs run writes, or one it keeps)")
    above = line
  return found


def _number(cell: str) -> Optional[float]:
  m = re.fullmatch(r"\**([+-]?[\d,]*\.?\d+)\s*(?:x|s|%|MB|GB)?\**", cell)
  return float(m.group(1).replace(",", "")) if m else None


def _label(cell: str) -> str:
  return re.sub(r"[*`]", "", cell).strip().lower()


def _keys(table: Table, width: int) -> List[Tuple[str, ...]]:
  """Each row's first `width` cells (an empty cell carries the one above:
  a group's later rows leave it out), as labels."""
  keys, above = [], [""] * width
  for row in table.rows:
    key = [_label(c) or (above[i] if i < len(above) else "")
           for i, c in enumerate(row[:width])]
    keys.append(tuple(key))
    above = key
  return keys


def moved(old: Table, new: Table, by: float = 0.10) -> Iterator[str]:
  """The figures of `new` more than `by` away from `old`'s: rows matched
  by their first cells (as many as make `new`'s rows unique), columns by
  their header."""
  width = next((w for w in range(1, len(new.header) + 1)
                if len(set(_keys(new, w))) == len(new.rows)),
               len(new.header))
  was = dict(zip(_keys(old, width), old.rows))
  above = [""] * width
  for key, row in zip(_keys(new, width), new.rows):
    above = [c or above[i] for i, c in enumerate(row[:width])]
    shown = ", ".join(above)
    if key not in was:
      continue
    for i, column in enumerate(new.header[width:], width):
      if column not in old.header:
        continue
      before = was[key][old.header.index(column)]
      a, b = _number(before), _number(row[i])
      if a and b is not None and abs(b - a) > by * abs(a):
        yield f"{new.name}: {shown}; {column}: {before} -> {row[i]}"

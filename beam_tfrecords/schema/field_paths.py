"""Paths into nested input: `source: user.address.city`, `ratings[].movie_id`.

A path is a column name followed by steps:

    user.address.city        a field of a field of the column `user`
    ratings[].movie_id       one field of every element of the list `ratings`
    a.b[].c[].d              lists flatten in order: one list per row, every
                             d of every c of every b

`.name` reads a field of an object (a JSON object, a Parquet / Arrow
struct); `[]` after a name takes every element of that list. A name
holding dots, brackets or backticks is written in backticks:
`` `user.id` `` is the key "user.id" (a backtick inside one is doubled).
A source without an unquoted `.` or `[]` is a plain column name, so
column names from CSV headers (which have no nesting) are never paths.
"""

import re
from typing import Any, List, NamedTuple, NoReturn, Optional, Sequence, Tuple

__all__ = ["Path", "parse_path", "is_path", "quote_name"]


class Path(NamedTuple):
  """`root` is the input column; `steps` are ("field", name) or
  ("each", None)."""
  text: str
  root: str
  steps: Tuple[Tuple[str, Optional[str]], ...]

  @property
  def lists(self) -> int:
    """How many `[]` the path crosses (0: one value per row)."""
    return sum(1 for kind, _ in self.steps if kind == "each")

  @property
  def list_prefix(self) -> Optional[str]:
    """The path up to its last `[]` (`ratings[]` of `ratings[].id`,
    `a[].b[]` of `a[].b[].c`): features of the same list prefix hold
    one value per element of the same lists (aligned lists); None
    without `[]`."""
    last = max((i for i, (kind, _) in enumerate(self.steps)
                if kind == "each"), default=None)
    if last is None:
      return None
    return _render(self.root, self.steps[:last + 1])


_PLAIN = re.compile(r"[^.\[\]`]+")


def quote_name(name: str) -> str:
  """A name as a path step: in backticks when it holds . [ ] or `."""
  return name if _PLAIN.fullmatch(name) else \
      "`" + name.replace("`", "``") + "`"


def _render(root: str, steps: Sequence[Any]) -> str:
  text = quote_name(root)
  for kind, name in steps:
    text += "[]" if kind == "each" else "." + quote_name(name)
  return text


def is_path(source: str) -> bool:
  """Whether a source is a path (an unquoted `.` or `[]`), not a column."""
  return "." in _unquoted(source) or "[" in _unquoted(source) or \
      source.startswith("`")


def _unquoted(text: str) -> str:
  return re.sub(r"`(?:[^`]|``)*`", "", text)


def _fail(text: str, where: str, why: str) -> NoReturn:
  raise ValueError(f"the path {text!r} is not valid: {why} (at character "
                   f"{where}); write names holding dots or brackets in "
                   "backticks, e.g. `user.id`.name")


def parse_path(text: str) -> Path:
  """Parses a source path.

  Raises:
    ValueError: an empty name, an unclosed backtick, `[` without `]`.
  """
  names: List[Optional[str]] = []
  kinds: List[str] = []
  i, n = 0, len(text)
  expect_name = True
  while i < n:
    if expect_name:
      if text[i] == "`":
        j, name = i + 1, ""
        while True:
          k = text.find("`", j)
          if k < 0:
            _fail(text, str(i + 1), "a backtick is not closed")
          if text[k + 1:k + 2] == "`":
            name += text[j:k] + "`"
            j = k + 2
            continue
          name += text[j:k]
          i = k + 1
          break
      else:
        m = _PLAIN.match(text, i)
        if not m:
          _fail(text, str(i + 1), "a name is empty")
        name, i = m.group(0), m.end()
      if not name:
        _fail(text, str(i), "a name is empty")
      names.append(name)
      kinds.append("field")
      expect_name = False
      continue
    if text.startswith("[]", i):
      kinds.append("each")
      names.append(None)
      i += 2
    elif text[i] == ".":
      expect_name = True
      i += 1
    else:
      _fail(text, str(i + 1), f"expected '.' or '[]', found {text[i]!r}")
  if expect_name:
    _fail(text, str(n), "a name is empty")
  root = names[0]
  assert root is not None  # the loop reads a name first
  steps = tuple(zip(kinds[1:], names[1:]))
  return Path(text=text, root=root, steps=steps)

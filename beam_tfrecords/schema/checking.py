"""The error helper every schema section checker shares.

A schema error names the file, the key path, the bad value, what is allowed
and, where a close spelling exists, the likely fix. `Checker` carries the
file so that each section only says the key and the message.
"""

import difflib
from typing import Any, Iterable, Mapping, NoReturn, Optional

from beam_tfrecords.core.errors import SchemaError, preview

__all__ = ["Checker", "closest", "suggest", "listed"]


def closest(word: Any, allowed: Iterable[str]) -> Optional[str]:
  """The allowed spelling nearest to `word`, None if none is near."""
  close = difflib.get_close_matches(str(word), list(allowed), n=1)
  return close[0] if close else None


def suggest(word: Any, allowed: Iterable[str]) -> str:
  """' Did you mean "x"?' for the nearest allowed spelling, else ""."""
  close = closest(word, allowed)
  return f' Did you mean "{close}"?' if close else ""


def listed(allowed: Iterable[str]) -> str:
  """The allowed values as a message lists them."""
  return ", ".join(allowed)


class Checker:
  """Raises the SchemaError of one schema file, at a key path.

  Attributes:
    path: the schema file (or "<dict>"), named by every error.
  """

  def __init__(self, path: str):
    self.path = path

  def fail(self, key: str, message: str) -> NoReturn:
    raise SchemaError(message, path=self.path, key=key)

  def check_keys(self, key: str, mapping: Mapping, allowed: Iterable[str],
                 elsewhere: Optional[Mapping[str, str]] = None) -> None:
    """Fails on a key not in `allowed`; `elsewhere` maps keys taken here
    only by another type of feature to that type (said when one is used,
    or is the closest match)."""
    names = list(allowed)
    elsewhere = elsewhere or {}
    for k in mapping:
      if k not in names:
        where = f"{key}.{k}" if key else str(k)
        close = closest(k, names + list(elsewhere))
        if k in elsewhere:
          hint = f" {preview(k)} goes with {elsewhere[k]}."
        elif close is not None and close in elsewhere:
          hint = f' Did you mean "{close}" (it goes with {elsewhere[close]})?'
        else:
          hint = suggest(k, names)
        self.fail(where, f"unknown key {preview(k)}; allowed keys: "
                  f"{listed(names)}.{hint}")

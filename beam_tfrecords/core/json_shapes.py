"""JSON files read back, their shape checked where they are loaded.

dataset.json, croissant.json and pin files are written by this package,
and read back by readers, `verify` and `inspect` after anyone may have
edited, cut or replaced them. Each is parsed here and its shape checked
once, as it is loaded, against a table of what it holds; a file of
another shape is a MalformedFileError naming the file, the key and what
was found, never a KeyError or TypeError deep in the code that reads it.

A shape is written as plain data:

    int, float, str, bool   an integer (not true/false), a number, a
                            string, true or false
    dict, list              any object, any list
    object                  any value, null included
    {"key": shape, ...}     an object with these keys (more are allowed:
                            a later version's); "key?": absent or null
    [shape]                 a list whose items have that shape
    (shape, shape)          a list of exactly these items
    Each(shape)             an object whose values have that shape
    Maybe(shape)            null, or that shape
    OneOf("a", "b")         one of these strings
"""

import json
from typing import Any, NamedTuple, Tuple

from beam_tfrecords.core.errors import MalformedFileError, preview

__all__ = ["Each", "Maybe", "OneOf", "parse", "check", "kind_of"]


class Each(NamedTuple):
  """An object of any keys whose values have this shape."""
  value: Any


class Maybe(NamedTuple):
  """null, or this shape."""
  value: Any


class OneOf(NamedTuple):
  """One of these strings."""
  values: Tuple[str, ...]


_NAMES = {int: "an integer", float: "a number", str: "a string",
          bool: "true or false", dict: "a JSON object", list: "a list"}


def kind_of(value: Any) -> str:
  """What a JSON value is, in words: 'a list', 'null', 'a string ("x")'."""
  if value is None:
    return "null"
  if isinstance(value, bool):
    return f"{str(value).lower()}"
  for kind in (dict, list):
    if isinstance(value, kind):
      return _NAMES[kind]
  name = ("a string" if isinstance(value, str) else
          "an integer" if isinstance(value, int) else "a number")
  return f"{name} ({preview(value)})"


def parse(data: bytes, file: str, hint: str = "") -> Any:
  """A JSON file's value.

  Args:
    data: the file's bytes.
    file: its path, for the message.
    hint: what to do about it, said after the problem.

  Raises:
    MalformedFileError: not UTF-8, or not JSON (a cut or damaged file).
  """
  try:
    return json.loads(data.decode("utf-8"))
  except UnicodeDecodeError as e:
    raise MalformedFileError(
        f"{file}: not UTF-8 text (byte {e.start:,}: {e.reason}){hint}",
        file) from e
  except ValueError as e:
    raise MalformedFileError(f"{file}: not valid JSON ({e}){hint}",
                             file) from e


def _is(value: Any, kind: type) -> bool:
  if isinstance(value, bool):
    return kind is bool
  if kind is float:
    return isinstance(value, (int, float))
  return isinstance(value, kind)


def _at(where: str, key: Any) -> str:
  if isinstance(key, int):
    return f"{where}[{key}]"
  return f"{where}.{key}" if where else str(key)


def _problem(file: str, where: str, text: str, hint: str
             ) -> MalformedFileError:
  return MalformedFileError(
      f"{file}: {where}: {text}{hint}" if where else f"{file}: {text}{hint}",
      file)


def _check_object(value: Any, shape: dict, file: str, where: str,
                  hint: str) -> None:
  for name, inner in shape.items():
    optional = name.endswith("?")
    key = name[:-1] if optional else name
    if key not in value or (optional and value[key] is None):
      if optional:
        continue
      owner = f"{file}: {where}" if where else file
      raise MalformedFileError(f"{owner} has no {key!r}{hint}", file)
    check(value[key], inner, file, _at(where, key), hint)


def check(value: Any, shape: Any, file: str, where: str = "",
          hint: str = "") -> None:
  """Raises MalformedFileError, naming `file` and the key path (`where`:
  e.g. "splits.train.shards[0].records"), if `value` is not of `shape`
  (this module's docstring says how shapes are written)."""
  if shape is object:
    return
  if isinstance(shape, Maybe):
    if value is not None:
      check(value, shape.value, file, where, hint)
    return
  if isinstance(shape, OneOf):
    if value not in shape.values:
      said = [json.dumps(v) for v in shape.values]
      allowed = (" or ".join(said) if len(said) < 3 else
                 "one of " + ", ".join(said))
      raise _problem(file, where, f"expected {allowed}, got "
                     f"{kind_of(value)}", hint)
    return
  kind = (dict if isinstance(shape, (dict, Each)) else
          list if isinstance(shape, (list, tuple)) else shape)
  if not _is(value, kind):
    raise _problem(file, where,
                   f"expected {_NAMES[kind]}, got {kind_of(value)}", hint)
  if isinstance(shape, dict):
    _check_object(value, shape, file, where, hint)
  elif isinstance(shape, Each):
    for key, item in value.items():
      check(item, shape.value, file, _at(where, key), hint)
  elif isinstance(shape, list):
    for i, item in enumerate(value):
      check(item, shape[0], file, _at(where, i), hint)
  elif isinstance(shape, tuple):
    if len(value) != len(shape):
      raise _problem(file, where, f"expected a list of {len(shape)} items, "
                     f"got {len(value)}", hint)
    for i, (item, inner) in enumerate(zip(value, shape)):
      check(item, inner, file, _at(where, i), hint)

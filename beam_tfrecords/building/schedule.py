"""Scheduled builds: placeholders in input and output paths, "latest", and
ranges.

    --input 'gs://logs/{YYYY}/{MM}/{DD}/*.csv' --output 'gs://ds/{YYYY}{MM}{DD}'
    --date 2026-11-21 | --date 2026-11-01..2026-11-07 | --date latest
    --input 'data/span-{SPAN}/v{VERSION}/*.parquet' --span 12 | --span latest
        [--version 3 | --version latest]

Placeholders: {YYYY} {MM} {DD} (a date), {SPAN} and {VERSION} (whole
numbers; {SPAN:5} pads to 5 digits). `latest` finds the newest value that
has input files (for {VERSION}: the newest version of the chosen span, as
TFX's ExampleGen does). A range reads the inputs of every date (or span)
in it in one build; output placeholders take the range's last value.
"""

import dataclasses
import datetime
import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar


from beam_tfrecords.core.beam_files import FileSystems
from beam_tfrecords.core.errors import InputError, NoInputError

__all__ = ["Schedule", "resolve_patterns", "has_placeholders", "parse_date",
           "NoInputError", "previous_output"]

_FIELD = re.compile(r"\{(YYYY|MM|DD|SPAN|VERSION)(?::(\d+))?\}")
_WIDTH = {"YYYY": 4, "MM": 2, "DD": 2}


@dataclasses.dataclass(frozen=True)
class Schedule:
  """What --date / --span / --version asked for (text as given)."""
  date: Optional[str] = None
  span: Optional[str] = None
  version: Optional[str] = None


def has_placeholders(text: str) -> bool:
  return bool(_FIELD.search(text))


def parse_date(text: str) -> datetime.date:
  try:
    return datetime.date.fromisoformat(text.strip())
  except ValueError:
    raise InputError(f"--date {text!r}: give YYYY-MM-DD, a range "
                     "YYYY-MM-DD..YYYY-MM-DD, or latest") from None


def _number(text: str, flag: str) -> int:
  try:
    value = int(text)
  except ValueError:
    raise InputError(f"{flag} {text!r}: give a whole number, a range "
                     "N..M, or latest") from None
  if value < 0:
    raise InputError(f"{flag} {text!r}: must be 0 or more")
  return value


def _fill(pattern: str, values: Dict[str, int]) -> str:
  def one(m):
    name, width = m.group(1), m.group(2)
    if name not in values:
      raise InputError(f"{pattern!r} has {{{name}}}, but no "
                       f"--{'date' if name in _WIDTH else name.lower()} "
                       "was given")
    w = int(width) if width else _WIDTH.get(name, 0)
    return f"{values[name]:0{w}d}"
  return _FIELD.sub(one, pattern)


def _date_values(d: datetime.date) -> Dict[str, int]:
  return {"YYYY": d.year, "MM": d.month, "DD": d.day}


def _found(pattern: str, fields: Sequence[str],
           known: Dict[str, int]) -> List[Dict[str, int]]:
  """The values of `fields` for which `pattern` matches input files."""
  glob, regex, groups = [], [], []
  pos = 0
  for m in _FIELD.finditer(pattern):
    literal = pattern[pos:m.start()]
    glob.append(literal)
    regex.append(re.escape(literal).replace(r"\*", "[^/]*").replace(
        r"\?", "[^/]"))
    name, width = m.group(1), m.group(2)
    if name in known:
      text = _fill(m.group(0), known)
      glob.append(text)
      regex.append(re.escape(text))
    else:
      w = int(width) if width else _WIDTH.get(name)
      glob.append("[0-9]" * w if w else "*")
      regex.append(f"(?P<{name}>[0-9]{{{w}}})" if w else
                   f"(?P<{name}>[0-9]+)")
      groups.append(name)
    pos = m.end()
  glob.append(pattern[pos:])
  regex.append(re.escape(pattern[pos:]).replace(r"\*", ".*").replace(
      r"\?", "."))
  try:
    matched = FileSystems.match(["".join(glob)])[0].metadata_list
  except Exception:  # pylint: disable=broad-except
    matched = []
  full = re.compile("".join(regex) + "$")
  out = []
  for meta in matched:
    hit = full.match(meta.path)
    if hit:
      out.append({k: int(v) for k, v in hit.groupdict().items()
                  if k in fields})
  return out


def _latest_date(patterns: Sequence[str]) -> datetime.date:
  best = None
  for p in patterns:
    for v in _found(p, ("YYYY", "MM", "DD"), {}):
      try:
        d = datetime.date(v["YYYY"], v["MM"], v["DD"])
      except (KeyError, ValueError):
        continue
      best = d if best is None or d > best else best
  if best is None:
    raise NoInputError(f"--date latest: no input matches "
                       f"{', '.join(patterns)} for any date")
  return best


def _latest_number(patterns: Sequence[str], name: str,
                   known: Dict[str, int]) -> int:
  best = None
  for p in patterns:
    for v in _found(p, (name,), known):
      if name in v:
        best = v[name] if best is None else max(best, v[name])
  if best is None:
    raise NoInputError(f"--{name.lower()} latest: no input matches "
                       f"{', '.join(patterns)}")
  return best


# What a range's ends are: dates (--date) or numbers (--span).
_End = TypeVar("_End", datetime.date, int)


def _range(text: str, parse: Callable[[str], _End]) -> Tuple[_End, _End]:
  lo, _, hi = text.partition("..")
  a, b = parse(lo), parse(hi)
  if b < a:
    raise InputError(f"the range {text!r} ends before it starts")
  return a, b


def resolve_patterns(inputs: Sequence[str], output: str,
                     schedule: Schedule
                     ) -> Tuple[List[str], str, Dict[str, object]]:
  """(input patterns, output path, what was chosen) with the
  placeholders filled.

  Raises:
    InputError: a placeholder without its flag, a bad value or range.
    NoInputError: `latest` found no input.
  """
  names = {m.group(1) for p in list(inputs) + [output]
           for m in _FIELD.finditer(p)}
  chosen: Dict[str, object] = {}
  combos: List[Dict[str, int]] = [{}]
  if schedule.date is not None:
    text = schedule.date.strip()
    if text == "latest":
      dates = [_latest_date(inputs)]
    elif ".." in text:
      lo, hi = _range(text, parse_date)
      dates = [lo + datetime.timedelta(days=i)
               for i in range((hi - lo).days + 1)]
    else:
      dates = [parse_date(text)]
    if len(dates) > 366:
      raise InputError(f"--date {text!r} spans {len(dates)} days; at most "
                       "366 in one build")
    chosen["date"] = [d.isoformat() for d in dates] if len(dates) > 1 \
        else dates[0].isoformat()
    combos = [_date_values(d) for d in dates]
  elif names & {"YYYY", "MM", "DD"}:
    raise InputError("the paths have {YYYY}/{MM}/{DD}: give --date "
                     "(YYYY-MM-DD, a range A..B, or latest)")
  if schedule.span is not None:
    text = schedule.span.strip()
    if text == "latest":
      spans = [_latest_number(inputs, "SPAN", combos[-1])]
    elif ".." in text:
      first, last = _range(text, lambda t: _number(t, "--span"))
      spans = list(range(first, last + 1))
    else:
      spans = [_number(text, "--span")]
    chosen["span"] = spans if len(spans) > 1 else spans[0]
    combos = [dict(c, SPAN=s) for c in combos for s in spans]
  elif "SPAN" in names:
    raise InputError("the paths have {SPAN}: give --span (N, N..M, or "
                     "latest)")
  if schedule.version is not None:
    text = schedule.version.strip()
    if text == "latest":
      versions = {}
      for c in combos:
        versions[tuple(sorted(c.items()))] = _latest_number(
            inputs, "VERSION", c)
      combos = [dict(c, VERSION=versions[tuple(sorted(c.items()))])
                for c in combos]
      chosen["version"] = sorted(set(versions.values())) \
          if len(set(versions.values())) > 1 else combos[-1]["VERSION"]
    else:
      version = _number(text, "--version")
      combos = [dict(c, VERSION=version) for c in combos]
      chosen["version"] = version
  elif "VERSION" in names:
    raise InputError("the paths have {VERSION}: give --version (N or "
                     "latest)")
  patterns = list(dict.fromkeys(_fill(p, c) for c in combos for p in inputs))
  missing = []
  for p in patterns:
    try:
      found = FileSystems.match([p])[0].metadata_list
    except Exception:  # pylint: disable=broad-except
      found = []
    if not found:
      missing.append(p)
  if missing:
    raise NoInputError(f"no input for {chosen}: nothing matches "
                       f"{', '.join(missing[:5])}"
                       f"{' ...' if len(missing) > 5 else ''}")
  return patterns, _fill(output, combos[-1]), chosen


_ORDER = ("YYYY", "MM", "DD", "SPAN", "VERSION")


def previous_output(template: str, current: str) -> Optional[str]:
  """The newest finished dataset (a _SUCCESS in it) among the outputs the
  placeholders of `template` give that comes before `current` (the
  output being built), by date, then span, then version; None if none."""
  fields = [m.group(1) for m in _FIELD.finditer(template)]
  pattern = re.compile(_values_regex(template) + "$")
  now = pattern.match(current.rstrip("/"))
  if now is None:
    return None
  now_key = _order_key({k: int(v) for k, v in now.groupdict().items()})
  best = None
  for values in _found(template.rstrip("/") + "/_SUCCESS", fields, {}):
    key = _order_key(values)
    if key < now_key and (best is None or key > best[0]):
      best = (key, _fill(template, values).rstrip("/"))
  return None if best is None else best[1]


def _order_key(values: Dict[str, int]) -> Tuple[int, ...]:
  return tuple(values.get(name, -1) for name in _ORDER)


def _values_regex(template: str) -> str:
  """A regex of the paths `template` gives, a group per placeholder."""
  out, pos, seen = [], 0, set()
  for m in _FIELD.finditer(template):
    out.append(re.escape(template[pos:m.start()]))
    name, width = m.group(1), m.group(2)
    w = int(width) if width else _WIDTH.get(name)
    digits = f"[0-9]{{{w}}}" if w else "[0-9]+"
    out.append(f"(?P={name})" if name in seen else f"(?P<{name}>{digits})")
    seen.add(name)
    pos = m.end()
  out.append(re.escape(template[pos:].rstrip("/")))
  return "".join(out)

"""The schema's `card:` section: what others need to find, cite and judge a
dataset (its README.md card and croissant.json say it).

    description: Ratings of movies by users, one record per rating.
    card:
      title: Movie ratings
      license: CC-BY-4.0                     # an SPDX id or a URL
      creators: [{name: Ada Lovelace, email: ada@example.org}]
      citation: "@misc{ratings, title={Movie ratings}, year={2026}}"
      url: https://example.org/ratings
      keywords: [movies, ratings]
      version: 1.2.0
      rai:                                   # Croissant's Responsible AI
        dataCollection: Logged by the rating service, 2024-2026.
        dataLimitations: English-language titles only.
        dataBiases: Heavy raters are over-represented.
        personalSensitiveInformation: User ids are pseudonymous.
        dataUseCases: Training recommenders; not for profiling people.

The dataset's description is the schema's top-level `description:` (one
word per meaning: the card does not repeat it). Every key is optional
(an empty value is not given: `infer-schema` proposes the card so);
`--croissant required` fails a build before it reads anything when the
license or the description is missing (`missing_for_croissant`).
"""

import dataclasses
import re
from typing import Any, Dict, List, Optional, Tuple

from beam_tfrecords.core.errors import preview
from beam_tfrecords.schema.checking import Checker, listed

__all__ = ["Card", "Creator", "parse_card", "RAI_FIELDS", "CARD_KEYS",
           "missing_for_croissant"]

# Croissant's core Responsible-AI fields (rai: namespace), as the NeurIPS
# Datasets track asks for them.
RAI_FIELDS = ("dataCollection", "dataLimitations", "dataBiases",
              "personalSensitiveInformation", "dataUseCases")
CARD_KEYS = ("title", "license", "creators", "citation", "url", "keywords",
             "version", "rai")
_CREATOR_KEYS = ("name", "email", "url")
_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")


@dataclasses.dataclass(frozen=True)
class Creator:
  """Who made the data: a person or an organization."""
  name: str
  email: str = ""
  url: str = ""

  def to_dict(self) -> Dict[str, str]:
    return {k: v for k, v in dataclasses.asdict(self).items() if v}


@dataclasses.dataclass(frozen=True)
class Card:
  """The `card:` section, checked (empty strings: not given)."""
  title: str = ""
  license: str = ""
  creators: Tuple[Creator, ...] = ()
  citation: str = ""
  url: str = ""
  keywords: Tuple[str, ...] = ()
  version: str = ""
  rai: Tuple[Tuple[str, str], ...] = ()  # (field, text) in RAI_FIELDS order

  def to_dict(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key in ("title", "license", "citation", "url", "version"):
      if getattr(self, key):
        out[key] = getattr(self, key)
    if self.creators:
      out["creators"] = [c.to_dict() for c in self.creators]
    if self.keywords:
      out["keywords"] = list(self.keywords)
    if self.rai:
      out["rai"] = dict(self.rai)
    return out

  @classmethod
  def from_dict(cls, d: Optional[Dict[str, Any]]) -> "Card":
    """A card as dataset.json's schema holds it (already checked)."""
    d = d or {}
    return cls(
        **{k: d.get(k, "") for k in ("title", "license", "citation", "url",
                                     "version")},
        creators=tuple(Creator(**c) for c in d.get("creators", ())),
        keywords=tuple(d.get("keywords", ())),
        rai=tuple((k, d["rai"][k]) for k in RAI_FIELDS
                  if k in d.get("rai", {})))


def _text(check: Checker, key: str, value: Any) -> str:
  if not isinstance(value, str) or not value.strip():
    check.fail(key, f"must be non-empty text; got {preview(value)}")
  return value.strip()


def _creators(check: Checker, raw: Any) -> Tuple[Creator, ...]:
  if isinstance(raw, (str, dict)):
    raw = [raw]
  if not isinstance(raw, list):
    check.fail("card.creators", "must be a list of names or of "
               f"{{name, email, url}} mappings; got {preview(raw)}")
  out = []
  for i, item in enumerate(raw):
    key = f"card.creators[{i}]"
    if isinstance(item, str):
      out.append(Creator(_text(check, key, item)))
      continue
    if not isinstance(item, dict):
      check.fail(key, f"must be a name or a {{name, email, url}} mapping; "
                 f"got {preview(item)}")
    check.check_keys(key, item, _CREATOR_KEYS)
    if "name" not in item:
      check.fail(f"{key}.name", "missing: every creator has a name")
    out.append(Creator(**{k: _text(check, f"{key}.{k}", v)
                          for k, v in item.items()}))
  return tuple(out)


def parse_card(check: Checker, raw: Any) -> Optional[Card]:
  """The schema's `card:` section (None when absent or all empty)."""
  if raw is None:
    return None
  if not isinstance(raw, dict):
    check.fail("card", f"must be a mapping with keys {listed(CARD_KEYS)}; "
               f"got {preview(raw)}")
  check.check_keys("card", raw, CARD_KEYS)
  values: Dict[str, Any] = {}
  # An empty value is not given (infer-schema proposes the card so).
  for key in ("title", "license", "citation", "url", "version"):
    if raw.get(key) not in (None, ""):
      values[key] = _text(check, f"card.{key}", raw[key])
  if values.get("version") and not _VERSION.match(values["version"]):
    check.fail("card.version", f"{preview(values['version'])} is not a "
               "version: give MAJOR.MINOR.PATCH, e.g. 1.0.0 (Croissant's "
               "form)")
  if values.get("url") and not re.match(r"^https?://", values["url"]):
    check.fail("card.url", f"{preview(values['url'])} is not a web "
               "address: give http(s)://...")
  if raw.get("creators") is not None:
    values["creators"] = _creators(check, raw["creators"])
  keywords = raw.get("keywords")
  if keywords is not None:
    if not isinstance(keywords, list):
      check.fail("card.keywords", f"must be a list of words; got "
                 f"{preview(keywords)}")
    values["keywords"] = tuple(_text(check, f"card.keywords[{i}]", k)
                               for i, k in enumerate(keywords))
  rai = raw.get("rai")
  if rai is not None:
    if not isinstance(rai, dict):
      check.fail("card.rai", f"must be a mapping with keys "
                 f"{listed(RAI_FIELDS)}; got {preview(rai)}")
    check.check_keys("card.rai", rai, RAI_FIELDS)
    values["rai"] = tuple((k, _text(check, f"card.rai.{k}", rai[k]))
                          for k in RAI_FIELDS if rai.get(k) not in (None, ""))
  card = Card(**values)
  return card if card != Card() else None


def missing_for_croissant(card: Optional[Card], description: str
                          ) -> List[str]:
  """What a Croissant description must have that the schema does not
  give, as lines that say where to write it."""
  card = card or Card()
  missing = []
  if not description.strip():
    missing.append("description: the schema's top-level `description:` "
                   "(what the data is, in a sentence or two)")
  if not card.license:
    missing.append("license: `card: {license: ...}`, an SPDX id such as "
                   "CC-BY-4.0, or the license's URL")
  return missing

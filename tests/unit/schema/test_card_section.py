"""beam_tfrecords/schema/card_section.py: the schema's `card:` block,
checked where the schema is loaded."""

import pytest

from beam_tfrecords import SchemaError
from beam_tfrecords.schema import load_schema
from beam_tfrecords.schema.card_section import (Card, Creator,
                                                missing_for_croissant)

BASE = {"name": "d", "description": "Some rows.", "features": {"x": "int64"}}


def _card(card):
  return load_schema({**BASE, "card": card}).card


def test_a_full_card_loads_and_round_trips():
  raw = {"title": "D", "license": "CC-BY-4.0",
         "creators": ["Ada", {"name": "Org", "url": "https://o.example"}],
         "citation": "@misc{d}", "url": "https://d.example",
         "keywords": ["a", "b"], "version": "1.0.2",
         "rai": {"dataUseCases": "Tests.", "dataCollection": "Made up."}}
  card = _card(raw)
  assert card == Card("D", "CC-BY-4.0", (
      Creator("Ada"), Creator("Org", url="https://o.example")), "@misc{d}",
                      "https://d.example", ("a", "b"), "1.0.2", (
                          ("dataCollection", "Made up."),
                          ("dataUseCases", "Tests.")))
  # As dataset.json's schema holds it, and back.
  assert card.to_dict() == {**raw, "creators": [
      {"name": "Ada"}, {"name": "Org", "url": "https://o.example"}],
      "rai": {"dataCollection": "Made up.", "dataUseCases": "Tests."}}
  assert Card.from_dict(card.to_dict()) == card
  assert load_schema({**BASE, "card": raw}).to_dict()["card"] == \
      card.to_dict()


@pytest.mark.parametrize("card, where, said", [
    ({"licence": "MIT"}, "card.licence", 'Did you mean "license"?'),
    ({"version": "1.0"}, "card.version", "give MAJOR.MINOR.PATCH"),
    ({"url": "example.org"}, "card.url", "is not a web address"),
    ({"creators": [{"email": "a@b"}]}, "card.creators[0].name",
     "every creator has a name"),
    ({"creators": [{"name": "A", "phone": "1"}]}, "card.creators[0].phone",
     "unknown key"),
    ({"keywords": "a, b"}, "card.keywords", "must be a list of words"),
    ({"rai": {"dataBias": "x"}}, "card.rai.dataBias",
     'Did you mean "dataBiases"?'),
    ({"license": 3}, "card.license", "must be non-empty text"),
    ("MIT", "card", "must be a mapping"),
])
def test_a_bad_card_names_its_key_and_the_fix(card, where, said):
  with pytest.raises(SchemaError) as e:
    _card(card)
  assert where in str(e.value) and said in str(e.value)


def test_an_empty_card_is_no_card_and_says_what_croissant_lacks():
  assert _card({"license": "", "creators": [], "rai": {
      "dataBiases": ""}}) is None
  assert missing_for_croissant(None, "") == [
      "description: the schema's top-level `description:` (what the data "
      "is, in a sentence or two)",
      "license: `card: {license: ...}`, an SPDX id such as CC-BY-4.0, or "
      "the license's URL"]
  assert missing_for_croissant(Card(license="MIT"), "Rows.") == []


def test_a_sequence_schema_takes_a_card():
  schema = load_schema({"name": "s", "record": "sequence_example",
                        "sequence": {"t": "int64"},
                        "card": {"license": "MIT"}})
  assert schema.card == Card(license="MIT")

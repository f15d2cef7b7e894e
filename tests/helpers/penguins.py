"""The Palmer penguins (CC0, tests/data/penguins): one dataset per year,
as a scheduled build would make them, three shards each."""

import csv
import pathlib

import beam_tfrecords as btr

PENGUINS = pathlib.Path(__file__).resolve().parents[1] / "data" / "penguins" / \
    "penguins.csv"
SCHEMA = {
    "name": "penguins",
    "features": {
        "row": {"type": "int64", "required": True},
        "species": {"type": "string", "required": True},
        "island": {"type": "string", "required": True},
        "body_mass_g": {"type": "int64"},
    },
}


def _build(folder, year, schema=SCHEMA, rows=None):
  with open(PENGUINS) as f:
    found = [dict(r, row=i) for i, r in enumerate(csv.DictReader(f))
             if r["year"] == year]
  src = folder / f"{year}.csv"
  with open(src, "w", newline="") as f:
    w = csv.DictWriter(f, ["row", "species", "island", "body_mass_g"],
                       extrasaction="ignore")
    w.writeheader()
    w.writerows(found[:rows])
  out = str(folder / "days" / f"{year}-01-01")
  btr.build(schema, str(src), out, num_shards=3, overwrite=True)
  return out

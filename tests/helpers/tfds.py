"""What tests/e2e/test_tfds.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import pathlib


ROOT = pathlib.Path(__file__).resolve().parents[2]
PENGUINS = ROOT / "tests" / "data" / "penguins" / "penguins.csv"
SCHEMA = {
    "name": "penguins",
    "splits": {"hash": "species", "weights": {"train": 0.8, "test": 0.2}},
    "features": {
        "species": {"type": "string", "required": True},
        "island": {"type": "bytes", "required": True},
        "bill_length_mm": {"type": "float", "default": 0.0},
        "body_mass_g": {"type": "int64", "default": 0},
        "sex": {"type": "string", "shape": [-1]},
    },
}
IMAGES = {
    "name": "shapes",
    "max_bad_fraction": 0.2,  # the bundled table names one lost file
    "features": {
        "image": {"type": "image", "source": "name", "required": True,
                  "convert": "rgb", "encode": "png"},
        "label": {"type": "int64", "required": True},
    },
}

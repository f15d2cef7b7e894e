"""What tests/e2e/test_preprocessing_fn.py shares with the tests split from it
(tests/unit, tests/cluster)."""


SCHEMA = {
    "name": "penguins",
    "splits": {"hash": "row", "weights": {"train": 0.7, "eval": 0.3}},
    "features": {
        "row": {"type": "int64", "required": True},
        "species": {"type": "string", "required": True},
        "island": {"type": "string", "required": True},
        "bill_length_mm": {"type": "float", "required": True},
        "flipper_length_mm": {"type": "int64", "required": True},
        "body_mass_g": {"type": "int64", "required": True},
        "sex": {"type": "string", "required": True},
    },
}


def penguins_fns():
  """The user's module of preprocessing functions (tests/helpers/
  user_modules/tft_penguins.py), imported when a test needs it: it
  imports TensorFlow Transform (1 s), which every test worker would pay
  while collecting if a test file imported it."""
  import tft_penguins  # pylint: disable=import-outside-toplevel
  return tft_penguins

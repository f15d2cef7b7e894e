"""What tests/e2e/test_labels.py shares with the tests split from it
(tests/unit, tests/cluster)."""


SCHEMA = {"name": "priced", "label": "price",
          "features": {"size": {"type": "float", "required": True},
                       "rooms": {"type": "int64", "required": True},
                       "price": {"type": "float", "required": True}}}

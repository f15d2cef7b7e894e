"""What tests/e2e/test_group_rejection.py shares with the tests split from it
(tests/unit, tests/cluster)."""


# ---------------------------------------------------------------------------
# Encoder and assembler, without Beam.

FLOAT_KEYS = {"name": "f", "record": "sequence_example",
              "group_by": {"column": "k", "type": "float"}, "order_by": "t",
              "sequence": {"t": {"type": "int64", "required": True},
                           "v": {"type": "int64", "required": True}}}

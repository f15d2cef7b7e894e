"""What tests/e2e/test_beam_transforms.py shares with the tests split from it
(tests/unit, tests/cluster)."""


SCHEMA = {"name": "rows", "features": {
    "id": {"type": "int64", "required": True}, "name": "string",
    "score": "float"},
    "splits": {"hash": "id", "weights": {"train": 4, "eval": 1}}}
ROWS = [{"id": i, "name": f"n{i}", "score": i / 4} for i in range(300)]

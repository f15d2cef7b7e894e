"""What tests/e2e/test_splits.py shares with the tests split from it
(tests/unit, tests/cluster)."""


def schema(splits):
  return {"name": "ratings", "splits": splits, "features": {
      "user": {"type": "int64", "required": True},
      "item": "int64", "rating": "float", "day": "string"}}

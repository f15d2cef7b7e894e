"""What tests/e2e/test_preprocess.py shares with the tests split from it
(tests/unit, tests/cluster)."""


SCHEMA = {"name": "people", "features": {
    "name": {"type": "string", "required": True},
    "age": {"type": "int64", "required": True},
    "city": {"type": "string", "default": "?"}}}


def _csv(tmp_path, rows=("Ada,Lovelace,432", "Alan,Turing,500",
                         "Grace,Hopper,")):
  path = tmp_path / "in.csv"
  path.write_text("first,last,months\n" + "\n".join(rows) + "\n")
  return str(path)

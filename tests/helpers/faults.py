"""What tests/e2e/test_faults.py shares with the tests split from it
(tests/unit, tests/cluster)."""


SCHEMA = {
    "name": "faults",
    "features": {
        "id": {"type": "int64", "required": True},
        "score": {"type": "float"},
        "tags": {"type": "string", "shape": [-1], "separator": "|"},
    },
}


def write_rows(path, n, bad_every=0):
  with open(path, "w") as f:
    f.write("id,score,tags\n")
    for i in range(n):
      score = "oops" if bad_every and i % bad_every == 3 else f"{i * 0.5}"
      f.write(f"{i},{score},a|b{i % 7}\n")
  return str(path)

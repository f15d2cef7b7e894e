"""What tests/e2e/test_shuffle.py shares with the tests split from it
(tests/unit, tests/cluster)."""


SCHEMA = {"name": "s", "features": {"id": {"type": "int64",
                                           "required": True},
                                    "text": "string"}}


def _csv(path, n, offset=0):
  path.write_text("id,text\n" + "".join(
      f"{i},t{i}\n" for i in range(offset, offset + n)))
  return str(path)

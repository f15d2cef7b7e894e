"""What tests/e2e/test_shard_size.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import random


SCHEMA = {"name": "s", "features": {"id": {"type": "int64", "required": True},
                                    "text": "string"}}


def _csv(path, n, offset=0, seed=0):
  """Rows whose text barely compresses, so that the files fill up."""
  rng = random.Random(seed)
  path.write_text("id,text\n" + "".join(
      f"{i},{rng.getrandbits(160):040x}\n" for i in range(offset, offset + n)))
  return str(path)

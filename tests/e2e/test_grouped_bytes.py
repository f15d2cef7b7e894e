"""Grouped SequenceExamples, pinned byte for byte (issue 19: the grouped
path was rebuilt on buckets of steps and a vectorized assembly; the records
and files must not change).

The manifest (tests/golden/grouped_outputs.json) was written by the code
before the rebuild (commit ae58d10, one GroupByKey element per key and
batch, one assembly per group) from the same generated input: every
published file's SHA-256 (dataset.json without its input paths, times and
build key). It covers several shards and splits, the seeded shuffle,
sequences split by max_length into records of more than 64 KiB (gzip
members of their own), files cut by --max-shard-size, keep_last, reject,
rejected groups (a bad row, a context conflict) and both on_bad_step
policies. A case runs with 1 and with 3 buckets: the output does not
depend on how the steps are spread.

To re-pin after a deliberate change of the output: BTR_REPIN=1 pytest
tests/e2e/test_grouped_bytes.py, and say why in the commit.
"""

import csv
import json
import os
import random

import pytest

import beam_tfrecords as btr
from beam_tfrecords.building import planning
from beam_tfrecords.core import native

from tests.helpers.bundled import manifest_of
from tests.helpers.paths import ROOT

MANIFEST = os.path.join(ROOT, "tests", "golden", "grouped_outputs.json")

SCHEMA = """name: pinned
record: sequence_example
group_by: user
order_by: ts
{extra}
context:
  user: {{type: int64}}
  country: {{type: string}}
  length: {{derive: length}}
  first_ts: {{type: int64, source: ts, derive: first}}
  last_event: {{type: string, source: event, derive: last}}
{context}
sequence:
  ts: {{type: int64, required: true}}
  item: {{type: int64, required: true}}
  rating: {{type: float, required: true}}
  event: {{type: string, required: true}}
  tags: {{type: string, shape: [-1], separator: "|"}}
"""

# name -> (schema extra, extra context, build options)
CASES = {
    "shards": ("", "", {"num_shards": 3}),
    "splits": ("splits:\n  hash: user\n  weights: {train: 80%, eval: 20%}",
               "", {"num_shards": 2}),
    "shuffle": ("splits:\n  hash: user\n  weights: {train: 80%, eval: 20%}",
                "", {"num_shards": 3, "shuffle_seed": 7}),
    "split_long": ("max_length: 2000\noverflow: split",
                   "  part: {derive: part}", {"num_shards": 2}),
    "rolls": ("max_length: 2000\noverflow: split", "",
              {"max_shard_size": "120KB"}),
    "keep_last": ("max_length: 10\noverflow: keep_last\n"
                  "on_bad_step: drop_step", "", {"num_shards": 2}),
    "reject": ("max_length: 3000\noverflow: reject", "", {}),
}


@pytest.fixture(scope="module")
def events(tmp_path_factory):
  """Two CSV files: 3,000 light users and 3 heavy ones (~3,000 events),
  shuffled; a few unparsable items and conflicting countries."""
  root = tmp_path_factory.mktemp("events")
  rng = random.Random(5)
  for i in range(2):
    with open(root / f"events{i}.csv", "w", newline="") as f:
      w = csv.writer(f)
      w.writerow(["user", "ts", "item", "rating", "event", "tags",
                  "country"])
      for _ in range(12000):
        u = rng.choice([rng.randrange(3000), rng.randrange(3)])
        heavy = u < 3
        w.writerow([
            u, rng.randrange(1000),
            rng.randint(1, 5000) if heavy or rng.random() > 0.003 else "bad",
            f"{rng.random() * 5:.1f}", rng.choice(["view", "click", "buy"]),
            "|".join(rng.sample(["a", "b", "c", "d"], 2)),
            f"c{u % 7}" if heavy or rng.random() > 0.002 else "XX"])
  return str(root)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_grouped_output_is_pinned(tmp_path, events, case, monkeypatch):
  extra, context, options = CASES[case]
  schema = tmp_path / "schema.yaml"
  schema.write_text(SCHEMA.format(extra=extra, context=context))
  with open(MANIFEST) as f:
    pinned = json.load(f)
  for buckets in (1, 3):
    # Where the build's plan takes the bucket count from (raising: a
    # move of buckets_for must fail here, not leave the patch unused).
    monkeypatch.setattr(planning, "buckets_for", lambda _, b=buckets: b)
    # One build by the native core (where it is installed), the other by
    # the pure-Python path: both must be the pinned bytes.
    monkeypatch.setenv(native.ENV, "0" if buckets == 3 else "")
    out = str(tmp_path / f"out{buckets}")
    btr.build(str(schema), os.path.join(events, "events*.csv"), out,
              max_bad_fraction=1.0, **options)
    got = manifest_of(out, events)
    if os.environ.get("BTR_REPIN"):
      pinned[case] = got
      with open(MANIFEST, "w") as f:
        json.dump(pinned, f, indent=1, sort_keys=True)
        f.write("\n")
    assert got == pinned[case], buckets

"""The Beam composites of beam_tfrecords/transforms/, each in a small
pipeline of its own on the DirectRunner (TestPipeline + assert_that):
ReadInputs, ToSourceBatches, EncodeRows, EncodeGroupedSequences and
CountOverlap; the records they make parsed by TensorFlow's protos.
(Their functions on values: tests/unit/transforms/.)"""

import apache_beam as beam
import pyarrow as pa
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from tensorflow.core.example import example_pb2

from beam_tfrecords.schema import load_schema
from beam_tfrecords.sinks.parts import SplitOverlap
from beam_tfrecords.sources import SourceBatch, plan_inputs
from beam_tfrecords.transforms import (ERRORS, STATS, EncodeGroupedSequences,
                                       EncodeRows, ReadInputs)
from beam_tfrecords.transforms.batch_fn import stats
from beam_tfrecords.transforms.elements import (PCOLLECTION,
                                                ToSourceBatches, row_digest)
from beam_tfrecords.transforms.overlap import CountOverlap

SCHEMA = load_schema({
    "name": "t", "features": {"id": {"type": "int64", "required": True},
                              "name": {"type": "string"}},
    "splits": {"column": "part", "values": ["train", "eval"]}})


def _rows(batch):
  """A SourceBatch as (where it came from, its rows as read)."""
  return (batch.path, batch.first_row,
          tuple(tuple(sorted(r.items()))
                for r in batch.raw_rows(range(batch.num_rows))))


def test_read_inputs_reads_every_unit(tmp_path):
  paths = []
  for name, rows in (("a.csv", "1,x\n2,y\n"), ("b.csv", "3,z\n")):
    (tmp_path / name).write_text("id,name\n" + rows)
    paths.append(str(tmp_path / name))
  units = plan_inputs(paths, ["id", "name"]).units
  with TestPipeline() as p:
    batches = p | ReadInputs(units, ["id", "name"])
    # (CSV cells as read: their bytes, parsed by the encoder.)
    assert_that(batches | beam.Map(_rows), equal_to([
        (paths[0], 1, ((("id", b"1"), ("name", b"x")),
                       (("id", b"2"), ("name", b"y")))),
        (paths[1], 1, ((("id", b"3"), ("name", b"z")),))]))


def _element_rows(batch):
  """(each row's element name, its values), one per row."""
  return [(e, tuple(sorted(r.items())))
          for e, r in zip(batch.elements,
                          batch.raw_rows(range(batch.num_rows)))]


def test_to_source_batches_names_each_row_by_its_content():
  dicts = [{"id": 1, "name": "x"}, {"id": 2, "name": None}]
  table = pa.RecordBatch.from_pylist([{"id": 3, "name": "z"},
                                      {"id": 4, "name": "w"}])
  with TestPipeline() as p:
    batches = (p | beam.Create(dicts + [table])
               | ToSourceBatches(["id", "name"]))
    assert_that(batches | beam.Map(lambda b: (b.path, b.first_row))
                | beam.Distinct(), equal_to([(PCOLLECTION, None)]))
    named = batches | beam.FlatMap(_element_rows)
    assert_that(named | "Dicts" >> beam.Filter(lambda e: ":" not in e[0]),
                equal_to([(row_digest(r), tuple(sorted(r.items())))
                          for r in dicts]), label="DictRows")
    # A record batch's rows: the batch's digest and the row's index.
    assert_that(named | "Table" >> beam.Filter(lambda e: ":" in e[0])
                | beam.Map(lambda e: (e[0].split(":")[1], e[1])),
                equal_to([("0", (("id", 3), ("name", "z"))),
                          ("1", (("id", 4), ("name", "w")))]),
                label="TableRows")


def _example(record):
  parsed = example_pb2.Example.FromString(record)
  return {k: (list(f.int64_list.value) or
              [v.decode() for v in f.bytes_list.value])
          for k, f in sorted(parsed.features.feature.items())}


def test_encode_rows_writes_records_per_split_and_dead_letters():
  batch = SourceBatch(
      path="in.csv", first_row=2, order=("in.csv", 0, 0), num_rows=4,
      columns={"id": pa.array(["1", "x", "3", "4"]),
               "name": pa.array(["a", "b", None, "d"]),
               "part": pa.array(["train", "train", "eval", "test"])})
  with TestPipeline() as p:
    out = p | beam.Create([batch]) | EncodeRows(SCHEMA)
    assert_that(out["records"] | beam.Map(
        lambda r: (r[0], r[1], [_example(x) for x in r[2]])),
                equal_to([("train", ("in.csv", 0, 0),
                           [{"id": [1], "name": ["a"]}]),
                          ("eval", ("in.csv", 0, 0), [{"id": [3]}])]))
    assert_that(out[ERRORS] | beam.Map(
        lambda e: (e[0], [(x["row"], x["problems"][0]["feature"])
                          for x in e[1]])),
                equal_to([(("in.csv", 0, 0), [(3, "id"), (5, "splits")])]),
                label="Errors")
    assert_that(out[STATS], equal_to([stats(
        rows_read=4, rows_written=2, rows_rejected=2, records=2)]),
                label="Stats")


SEQUENCES = load_schema({
    "name": "s", "record": "sequence_example", "group_by": "user",
    "order_by": "t", "context": {"user": {"type": "string"}},
    "sequence": {"t": {"type": "int64", "required": True}}})


def _groups(element):
  """(split, [(user, [t per step])]) of an assembled bucket."""
  split, _, grouped = element
  out = []
  for record in grouped:
    parsed = example_pb2.SequenceExample.FromString(record)
    out.append((parsed.context.feature["user"].bytes_list.value[0].decode(),
                [f.int64_list.value[0] for f in
                 parsed.feature_lists.feature_list["t"].feature]))
  return [(split, g) for g in out]


def test_grouped_sequences_gather_a_keys_rows_from_every_batch_in_order():
  batches = [SourceBatch(
      path=path, first_row=1, order=(path, 0, 0), num_rows=len(users),
      columns={"user": pa.array(users), "t": pa.array(ts)})
             for path, users, ts in (
                 ("a.csv", ["ann", "bo", "ann"], ["3", "1", "1"]),
                 ("b.csv", ["ann", "cy"], ["2", "x"]))]
  with TestPipeline() as p:
    out = p | beam.Create(batches) | EncodeGroupedSequences(SEQUENCES,
                                                            buckets=4)
    assert_that(out["records"] | beam.FlatMap(_groups), equal_to([
        ("train", ("ann", [1, 2, 3])), ("train", ("bo", [1]))]))
    assert_that(out["errors"] | beam.FlatMap(lambda e: e[1])
                | beam.Map(lambda x: (x["source"], x["row"])),
                equal_to([("b.csv", 2)]), label="Errors")
    assert_that(out["stats"] | beam.CombineGlobally(
        lambda rows: tuple(map(sum, zip(*rows))) or stats()),
                equal_to([stats(rows_read=5, rows_written=4, rows_rejected=1,
                                records=2, steps=4)]), label="Stats")


def test_count_overlap_counts_records_in_two_splits_once():
  batches = [("train", ("a", 0), [b"r1", b"r2"]),
             ("train", ("a", 1), [b"r3", b"r2"]),
             ("test", ("b", 0), [b"r2", b"r4"]),
             ("eval", ("c", 0), [b"r3"])]
  with TestPipeline() as p:
    counted = p | beam.Create(batches) | CountOverlap()
    assert_that(counted, equal_to([SplitOverlap(2, "records")]))

"""beam_tfrecords/building/ptransforms.py, on values: The public PTransforms:
one schema, used inside your own Beam pipeline."""

import apache_beam as beam

import beam_tfrecords as btr

from tests.helpers.beam_transforms import ROWS, SCHEMA


def test_the_graph_of_a_write_dataset_stages_before_it_writes(tmp_path):
  """Every step that writes into the staging folder runs after the one
  that locks the output: the batches wait for it (a side input), and
  Commit gathers it with the parts."""
  p = beam.Pipeline()
  out = tmp_path / "never-run"
  _ = p | beam.Create(ROWS) | btr.WriteDataset(SCHEMA, str(out))
  labels = []

  class Visit(beam.pipeline.PipelineVisitor):
    def visit_transform(self, node):
      labels.append((node.full_label, [
          s.pvalue.producer.full_label for s in node.side_inputs]))

  p.visit(Visit())
  after = dict(labels)["WriteDataset/AfterStage"]
  assert after == ["WriteDataset/Stage/LockAndStage"]
  assert any(label.endswith("Write/StagedPart") for label, _ in labels)
  assert not out.exists()

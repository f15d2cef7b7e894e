"""beam_tfrecords/core/generations.py, on values: Which build's dataset a
reader reads, and never a mix of two."""


def test_readers_know_the_publishs_names():
  from beam_tfrecords.core import generations
  from beam_tfrecords.sinks import STAGING_PREFIX
  from beam_tfrecords.publish import journal as publishing
  assert generations.STAGING_PREFIX == STAGING_PREFIX
  assert generations.JOURNALS == (publishing.JOURNAL, publishing.ROLLBACK)

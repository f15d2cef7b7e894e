"""read.gc_pause: the cycle collector is off while a batch's rows are made,
and left as it was found, whatever happens inside."""

import gc

import pytest

from beam_tfrecords.read import arrays, reader
from beam_tfrecords.read.gc_pause import paused_gc


@pytest.fixture(autouse=True)
def _collector_back_on():
  yield
  gc.enable()


def test_off_inside_and_as_it_was_after():
  gc.enable()
  with paused_gc():
    assert not gc.isenabled()
    with paused_gc():  # (nested: the outer one turns it back on)
      assert not gc.isenabled()
    assert not gc.isenabled()
  assert gc.isenabled()
  gc.disable()
  with paused_gc():
    assert not gc.isenabled()
  assert not gc.isenabled()  # (off stays off)


def test_back_on_after_an_error():
  gc.enable()
  with pytest.raises(KeyError, match="oops"):
    with paused_gc():
      raise KeyError("oops")
  assert gc.isenabled()


def test_the_readers_make_their_rows_with_it_paused(monkeypatch):
  """RecordDecoder.decode (the PyTorch Dataset's rows) and plain_records
  (iter_records') make their rows paused, and leave it on."""
  seen = []

  def spy(name):
    def made(*args, **kwargs):
      seen.append((name, gc.isenabled()))
      return [{"x": 1}]
    return made
  monkeypatch.setattr(reader, "_plain", spy("plain_records"))
  monkeypatch.setattr(arrays.RecordDecoder, "_decoded",
                      lambda self, records: spy("decode")())
  gc.enable()
  assert reader.plain_records([b"r"], None) == [{"x": 1}]
  decoder = arrays.RecordDecoder.__new__(arrays.RecordDecoder)
  assert decoder.decode([b"r"]) == [{"x": 1}]
  assert decoder.decode([]) == []
  assert seen == [("plain_records", False), ("decode", False)]
  assert gc.isenabled()


def test_the_pure_python_sequence_reader_reads_with_it_paused(monkeypatch):
  """read.sequence_columns (SequenceExamples where the native core is
  missing or the layout is not its) reads each record's dicts paused."""
  from beam_tfrecords.read import sequence_columns  # pylint: disable=import-outside-toplevel
  seen = []

  def found(record):
    seen.append(gc.isenabled())
    raise ValueError("not one")
  monkeypatch.setattr(sequence_columns, "sequence_example", found)
  gc.enable()
  with pytest.raises(sequence_columns.InputError, match="record 0 of the"):
    sequence_columns.sequence_columns([b"r"], None)
  assert seen == [False] and gc.isenabled()


def test_the_viewer_makes_transformed_rows_paused(monkeypatch):
  """`beam-tfrecords view`'s TFT records (no schema of ours: a dict per
  record in Python) are made paused."""
  import types  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.read import view_records  # pylint: disable=import-outside-toplevel
  seen = []

  def made(record, sequence):
    seen.append((record, sequence, gc.isenabled()))
    return {}
  monkeypatch.setattr(view_records, "_transformed", made)
  viewer = view_records.Viewer.__new__(view_records.Viewer)
  viewer.schema = types.SimpleNamespace(is_sequence=False)
  gc.enable()
  assert viewer._decoded("train" + view_records.TRANSFORMED,
                         [b"r"]) == [{}]
  assert seen == [(b"r", False, False)] and gc.isenabled()


def test_pauses_in_two_threads_overlap():
  """A enters, B enters, A leaves: still off (B's rows are being made);
  B leaves: on again, as A found it."""
  import threading  # pylint: disable=import-outside-toplevel
  gc.enable()
  steps = {name: threading.Event() for name in
           ("a_in", "b_in", "a_out", "b_go")}
  seen = {}

  def a():
    with paused_gc():
      steps["a_in"].set()
      steps["b_in"].wait(10)
    seen["after_a"] = gc.isenabled()
    steps["a_out"].set()

  def b():
    steps["a_in"].wait(10)
    with paused_gc():
      steps["b_in"].set()
      steps["b_go"].wait(10)
    seen["after_b"] = gc.isenabled()

  threads = [threading.Thread(target=a), threading.Thread(target=b)]
  for t in threads:
    t.start()
  assert steps["a_out"].wait(10)
  assert seen["after_a"] is False and not gc.isenabled()
  steps["b_go"].set()
  for t in threads:
    t.join(10)
  assert seen["after_b"] is True and gc.isenabled()


def test_a_child_forked_during_a_pause_has_the_collector_back():
  import os  # pylint: disable=import-outside-toplevel
  if not hasattr(os, "fork"):
    pytest.skip("no fork here")
  gc.enable()
  with paused_gc():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: says whether its collector is on, and goes
      os.write(write, b"1" if gc.isenabled() else b"0")
      os._exit(0)  # pylint: disable=protected-access
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(pid, 0)
    assert not gc.isenabled()
  assert answer == b"1" and gc.isenabled()

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

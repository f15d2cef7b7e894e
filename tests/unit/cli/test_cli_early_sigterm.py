"""cli._EarlySigterm: a SIGTERM while Beam imports is said, even when the
exception its handler raises lands where Python ignores exceptions (a
weakref callback of the import machinery: seen in the fast tier, the
build then ran on) — a build's own handling raises it again."""

import signal
import sys
import weakref

import pytest

from beam_tfrecords import cli


@pytest.fixture
def early():
  before = signal.getsignal(signal.SIGTERM)
  handler = cli._EarlySigterm()  # pylint: disable=protected-access
  yield handler
  signal.signal(signal.SIGTERM, before)


def _lost_in_a_weakref_callback(handler):
  """Calls the handler as Python would inside a weakref callback, where
  an exception is printed and dropped."""

  class Thing:
    pass

  thing = Thing()
  ref = weakref.ref(thing, lambda _: handler(signal.SIGTERM, None))
  del thing  # the callback runs: its exception is ignored
  assert ref() is None


def test_a_sigterm_lost_while_beam_imports_is_raised_when_the_build_begins(
    early, monkeypatch):
  lost = []
  monkeypatch.setattr(sys, "unraisablehook", lost.append)
  early.start()
  _lost_in_a_weakref_callback(early)
  assert [type(u.exc_value) for u in lost] == [
      cli._TerminatedEarly]  # pylint: disable=protected-access
  with pytest.raises(cli._TerminatedEarly):  # pylint: disable=protected-access
    early.take_over()
  early.take_over()  # once


def test_without_a_sigterm_the_build_begins(early):
  early.start()
  early.take_over()
  early(signal.SIGTERM, None)  # after: changes nothing
  early.done()


def test_a_sigterm_while_parsing_is_raised_at_the_start(early):
  early(signal.SIGTERM, None)
  with pytest.raises(cli._TerminatedEarly):  # pylint: disable=protected-access
    early.start()


def test_a_sigterm_that_was_raised_is_not_raised_twice_after_done(early):
  early.start()
  with pytest.raises(cli._TerminatedEarly):  # pylint: disable=protected-access
    early(signal.SIGTERM, None)
  early.done()  # (main's finally: the command ended)

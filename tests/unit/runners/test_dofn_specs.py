"""A build's memoized Beam look-ups (runners.dofn_specs, issue 31's fixed
cost): the same answers as Beam's, only inside the build, and Beam as it
was afterwards."""

import functools

import apache_beam as beam
from apache_beam.coders import VarIntCoder
from apache_beam.options.pipeline_options import (DirectOptions,
                                                  PipelineOptions,
                                                  StandardOptions)
from apache_beam.transforms import core, ptransform, userstate
from apache_beam.transforms import util as beam_util
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.typehints import decorators

from beam_tfrecords.runners.dofn_specs import memoized_dofn_specs


class _Plain(beam.DoFn):
  def process(self, element):
    yield element


class _Stateful(beam.DoFn):
  SEEN = BagStateSpec("seen", VarIntCoder())

  def process(self, element, seen=beam.DoFn.StateParam(SEEN)):
    seen.add(1)
    yield element


def test_the_same_answers_as_beam_and_beam_restored_after():
  original_specs = userstate.get_dofn_specs
  original_view = PipelineOptions.view_as
  want = {cls: original_specs(cls()) for cls in (_Plain, _Stateful)}
  assert want[_Stateful][0] and not want[_Plain][0]
  with memoized_dofn_specs():
    assert userstate.get_dofn_specs is not original_specs
    for _ in range(3):
      for cls in (_Plain, _Stateful):
        assert userstate.get_dofn_specs(cls()) == want[cls]
        assert userstate.is_stateful_dofn(cls()) == (cls is _Stateful)
    with memoized_dofn_specs():  # nested: still memoized, then restored
      assert userstate.is_stateful_dofn(_Stateful())
    assert userstate.get_dofn_specs is not original_specs
  assert userstate.get_dofn_specs is original_specs
  assert PipelineOptions.view_as is original_view


def test_views_share_their_values_inside_and_after():
  options = PipelineOptions(["--direct_num_workers=3"])
  with memoized_dofn_specs():
    view = options.view_as(DirectOptions)
    assert options.view_as(DirectOptions) is view
    assert view.direct_num_workers == 3
    options.view_as(StandardOptions).runner = "DirectRunner"
    view.direct_num_workers = 5
    other = PipelineOptions(["--direct_num_workers=2"])
    assert other.view_as(DirectOptions).direct_num_workers == 2
  assert options.view_as(DirectOptions).direct_num_workers == 5
  assert options.view_as(StandardOptions).runner == "DirectRunner"
  assert options.view_as(DirectOptions) is not options.view_as(DirectOptions)


def test_other_threads_get_beams_own_answers():
  """While a build is inside the context, another thread's look-ups are
  Beam's own (no shared cache, nothing of theirs kept alive)."""
  import threading
  inside, done = threading.Event(), threading.Event()

  def build():
    with memoized_dofn_specs():
      inside.set()
      done.wait(30)

  worker = threading.Thread(target=build)
  worker.start()
  assert inside.wait(30)
  try:
    options = PipelineOptions(["--direct_num_workers=3"])
    assert options.view_as(DirectOptions) is not \
        options.view_as(DirectOptions)
    assert userstate.is_stateful_dofn(_Stateful())
  finally:
    done.set()
    worker.join()


class _Both(beam.DoFn):
  def __init__(self, n):
    self.n = n

  def process(self, element, scale=2):
    if element is None:
      return [element]
    yield element * scale * self.n


def _plain(a, b=1, *rest, c: int = 2, **more):
  return a


def test_signatures_and_the_yield_check_are_beams_own_answers():
  """Functions and bound methods of any instance answer as Beam does,
  once per function; other callables are asked every time; Beam's own
  functions are back afterwards in every module that bound them."""
  modules = (decorators, core, ptransform, beam_util)
  original = decorators.get_signature
  original_check = getattr(core, "_check_fn_use_yield_and_return")
  callables = [_plain, _Both(1).process, _Both(2).process, _Plain().process,
               lambda x, y=3: x, functools.partial(_plain, 1, c=5), _Both,
               str.upper, len]
  want = [original(f) for f in callables]
  checks = [original_check(f) for f in (_Both(1).process, _Plain().process,
                                        _plain)]
  assert checks == [True, False, False]
  with memoized_dofn_specs():
    assert all(m.get_signature is not original for m in modules)
    for _ in range(2):
      assert [decorators.get_signature(f) for f in callables] == want
      assert [core.get_signature(f) for f in callables] == want
      assert [getattr(core, "_check_fn_use_yield_and_return")(f)
              for f in (_Both(3).process, _Plain().process, _plain)] == checks
    # A bound method's signature has no `self`, its function's has.
    assert list(decorators.get_signature(_Both.process).parameters) == [
        "self", "element", "scale"]
    assert list(decorators.get_signature(_Both(4).process).parameters) == [
        "element", "scale"]
    # A ParDo is made as Beam makes it (its warning's check included).
    assert beam.ParDo(_Both(1)).fn.n == 1
  assert all(m.get_signature is original for m in modules)
  assert getattr(core, "_check_fn_use_yield_and_return") is original_check


def test_each_function_is_asked_once(monkeypatch):
  asked = []
  original = decorators.get_signature

  def counted(fn):
    asked.append(fn)
    return original(fn)

  for module in (decorators, core, ptransform, beam_util):
    monkeypatch.setattr(module, "get_signature", counted)
  with memoized_dofn_specs():
    for _ in range(3):
      for fn in (_plain, _Both(1).process, _Both(2).process, _Both):
        core.get_signature(fn)
        ptransform.get_signature(fn)
  # _plain once, the bound methods once (one function), the class 6 times.
  assert len(asked) == 1 + 1 + 6
  assert decorators.get_signature is counted  # (what was there is back)


def test_nested_contexts_and_other_threads_keep_beams_signatures():
  """Nested: still memoized, then Beam's own; another thread inside the
  same window gets Beam's own answers (no cache of its own)."""
  import threading
  original = decorators.get_signature
  with memoized_dofn_specs():
    with memoized_dofn_specs():
      assert core.get_signature is not original
    assert core.get_signature is not original
    got = []
    worker = threading.Thread(target=lambda: got.append(
        core.get_signature(_Both(1).process)))
    worker.start()
    worker.join()
    assert got == [original(_Both(1).process)]
  assert core.get_signature is original and ptransform.get_signature is \
      original


def test_a_wrapper_left_behind_is_not_taken_for_beams_own(monkeypatch):
  """A patch undone inside a context puts the wrapper back: the next
  context still calls Beam's own function (no recursion)."""
  original = decorators.get_signature
  with memoized_dofn_specs():
    wrapper = decorators.get_signature
  monkeypatch.setattr(decorators, "get_signature", wrapper)
  with memoized_dofn_specs():
    assert decorators.get_signature(_plain) == original(_plain)
  assert decorators.get_signature is original  # (Beam's own, healed)
  monkeypatch.undo()
  assert decorators.get_signature is original

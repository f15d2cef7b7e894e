"""A build's memoized Beam look-ups (runners.dofn_specs, issue 31's fixed
cost): the same answers as Beam's, only inside the build, and Beam as it
was afterwards."""

import apache_beam as beam
from apache_beam.coders import VarIntCoder
from apache_beam.options.pipeline_options import (DirectOptions,
                                                  PipelineOptions,
                                                  StandardOptions)
from apache_beam.transforms import userstate
from apache_beam.transforms.userstate import BagStateSpec

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

"""Multi-output ParDos, and one-element gathers, on every runner.

Beam's DaskRunner (2.77, runners/dask/transform_evaluator.py) runs a ParDo
as one dask.bag map over each partition, and:
  - does not separate tagged outputs: every consumer of `outputs[tag]`
    gets all of the producer's outputs, untagged;
  - drops what a DoFn emits in finish_bundle (it collects the outputs
    before calling it);
  - computes a side input by running its upstream again, inside the task
    that reads it (a defaulted CombineGlobally reads its input that way);
  - keeps every output of a ParDo twice: as the task's result, and in the
    list of the receiver its task was given (transform_evaluator's
    OneReceiver), which the worker holds with the task. A 40M-row build
    held every batch it had read, 2.7 GB of Arrow columns per worker, and
    grew to 9.8 GB. `release_bundle_outputs()` empties that list once a
    bundle's results are taken (runners.run does it before a Dask run).

`par_do` runs a multi-output DoFn as `ParDo(fn).with_outputs(...)` where
the runner separates outputs, and elsewhere as one ParDo emitting
(tag, value) pairs with a FlatMap per tag picking its own. `gather` is
`combiners.ToList()` without a side input. `threads_for` tells DoFns with
a thread pool (transforms.batch_fn.SchemaFn) to work synchronously where
finish_bundle outputs would be lost.
"""

from typing import Any, Dict, List, Optional, Sequence

import apache_beam as beam

from beam_tfrecords.runners.pipeline_options import is_dask

__all__ = ["par_do", "gather", "separates_outputs", "threads_for",
           "release_bundle_outputs"]


def separates_outputs(pipeline: beam.Pipeline) -> bool:
  """Whether the pipeline's runner separates tagged outputs and keeps
  finish_bundle outputs (all but Beam's DaskRunner)."""
  return not is_dask(pipeline.runner)


def threads_for(pipeline: beam.Pipeline,
                threads: Optional[int] = None) -> Optional[int]:
  """`threads` for a DoFn that emits from a thread pool in finish_bundle;
  1 (no pool) where the runner drops finish_bundle outputs."""
  return threads if separates_outputs(pipeline) else 1


class _AsPairs(beam.DoFn):
  """Runs `fn`, emitting each output as (tag, value); `main` for untagged
  ones."""

  def __init__(self, fn: beam.DoFn, main: str):
    self._fn = fn
    self._main = main

  def setup(self):
    self._fn.setup()

  def start_bundle(self):
    for _ in self._fn.start_bundle() or ():
      raise RuntimeError("outputs in start_bundle are not supported")

  def process(self, element):
    for out in self._fn.process(element) or ():
      if isinstance(out, beam.pvalue.TaggedOutput):
        yield out.tag, out.value
      else:
        yield self._main, out

  def finish_bundle(self):
    late = list(self._fn.finish_bundle() or ())
    if late:
      raise RuntimeError(
          f"{type(self._fn).__name__} emitted {len(late)} output(s) in "
          "finish_bundle, which this runner drops; run it with threads=1")

  def teardown(self):
    self._fn.teardown()


def _pick(pair, tag):
  if pair[0] == tag:
    yield pair[1]


def par_do(pcoll, label: str, fn: beam.DoFn, tags: Sequence[str],
           main: str) -> Dict[str, beam.PCollection]:
  """{main or tag: PCollection} of `fn`'s outputs, on any runner."""
  if separates_outputs(pcoll.pipeline):
    out = pcoll | label >> beam.ParDo(fn).with_outputs(*tags, main=main)
    return {main: out[main], **{tag: out[tag] for tag in tags}}
  pairs = pcoll | label >> beam.ParDo(_AsPairs(fn, main))
  return {tag: pairs | f"{label}[{tag}]" >> beam.FlatMap(_pick, tag)
          for tag in (main, *tags)}


_NOTHING = None


def _without_start(keyed):
  return [item for item in keyed[1] if item is not _NOTHING]


class _Gather(beam.PTransform):
  def expand(self, pcoll):
    start = pcoll.pipeline | "Start" >> beam.Create([_NOTHING])
    return ((pcoll, start)
            | "WithStart" >> beam.Flatten()
            | "OneKey" >> beam.Map(lambda item: (0, item))
            | "Group" >> beam.GroupByKey()
            | "Items" >> beam.Map(_without_start).with_output_types(
                List[Any]))


def gather() -> beam.PTransform:
  """A PTransform: a PCollection (of non-None items) -> one list of all of
  them, also when it is empty; unlike combiners.ToList(), without a side
  input."""
  return _Gather()


def _bundle_releasing_outputs(items, invoker_args, invoker_kwargs,
                              receivers):
  """Beam's apply_dofn_to_bundle, then the receivers' list emptied (its
  results are a list of their own; each task unpickles receivers of its
  own)."""
  # pylint: disable=import-outside-toplevel
  from apache_beam.runners.dask import transform_evaluator
  # Beam's own, kept on its module where release_bundle_outputs() ran
  # (the launcher; also across a reload of this module).
  apply = getattr(transform_evaluator, "_btr_original_bundle",
                  transform_evaluator.apply_dofn_to_bundle)
  try:
    return apply(items, invoker_args, invoker_kwargs, receivers)
  finally:
    receivers.values.clear()


def release_bundle_outputs() -> None:
  """Makes the DaskRunner's ParDos (built from now on in this process)
  run their bundles through `_bundle_releasing_outputs`; workers import
  it by name from this module."""
  # pylint: disable=import-outside-toplevel
  from apache_beam.runners.dask import transform_evaluator
  if not hasattr(transform_evaluator, "_btr_original_bundle"):
    transform_evaluator._btr_original_bundle = (  # type: ignore
        transform_evaluator.apply_dofn_to_bundle)
  transform_evaluator.apply_dofn_to_bundle = _bundle_releasing_outputs

"""beam_tfrecords/runners/gaps.py, on values: Multi-output ParDos, and one-
element gathers, on every runner."""


def test_dask_bundles_let_go_of_their_outputs(monkeypatch):
  """Beam's DaskRunner keeps a ParDo's outputs in the receivers its task
  was given, which the worker holds with the task: the wrapper empties
  them once the bundle's results are taken."""
  from apache_beam.runners.dask import transform_evaluator
  from beam_tfrecords.runners import gaps

  def bundle(items, invoker_args, invoker_kwargs, receivers):
    receivers.values.extend(x * 2 for x in items)
    return [v for v in receivers.values]

  monkeypatch.setattr(transform_evaluator, "apply_dofn_to_bundle", bundle)
  monkeypatch.delattr(transform_evaluator, "_btr_original_bundle",
                      raising=False)
  gaps.release_bundle_outputs()
  gaps.release_bundle_outputs()  # twice: still Beam's own underneath
  assert transform_evaluator.apply_dofn_to_bundle is \
      gaps._bundle_releasing_outputs
  receivers = transform_evaluator.OneReceiver()
  assert transform_evaluator.apply_dofn_to_bundle(
      [1, 2, 3], None, None, receivers) == [2, 4, 6]
  assert receivers.values == []

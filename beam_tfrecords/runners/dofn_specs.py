"""Two of Beam's repeated look-ups, made once while a build's pipeline is
made and run: a DoFn's state and timers, and a view of the options.

Beam 2.77 asks `userstate.get_dofn_specs(dofn)` about every ParDo several
times (when it is made, validated, translated and run: about 250 calls
for a build), and each call inspects the signature of every method the
DoFn has, inherited ones included (about 8,000 signatures). That was a
fifth of a small build's time beyond the Beam import. The answer depends
only on the methods' parameter defaults (StateParam / TimerParam), which
live on the class, so within `memoized_dofn_specs()` it is computed once
per DoFn class that defines no method of its own on the instance (any
other DoFn is asked every time, as Beam does).

Likewise `PipelineOptions.view_as(cls)` builds an argparse parser of
every option of `cls` and parses the flags again on each call (about 300
calls per build, another fifth). A view holds nothing of its own: its
values live in the options' shared `_all_options`, and its flags are the
options' own. So within the context the view of each (options, class)
is made once. Outside it, and for everything else, Beam is untouched.
"""

import contextlib
import threading
import types
from typing import Any, Dict, Iterator

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate

__all__ = ["memoized_dofn_specs"]

_lock = threading.Lock()
_depth = 0
_GET_DOFN_SPECS = userstate.get_dofn_specs
_VIEW_AS = PipelineOptions.view_as


def _memoizing(original):
  cache: Dict[type, Any] = {}

  def get_dofn_specs(dofn):
    if any(isinstance(v, types.MethodType)
           for v in getattr(dofn, "__dict__", {}).values()):
      return original(dofn)  # methods of the instance's own
    kind = type(dofn)
    if kind not in cache:
      cache[kind] = original(dofn)
    return cache[kind]

  return get_dofn_specs


def _viewing(original):
  # (id of the options, class) -> (the options, kept alive, and the view).
  views: Dict[tuple, tuple] = {}

  def view_as(self, cls):
    key = (id(self), cls)
    got = views.get(key)
    if got is None or got[0] is not self:
      got = views[key] = (self, original(self, cls))
    return got[1]

  return view_as


@contextlib.contextmanager
def memoized_dofn_specs() -> Iterator[None]:
  """Within: userstate.get_dofn_specs answers once per DoFn class, and
  PipelineOptions.view_as once per options object and class."""
  global _depth  # pylint: disable=global-statement
  with _lock:
    if _depth == 0:
      userstate.get_dofn_specs = _memoizing(_GET_DOFN_SPECS)
      setattr(PipelineOptions, "view_as", _viewing(_VIEW_AS))
    _depth += 1
  try:
    yield
  finally:
    with _lock:
      _depth -= 1
      if _depth == 0:
        userstate.get_dofn_specs = _GET_DOFN_SPECS
        setattr(PipelineOptions, "view_as", _VIEW_AS)

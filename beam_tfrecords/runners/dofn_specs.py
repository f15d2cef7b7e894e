"""Two of Beam's repeated look-ups, made once while a build's pipeline is
made and run: a DoFn's state and timers, and a view of the options.

Beam 2.77 asks `userstate.get_dofn_specs(dofn)` about every ParDo several
times (when it is made, validated, translated and run: about 250 calls
for a build), and each call inspects the signature of every method the
DoFn has, inherited ones included (about 8,000 signatures). The answer
depends only on the methods' parameter defaults (StateParam /
TimerParam), which live on the class, so within `memoized_dofn_specs()`
it is computed once per DoFn class that defines no method of its own on
the instance (any other DoFn is asked every time, as Beam does).

Likewise `PipelineOptions.view_as(cls)` builds an argparse parser of
every option of `cls` and parses the flags again on each call (about 300
calls per build). A view holds nothing of its own: its values live in
the options' shared `_all_options`, and its flags are the options' own.
So within the context the view of each (options, class) is made once.

Together that was about 0.18 s of a small build. The wrappers answer
from their caches only in the thread that entered the context (the
build's, which makes the pipeline and drives the FnApiRunner); in any
other thread, and outside the context, they call Beam's own functions,
and the caches go with the context. They are installed while any build
is inside the context and removed after, putting back whatever was there
when they were installed.
"""

import contextlib
import threading
import types
from typing import Any, Callable, Dict, Iterator, Optional

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate

__all__ = ["memoized_dofn_specs"]

_lock = threading.Lock()
_depth = 0
# What was there when the wrappers were installed.
_saved: Dict[str, Optional[Callable[..., Any]]] = {"specs": None,
                                                   "view_as": None}
# The caches of the context this thread is in (none outside one).
_local = threading.local()


def _get_dofn_specs(dofn):
  original = _saved["specs"]
  assert original is not None
  cache = getattr(_local, "specs", None)
  if cache is None or any(isinstance(v, types.MethodType)
                          for v in getattr(dofn, "__dict__", {}).values()):
    return original(dofn)  # another thread, or methods of the instance's own
  kind = type(dofn)
  if kind not in cache:
    cache[kind] = original(dofn)
  return cache[kind]


def _view_as(self, cls):
  original = _saved["view_as"]
  assert original is not None
  views = getattr(_local, "views", None)
  if views is None:
    return original(self, cls)
  # (id of the options, class) -> (the options, kept alive, and the view).
  key = (id(self), cls)
  got = views.get(key)
  if got is None or got[0] is not self:
    got = views[key] = (self, original(self, cls))
  return got[1]


@contextlib.contextmanager
def memoized_dofn_specs() -> Iterator[None]:
  """Within, in this thread: userstate.get_dofn_specs answers once per
  DoFn class, and PipelineOptions.view_as once per options object and
  class."""
  global _depth  # pylint: disable=global-statement
  with _lock:
    if _depth == 0:
      _saved["specs"] = userstate.get_dofn_specs
      _saved["view_as"] = PipelineOptions.view_as
      setattr(userstate, "get_dofn_specs", _get_dofn_specs)
      setattr(PipelineOptions, "view_as", _view_as)
    _depth += 1
  outermost = getattr(_local, "specs", None) is None
  if outermost:
    _local.specs, _local.views = {}, {}
  try:
    yield
  finally:
    if outermost:
      _local.specs = _local.views = None
    with _lock:
      _depth -= 1
      if _depth == 0:
        setattr(userstate, "get_dofn_specs", _saved["specs"])
        setattr(PipelineOptions, "view_as", _saved["view_as"])

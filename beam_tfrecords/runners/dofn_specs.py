"""Beam's repeated look-ups, made once while a build's pipeline is made
and run: a DoFn's state and timers, a view of the options, a function's
signature, and whether a function both yields and returns.

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

Together that was about 0.18 s of a small build.

Beam also asks `typehints.decorators.get_signature(fn)` (an
`inspect.signature`) of the same functions and methods again and again:
for type hints, arguments and side inputs, when a ParDo is made and
again when it is translated and run. And each ParDo's `process` has its
source read and tokenized (`core._check_fn_use_yield_and_return`, for a
warning). A plain function's signature, and a bound method's (its
function's, less the first parameter: whatever the instance), and its
source are the function's own, so within the context each is computed
once per function; any other callable (a class, a partial, a callable
object) is asked every time. In the suite's profile these were 12% of
the time in builds (of 100-row builds mostly: the pipeline, not the
rows).

The wrappers answer
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
from apache_beam.transforms import core as beam_core
from apache_beam.transforms import ptransform, userstate
from apache_beam.transforms import util as beam_util
from apache_beam.typehints import decorators

__all__ = ["memoized_dofn_specs"]

_lock = threading.Lock()
_depth = 0
# What was there when the wrappers were installed.
_saved: Dict[str, Optional[Callable[..., Any]]] = {
    "specs": None, "view_as": None, "signature": None, "yields": None}
# The modules that bound Beam's get_signature by name.
_SIGNED = (decorators, beam_core, ptransform, beam_util)
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


def _function_of(fn) -> Optional[types.FunctionType]:
  """The function whose own answer a plain function's or bound method's
  is (None: any other callable)."""
  if isinstance(fn, types.FunctionType):
    return fn
  if isinstance(fn, types.MethodType) and isinstance(fn.__func__,
                                                     types.FunctionType):
    return fn.__func__
  return None


def _once(kind: str, fn):
  """Beam's answer `kind` ("signature" or "yields") about fn, once per
  function (and boundness) in the thread inside the context."""
  original = _saved[kind]
  assert original is not None
  cache = getattr(_local, kind, None)
  function = _function_of(fn)
  if cache is None or function is None:
    return original(fn)
  key = (function, fn is not function)  # (a bound method: one less)
  if key not in cache:
    cache[key] = original(fn)
  return cache[key]


def _get_signature(fn):
  return _once("signature", fn)


def _uses_yield_and_return(fn):
  return _once("yields", fn)


def _install() -> None:
  found = {"specs": userstate.get_dofn_specs,
           "view_as": PipelineOptions.view_as,
           "signature": decorators.get_signature,
           "yields": getattr(beam_core, "_check_fn_use_yield_and_return")}
  ours = (_get_dofn_specs, _view_as, _get_signature, _uses_yield_and_return)
  for kind, fn in found.items():
    if fn not in ours:  # (a wrapper left behind, by a patch undone inside
      _saved[kind] = fn  # a context: what it wraps is still the original)
  setattr(userstate, "get_dofn_specs", _get_dofn_specs)
  setattr(PipelineOptions, "view_as", _view_as)
  for module in _SIGNED:
    if getattr(module, "get_signature", None) in (_saved["signature"],
                                                  _get_signature):
      setattr(module, "get_signature", _get_signature)
  setattr(beam_core, "_check_fn_use_yield_and_return",
          _uses_yield_and_return)


def _uninstall() -> None:
  setattr(userstate, "get_dofn_specs", _saved["specs"])
  setattr(PipelineOptions, "view_as", _saved["view_as"])
  for module in _SIGNED:
    if getattr(module, "get_signature", None) is _get_signature:
      setattr(module, "get_signature", _saved["signature"])
  setattr(beam_core, "_check_fn_use_yield_and_return", _saved["yields"])


@contextlib.contextmanager
def memoized_dofn_specs() -> Iterator[None]:
  """Within, in this thread: userstate.get_dofn_specs answers once per
  DoFn class, PipelineOptions.view_as once per options object and
  class, and get_signature and the yield-and-return check once per
  function."""
  global _depth  # pylint: disable=global-statement
  with _lock:
    if _depth == 0:
      _install()
    _depth += 1
  outermost = getattr(_local, "specs", None) is None
  if outermost:
    _local.specs, _local.views = {}, {}
    _local.signature, _local.yields = {}, {}
  try:
    yield
  finally:
    if outermost:
      _local.specs = _local.views = None
      _local.signature = _local.yields = None
    with _lock:
      _depth -= 1
      if _depth == 0:
        _uninstall()

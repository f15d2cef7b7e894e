"""The native encoding core, or the pure-Python reference: which one runs.

`beam_tfrecords_native` is built from the repository's `native/` folder
(Rust, PyO3; `make setup` builds it where cargo is installed, and workers
get it as a wheel: docs/operations.md). It gives the same bytes as the
pure-Python encoder (`encoding.wire`, `core.tfrecord_files`), which stays
the reference and the fallback: a process without the core writes the
same records, only slower.

    BTR_NATIVE=0   use the pure-Python path even where the core is installed
    BTR_NATIVE=1   require the core (an ImportError names what is missing)
    unset          the core where it is installed, else the fallback

    from beam_tfrecords.core import native
    native.core()        # the module, or None on the fallback
    native.describe()    # "native core beam_tfrecords_native 0.1.0" ...
"""

import functools
import logging
import os
from types import ModuleType
from typing import Optional

__all__ = ["ENV", "CONTRACT", "core", "describe", "log_path", "MISSING"]

ENV = "BTR_NATIVE"
# The contract this package speaks (beam_tfrecords_native.CONTRACT).
CONTRACT = 9
MISSING = ("the native encoding core (beam_tfrecords_native) is not "
           "installed: records are encoded by the pure-Python path (the same "
           "bytes, more CPU: docs/performance.md, the native core); build it "
           "with `make native` (needs cargo)")


@functools.lru_cache(maxsize=None)
def _load(wanted: str) -> Optional[ModuleType]:
  if wanted == "0":
    return None
  try:
    import beam_tfrecords_native as module  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    if wanted == "1":
      raise ImportError(f"{ENV}=1 but {MISSING}") from e
    return None
  if getattr(module, "CONTRACT", None) != CONTRACT:
    if wanted == "1":
      raise ImportError(_stale(module))
    return None
  return module


def _stale(module: ModuleType) -> str:
  return (f"the native encoding core installed (beam_tfrecords_native "
          f"{getattr(module, '__version__', '?')}) speaks contract "
          f"{getattr(module, 'CONTRACT', None)}, this package {CONTRACT}: "
          "records are encoded by the pure-Python path (the same bytes, "
          "more CPU: docs/performance.md, the native core); rebuild it "
          "with `make native`")


_NO = {"0", "false", "no", "off"}
_YES = {"1", "true", "yes", "on"}


def _wanted() -> str:
  """BTR_NATIVE as "0" (the pure-Python path), "1" (the core, required)
  or "" (the core where it is installed)."""
  value = os.environ.get(ENV, "").strip().lower()
  return "0" if value in _NO else "1" if value in _YES else ""


def core() -> Optional[ModuleType]:
  """The native module, or None where the pure-Python path runs."""
  return _load(_wanted())


def describe() -> str:
  """One line for the build's log: which encoder runs, and why."""
  module = core()
  if module is not None:
    return f"records encoded by the native core (beam_tfrecords_native " \
        f"{module.__version__})"
  if _wanted() == "0":
    return f"records encoded by the pure-Python path ({ENV}=0)"
  try:
    import beam_tfrecords_native as stale  # pylint: disable=import-outside-toplevel
  except ImportError:
    return MISSING
  return _stale(stale)


_logged = set()


def log_path(logger: logging.Logger) -> None:
  """Says in `logger` which path this process encodes with, once per
  process (a warning where the core is missing)."""
  line = describe()
  if line in _logged:
    return
  _logged.add(line)
  missing = core() is None and _wanted() != "0"
  logger.log(logging.WARNING if missing else logging.INFO, "%s", line)

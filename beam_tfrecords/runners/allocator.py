"""glibc's allocator and Python's garbage collector set for a build
process: large buffers reused, not mapped afresh each time; the modules
imported before the build not walked by every full collection.

A build allocates and frees buffers of megabytes all the time (a batch's
columns, its encoded records, a bucket of steps, their compressed
bytes). glibc serves an allocation above its mmap threshold with fresh
pages from the kernel and gives them back when it is freed; the
threshold starts at 128 KiB and rises only as such buffers are freed.
Every one of those pages is then zeroed by the kernel on its first
touch: a 1M-row grouped build took about 290,000 page faults and 1 s of
system time so. With the threshold fixed at 32 MiB (the most glibc's own
rule would raise it to) and free memory kept at the top of the heap up
to 64 MiB, buffers are reused: about 100,000 faults and 0.5-0.8 s of
system time, for more peak memory: 50-110 MB in a grouped build, at 1M
rows and at 10M alike, about 20 MB in a 10M-row Example build (it does
not grow with the rows; docs/performance.md).

`tune()` does this in the command line's own process only (beam_tfrecords
.cli), not in a program that calls `btr.build`: the allocator is the
whole process's. It is left alone where the user set glibc's own
variables (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, any MALLOC_*,
or a glibc.malloc tunable in GLIBC_TUNABLES), where BTR_MALLOC is 0 (or
false, no, off), and where the C library is not glibc.

`imports_frozen()`, around the build of the command line's own process
(its main thread; beam_tfrecords.cli), moves the objects alive once
Beam, pyarrow and our modules are imported (about 200,000 of them) out
of the collector's reach (gc.freeze) for the build, and back after it
(gc.unfreeze). A build makes and drops many containers (a batch's
statistics, Beam's bundles), and each full collection walked all of
those objects for nothing: 50-60 ms each, several per 10M-row build.
Garbage made during the build is collected as before; what was alive
at the freeze waits for the thaw. BTR_MALLOC off leaves this alone too,
and so does a freeze made after this module was imported (a program's
own: gc.unfreeze would thaw it too). Objects frozen before that are
taken for the interpreter's (CPython 3.12.1 starts with 375 of them),
count as not frozen, and are thawed with the build's: so is a program's
freeze made before it imported beam_tfrecords.cli.
"""

import contextlib
import ctypes
import gc
import os
import platform
from typing import Iterator

__all__ = ["tune", "imports_frozen", "MMAP_THRESHOLD", "TRIM_THRESHOLD",
           "ENV"]

# mallopt's parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20
ENV = "BTR_MALLOC"
# what was frozen when this module was imported (see the docstring)
_FROZEN_AT_IMPORT = gc.get_freeze_count()


def _off() -> bool:
  return os.environ.get(ENV, "").strip().lower() in ("0", "false", "no",
                                                      "off")


@contextlib.contextmanager
def imports_frozen() -> Iterator[bool]:
  """gc.freeze() after a collection, gc.unfreeze() at the end of the
  block (see the module's docstring); yields whether it froze (not where
  objects were frozen since this module's import: a program's own freeze
  is its own)."""
  if _off() or gc.get_freeze_count() > _FROZEN_AT_IMPORT:
    yield False
    return
  gc.collect()
  gc.freeze()
  try:
    yield True
  finally:
    gc.unfreeze()


def tune() -> bool:
  """Sets the thresholds (see the module's docstring); whether it did."""
  if _off() or any(name.startswith("MALLOC_") for name in os.environ) \
      or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
    return False
  if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
    return False
  try:
    mallopt = ctypes.CDLL(None).mallopt
  except (OSError, AttributeError):
    return False
  mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
  mallopt.restype = ctypes.c_int
  # (mallopt returns 1 on success)
  return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
      mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))

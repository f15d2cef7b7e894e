"""runners.allocator: glibc's thresholds set for the command line's own
process, and left alone where the user or the platform says so (mallopt
recorded, not called: the real one is called in a child process by
tests/e2e/test_cli.py)."""

import ctypes
import platform

import pytest

from beam_tfrecords.runners import allocator


@pytest.fixture
def calls(monkeypatch):
  """mallopt's calls, recorded instead of made."""
  made = []

  class Libc:
    @staticmethod
    def mallopt(param, value):
      made.append((param, value))
      return 1

  for name in list(__import__("os").environ):
    if name.startswith("MALLOC_") or name in (allocator.ENV,
                                              "GLIBC_TUNABLES"):
      monkeypatch.delenv(name)
  monkeypatch.setattr(ctypes, "CDLL", lambda _: Libc())
  monkeypatch.setattr(platform, "system", lambda: "Linux")
  monkeypatch.setattr(platform, "libc_ver", lambda: ("glibc", "2.36"))
  return made


def test_the_thresholds_are_set(calls):
  assert allocator.tune() is True
  assert calls == [(-3, 32 << 20), (-1, 64 << 20)]


@pytest.mark.parametrize("name, value", [
    ("BTR_MALLOC", "0"), ("BTR_MALLOC", "False"), ("BTR_MALLOC", "off"),
    ("MALLOC_ARENA_MAX", "2"), ("MALLOC_MMAP_THRESHOLD_", "131072"),
    ("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072")])
def test_the_user_s_word_leaves_them_alone(calls, monkeypatch, name, value):
  monkeypatch.setenv(name, value)
  assert allocator.tune() is False
  assert calls == []


def test_another_c_library_is_left_alone(calls, monkeypatch):
  monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
  assert allocator.tune() is False
  monkeypatch.setattr(platform, "libc_ver", lambda: ("glibc", "2.36"))
  monkeypatch.setattr(platform, "system", lambda: "Darwin")
  assert allocator.tune() is False
  assert calls == []


def test_the_imported_objects_are_frozen_for_the_block(monkeypatch):
  """imports_frozen: gc.collect, gc.freeze, the block, gc.unfreeze (all
  recorded, not made: the test process is not frozen); left alone under
  BTR_MALLOC off, or where objects were frozen already (a program's own
  freeze stays its own), also when the block raises."""
  import gc
  made = []
  frozen = [0]
  monkeypatch.setattr(gc, "collect", lambda *a: made.append("collect") or 0)
  monkeypatch.setattr(gc, "freeze", lambda: made.append("freeze"))
  monkeypatch.setattr(gc, "unfreeze", lambda: made.append("unfreeze"))
  monkeypatch.setattr(gc, "get_freeze_count", lambda: frozen[0])
  monkeypatch.setattr(allocator, "_FROZEN_AT_IMPORT", 0)
  monkeypatch.delenv(allocator.ENV, raising=False)
  with allocator.imports_frozen() as froze:
    made.append("build")
  assert froze is True
  assert made == ["collect", "freeze", "build", "unfreeze"]
  made.clear()
  with pytest.raises(RuntimeError):
    with allocator.imports_frozen():
      raise RuntimeError("the build failed")
  assert made == ["collect", "freeze", "unfreeze"]
  made.clear()
  frozen[0] = 12
  with allocator.imports_frozen() as froze:
    pass
  assert froze is False and made == []
  # what was frozen at the module's import (the interpreter's: 375
  # objects at CPython 3.12.1's start) is not a program's freeze
  monkeypatch.setattr(allocator, "_FROZEN_AT_IMPORT", 12)
  with allocator.imports_frozen() as froze:
    made.append("build")
  assert froze is True
  assert made == ["collect", "freeze", "build", "unfreeze"]
  made.clear()
  frozen[0] = 0
  monkeypatch.setenv(allocator.ENV, "no")
  with allocator.imports_frozen() as froze:
    pass
  assert froze is False and made == []

"""User code on the workers: a function over each batch of input rows.

    def clean(batch: pa.RecordBatch) -> pa.RecordBatch: ...
    btr.build(schema, inputs, output, preprocess=clean)
    beam-tfrecords build ... --preprocess mypackage.features:clean

The function gets every column of the input (CSV cells as `binary`, null
for an empty cell; Parquet and JSON as typed), and returns the columns the
schema reads, for the same rows in the same order. It runs on the workers,
so it travels there pickled: a function defined in `__main__` goes by
value, one from a module by reference, and the workers must be able to
import that module (docs/operations.md: "Shipping code to workers"). Both
failures are caught early and named: one that does not pickle on the
launcher, one that does not load on a worker before it reads any row.
"""

import dataclasses
import functools
import hashlib
import importlib
import inspect
import os
import platform
import sys
import weakref
from typing import Any, Callable, Dict, Optional, Tuple, Union

import apache_beam
import pyarrow as pa
from apache_beam.internal import pickler

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.version import __version__
from beam_tfrecords.sources.base import SourceBatch

__all__ = ["Preprocess", "resolve_preprocess", "Versions", "check_versions",
           "SHIPPING",
           "import_function", "function_digest"]

SHIPPING = ('workers must be able to import it: install your package on the '
            'workers with --setup_file ./setup.py or --extra_package '
            'dist/PACKAGE.whl, or build it into the worker container '
            '(docs/operations.md: "Shipping code to workers")')


@dataclasses.dataclass(frozen=True)
class Preprocess:
  """A user function, pickled on the launcher for the workers.

  Attributes:
    name: module:qualname, for messages and dataset.json.
    pickled: the function as Beam's pickler wrote it.
    digest: what the build key sees of it: its source text where Python
      has it (else the pickled bytes).
    needed: the columns its output must have (those the schema reads
      that have no default).
  """
  name: str
  pickled: bytes
  digest: str
  needed: Tuple[str, ...] = ()

  def load(self) -> Callable[[pa.RecordBatch], Any]:
    """The function, on a worker; an InputError says what is missing."""
    try:
      return pickler.loads(self.pickled)
    except (ImportError, AttributeError) as e:
      raise InputError(
          f"the preprocess function {self.name} cannot be loaded on this "
          f"worker ({type(e).__name__}: {e}); the {SHIPPING}") from e

  def apply(self, fn, batch: SourceBatch) -> SourceBatch:
    """`batch` with its columns replaced by what `fn` returns."""
    if not batch.num_rows:  # only unreadable rows (errors/): nothing to do
      return batch
    typed, loose = {}, {}
    for name, array in batch.columns.items():
      if isinstance(array, (pa.Array, pa.ChunkedArray)):
        typed[name] = array
      else:  # a JSON column of mixed types: left as it is
        loose[name] = array
    table = pa.RecordBatch.from_pydict(typed) if typed else \
        pa.RecordBatch.from_pydict({"__rows__": pa.nulls(batch.num_rows)}
                                   ).drop_columns(["__rows__"])
    rows = _rows_text(batch)
    try:
      out = fn(table)
    except Exception as e:  # pylint: disable=broad-except
      hint = ""
      if isinstance(e, KeyError):
        if any(f'"{c}"' in str(e) for c in loose):
          hint = (" (in this batch that JSON key holds values of different "
                  "types, which an Arrow column cannot: such a column goes "
                  "around the function, to be judged value by value)")
        else:
          hint = (f" (the batch has the columns {table.schema.names}; with "
                  "JSON input a key that no row of a batch has is not a "
                  "column of that batch: test `name in batch.schema.names`)")
      raise InputError(
          f"the preprocess function {self.name} failed on {rows} of "
          f"{batch.path}: {type(e).__name__}: {e}{hint}; nothing was "
          "published. Fix the function (values it cannot handle should "
          "become nulls, which the schema rejects or defaults row by "
          "row)") from e
    if isinstance(out, pa.Table):
      out = out.combine_chunks().to_batches()[0] if out.num_rows else \
          pa.RecordBatch.from_pydict({c: pa.array([], t) for c, t in
                                      zip(out.column_names,
                                          out.schema.types)})
    if not isinstance(out, pa.RecordBatch):
      raise InputError(
          f"the preprocess function {self.name} returned "
          f"{type(out).__name__} for {rows} of {batch.path}; it must return "
          "a pyarrow.RecordBatch (or Table)")
    if out.num_rows != batch.num_rows:
      raise InputError(
          f"the preprocess function {self.name} returned {out.num_rows} rows "
          f"for the {batch.num_rows} {rows} of {batch.path}; it must keep "
          "every row, in order (every row read is accounted for: set a "
          "required column to null to reject a row, with its reason, into "
          "errors/)")
    names = out.schema.names
    if len(set(names)) != len(names):
      raise InputError(
          f"the preprocess function {self.name} returned the column(s) "
          f"{sorted({n for n in names if names.count(n) > 1})} more than "
          f"once for {rows} of {batch.path}")
    columns: Dict[str, Any] = dict(loose)
    columns.update(zip(names, out.columns))
    missing = [c for c in self.needed if c not in columns]
    if missing:
      raise InputError(
          f"the preprocess function {self.name} returned no column(s) "
          f"{missing} for {rows} of {batch.path}, which the schema reads "
          f"(it returned {list(out.schema.names)})")
    return dataclasses.replace(batch, columns=columns,
                               raw_columns=batch.columns)


def _rows_text(batch: SourceBatch) -> str:
  numbers = [n for n in batch.known_row_numbers() if n is not None]
  if not numbers:
    return f"a batch of {batch.num_rows} rows"
  return f"rows {numbers[0]}-{numbers[-1]}"


def resolve_preprocess(given: Union[str, Callable, None]
                       ) -> Optional[Preprocess]:
  """A function or "module:function" -> Preprocess, checked on the launcher.

  Raises:
    InputError: the module does not import, the name is not a function of
      it, or the function does not pickle.
  """
  if given is None:
    return None
  if isinstance(given, str):
    fn, name = import_function(given), given
  else:
    fn = given
    name = _name(fn)
  if not callable(fn):
    raise InputError(f"the preprocess {name} is a {type(fn).__name__}, not "
                     "a function")
  try:
    pickled = pickler.dumps(fn)
    pickler.loads(pickled)
  except Exception as e:  # pylint: disable=broad-except
    raise InputError(
        f"the preprocess function {name} cannot be pickled to ship it to "
        f"the workers ({type(e).__name__}: {e}). Define it at the top "
        "level of a module and create what it uses (clients, locks, open "
        "files) inside it or when the module is imported, not in a closure "
        "or a default argument") from e
  return Preprocess(name=name, pickled=pickled, digest=function_digest(fn))


def _stable_class_id(cls) -> str:
  return hashlib.sha256(f"{cls.__module__}.{cls.__qualname__}".encode(
      "utf-8")).hexdigest()[:32]


def function_digest(fn) -> str:
  """What the build key sees of the function: its source text, and what
  the workers get of it (closure values, a bound instance, a partial's
  arguments), pickled with class ids that are the same in every process
  (cloudpickle's are random for classes defined in __main__)."""
  from apache_beam.internal import cloudpickle_pickler
  from apache_beam.internal.cloudpickle import cloudpickle
  try:
    source = inspect.getsource(getattr(fn, "func", fn)).encode("utf-8")
  except (OSError, TypeError):
    source = b""
  # cloudpickle remembers each class's id for the process; with trackers
  # of its own, this pickle neither reuses the (random) ids of the pickle
  # shipped to the workers nor leaves its stable ones behind for it.
  trackers = {"_DYNAMIC_CLASS_TRACKER_BY_CLASS": weakref.WeakKeyDictionary,
              "_DYNAMIC_CLASS_TRACKER_BY_ID": weakref.WeakValueDictionary}
  with getattr(cloudpickle, "_DYNAMIC_CLASS_TRACKER_LOCK"):
    saved = {name: getattr(cloudpickle, name) for name in trackers}
    for name, fresh in trackers.items():
      setattr(cloudpickle, name, fresh())
    try:
      shipped = cloudpickle_pickler.dumps(
          fn, config=cloudpickle.CloudPickleConfig(
              id_generator=_stable_class_id))
    finally:
      for name, value in saved.items():
        setattr(cloudpickle, name, value)
  return hashlib.sha256(source + b"\0" + shipped).hexdigest()[:16]


def _name(fn) -> str:
  if isinstance(fn, functools.partial):
    return f"functools.partial({_name(fn.func)})"
  if not hasattr(fn, "__qualname__"):  # a callable instance
    fn = type(fn)
  return f"{getattr(fn, '__module__', '?')}:{fn.__qualname__}"


def _dotted(path: str) -> Optional[str]:
  """The module a relative file path names ("pkg/features.py" ->
  "pkg.features"), or None."""
  path = path.replace("\\", "/")
  while path.startswith("./"):
    path = path[2:]
  if path.endswith(".py"):
    path = path[:-3]
  names = path.split("/")
  return ".".join(names) if all(p.isidentifier() for p in names) else None


def import_function(name: str, setting: str = "--preprocess") -> Callable:
  """The function "module:function" names (`setting`: how messages name
  where it was given), imported as `python -m` would from the current folder.

  Raises:
    InputError: not MODULE:FUNCTION, the module does not import, or it
      has no such name.
  """
  module_name, sep, attr = name.partition(":")
  if not sep or not module_name or not attr:
    if not sep:
      missing = "no colon"
    elif not module_name:
      missing = "the module before the colon is missing"
    else:
      missing = "the function after the colon is missing"
    raise InputError(f"{setting} takes MODULE:FUNCTION (e.g. "
                     f"mypackage.features:clean), got {name!r}: {missing}")
  # A file path, a relative import or a stray character is no module name
  # (importlib would raise TypeError or worse on some of them).
  for what, dotted in (("module", module_name), ("function", attr)):
    if not all(step.isidentifier() for step in dotted.split(".")):
      module = _dotted(module_name) if what == "module" else None
      raise InputError(
          f"{setting} {name}: {dotted!r} is not a Python {what} name; "
          "give MODULE:FUNCTION with dotted names, as you would import them "
          "(e.g. mypackage.features:clean), not a file path"
          + (f"; for the file {module_name} give {module}:{attr} (modules "
             "under the folder the command runs in import)" if module
             else ""))
  # As `python -m` does: modules next to where the command runs import.
  added = os.getcwd() not in sys.path and "" not in sys.path
  if added:
    sys.path.insert(0, os.getcwd())
  try:
    obj: Any = importlib.import_module(module_name)
  except ImportError as e:
    hint = (f"; {module_name} looks like a file name: give the module, "
            f"{module_name[:-3]}:{attr}" if module_name.endswith(".py")
            else "")
    raise InputError(f"{setting} {name}: cannot import {module_name!r} "
                     f"({e}); run from the folder that holds it, or install "
                     f"it{hint}") from e
  finally:
    if added:
      sys.path.remove(os.getcwd())
  for step in attr.split("."):
    if not hasattr(obj, step):
      raise InputError(f"{setting} {name}: {module_name} has no "
                       f"{attr!r}")
    obj = getattr(obj, step)
  return obj


@dataclasses.dataclass(frozen=True)
class Versions:
  """What the launcher runs; the workers must run the same."""
  beam_tfrecords: str = __version__
  apache_beam: str = apache_beam.__version__
  python: str = ".".join(platform.python_version_tuple()[:2])

  def __str__(self):
    return (f"beam_tfrecords {self.beam_tfrecords}, Apache Beam "
            f"{self.apache_beam}, Python {self.python}")


def check_versions(launcher: Versions) -> None:
  """On a worker: fails with both versions when they differ from the
  launcher's (a stale worker image is the usual cause)."""
  here = Versions()
  if here != launcher:
    raise InputError(
        f"the workers run {here} but the launcher runs {launcher}; a stale "
        "worker container or a different environment. Rebuild the worker "
        "image from this version's Dockerfile (docker build -t IMAGE .) and "
        "pass it with --sdk_container_image / --environment_config, or "
        "install the launcher's versions on the workers")
